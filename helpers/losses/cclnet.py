"""CCL-Net: class-correlation learning with a plug-in head and soft labels (Wei et al., MICCAI 2020).

Paper: ``shared/papers/ccl-net_wei-et-al-miccai2020.txt`` (section 2, Algorithm 1, supplementary Prop. S1).

A CCL head sits on the backbone's pooled features f: an embedding network f2 (three fc layers 1024-1024-512 with
batch norm and ReLU in between) maps f to e, a dictionary holds one learnable embedding c_k per class, and
f_d(a, b) = ‖a/‖a‖ − b/‖b‖‖² measures distances. The head is trained with

    L_CCL = CE(q_CCL, y) + α_CC·l_CC,   q_CCL = softmax(−d),  d_k = f_d(e, c_k),
    l_CC  = 1/K² Σ_{k1,k2} ReLU(f_d(c_k1, c_k2) − b)                                   (eq. 1, b = 2, α_CC = 10)

and the dictionary defines a soft label per class, p_k^SL = softmax(−[f_d(c_1, c_k), …, f_d(c_K, c_k)]) (eq. 2),
which supervises the backbone through L_cls = CE(q_cls, y) + KL(p_y^SL ‖ q_cls) (eq. 3). Updates alternate per
mini-batch (Algorithm 1): the backbone and classifier step on L_cls with the head frozen, then the head and
dictionary step on L_CCL with the backbone frozen. The dictionary is frozen for good once the mean correct-class
soft probability p̄ = 1/K Σ_k p_{k,k}^SL has not dropped for 10 consecutive epochs.

Integration with ``helpers.training.fit``: :class:`CCLNetLoss` is the loss object. Its ``forward`` is L_cls (eq. 3)
with the current soft labels detached, so the model's optimiser only ever sees backbone/classifier gradients;
``after_step(features, targets)``, called by ``fit`` after each model step with the batch's detached pooled
features, performs the head/dictionary step with the loss's own optimiser (the backbone is frozen by
construction: the features carry no graph); ``on_epoch_end`` applies the freeze rule.

Departures from the paper, all configurable: the paper does not say how the dictionary is initialised (here
random unit vectors; in 512-d, random directions are nearly orthogonal, i.e. at squared distance ≈ 2 = b, so the
initial soft labels are already close to the uniform smoothing of Prop. S1); the head's learning rate is
constant unless ``lr_decay_epochs`` is given (the paper multiplies it by 0.1 twice at backbone-specific epochs);
"has not dropped" is read as "no new minimum" (early-stopping style, see :class:`DictionaryFreezeRule`); a
head step on a single-sample batch (batch norm cannot train on it) is skipped with a warning.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from helpers.losses.base import (
    MultiClassLoss,
    check_class_targets,
    check_multiclass_inputs,
    check_number,
    promote_float,
)

__all__ = [
    "normalised_squared_distance",
    "pairwise_class_distances",
    "soft_labels_from_dictionary",
    "class_correlation_loss",
    "uniform_smoothing_epsilon",
    "CCLHead",
    "DictionaryFreezeRule",
    "CCLNetLoss",
]


def normalised_squared_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """f_d(a_i, b_j) = ‖a_i/‖a_i‖ − b_j/‖b_j‖‖² for every pair: (N, D) × (M, D) → (N, M), values in [0, 4].

    Computed as the squared norm of the difference (not 2 − 2·cos), so f_d(c, c) is exactly 0.
    """
    a_hat = F.normalize(a, dim=-1)
    b_hat = F.normalize(b, dim=-1)
    return (a_hat.unsqueeze(-2) - b_hat.unsqueeze(-3)).pow(2).sum(-1)


def pairwise_class_distances(dictionary: torch.Tensor) -> torch.Tensor:
    """(K, K) matrix D[k1, k2] = f_d(c_k1, c_k2) of the class embeddings (symmetric, zero diagonal)."""
    return normalised_squared_distance(dictionary, dictionary)


def soft_labels_from_dictionary(dictionary: torch.Tensor) -> torch.Tensor:
    """Eq. (2): row k is p_k^SL = softmax(−[f_d(c_1, c_k), …, f_d(c_K, c_k)]) — the correlation matrix.

    Entry [k, j] = p_{j,k}^SL, the probability the soft label of class k gives to class j. The diagonal is the
    largest entry of its row whenever the embeddings point in distinct directions (f_d(c_k, c_k) = 0 < f_d(c_j, c_k)).
    """
    return torch.softmax(-pairwise_class_distances(dictionary), dim=1)


def class_correlation_loss(dictionary: torch.Tensor, b: float = 2.0) -> torch.Tensor:
    """Eq. (1): l_CC = 1/K² Σ_{k1} Σ_{k2} ReLU(f_d(c_k1, c_k2) − b) (diagonal included, as written)."""
    return F.relu(pairwise_class_distances(dictionary) - b).mean()


def uniform_smoothing_epsilon(num_classes: int, b: float = 2.0) -> float:
    """Prop. S1: equidistant embeddings at distance b give uniform LSR with ε = K·a/S, a = e^{−b}, S = 1 + (K−1)a.

    For K = 7 and b = 2 this is the ε = 0.5228 of CCL-Net's LSR-u5 / LSR-a5 baselines.
    """
    a = math.exp(-b)
    return num_classes * a / (1.0 + (num_classes - 1) * a)


class CCLHead(nn.Module):
    """The CCL block (Fig. 1c): embedding network f2, dictionary θ_dict = {c_k}, distance f_d and L_CCL."""

    def __init__(
        self, feature_dim: int, num_classes: int, hidden_dims: Sequence[int] = (1024, 1024), embedding_dim: int = 512
    ):
        super().__init__()
        for name, value in (
            ("feature_dim", feature_dim),
            ("num_classes", num_classes),
            ("embedding_dim", embedding_dim),
            *(("hidden_dims", h) for h in hidden_dims),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if num_classes < 2:
            raise ValueError(f"num_classes must be at least 2, got {num_classes}")
        layers: list[nn.Module] = []
        width = feature_dim
        for hidden in hidden_dims:
            layers += [nn.Linear(width, hidden), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True)]
            width = hidden
        layers.append(nn.Linear(width, embedding_dim))
        self.embed = nn.Sequential(*layers)
        # Unit-norm random directions: f_d only sees directions, and the gradient w.r.t. c_k scales as 1/‖c_k‖,
        # so a standard-normal init (‖c_k‖ ≈ √512) would make the dictionary's angular steps ~500x smaller.
        self.dictionary = nn.Parameter(F.normalize(torch.randn(num_classes, embedding_dim), dim=1))
        self.feature_dim = feature_dim
        self.num_classes = num_classes

    def distances(self, features: torch.Tensor) -> torch.Tensor:
        """d = [f_d(e, c_1), …, f_d(e, c_K)] for e = f2(f): (N, K)."""
        if features.ndim != 2 or features.shape[1] != self.feature_dim:
            raise ValueError(f"features must have shape (N, {self.feature_dim}), got {tuple(features.shape)}")
        return normalised_squared_distance(self.embed(features), self.dictionary)

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        """−d, so that q_CCL = softmax(−d)."""
        return -self.distances(features)

    def soft_labels(self) -> torch.Tensor:
        return soft_labels_from_dictionary(self.dictionary)

    def loss(
        self, features: torch.Tensor, target: torch.Tensor, alpha_cc: float = 10.0, b: float = 2.0
    ) -> torch.Tensor:
        """L_CCL = CE(q_CCL, y) + α_CC·l_CC (mean over the batch)."""
        logits = self.logits(features)
        logits, target = check_multiclass_inputs(logits, target)
        return F.cross_entropy(logits, target) + alpha_cc * class_correlation_loss(self.dictionary, b)


class DictionaryFreezeRule:
    """The convergence rule of section 2: freeze θ_dict once p̄ "does not drop for ``patience`` consecutive epochs".

    Read as early stopping on p̄: an epoch is a drop if p̄ < (lowest value so far) − ``min_delta``; the rule fires
    at the end of the epoch that completes ``patience`` consecutive epochs without a drop. The first measured
    epoch always counts as a drop (the reference starts at +inf), so the earliest firing is after epoch
    1 + patience. ``best_epoch`` (the last drop) is what the paper's Table 2 reports as "epochs to converge".
    """

    def __init__(self, patience: int = 10, min_delta: float = 0.0):
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ValueError(f"patience must be a positive integer, got {patience!r}")
        if not isinstance(min_delta, (int, float)) or not math.isfinite(min_delta) or min_delta < 0:
            raise ValueError(f"min_delta must be a non-negative number, got {min_delta!r}")
        self.patience = patience
        self.min_delta = float(min_delta)
        self.best = math.inf
        self.best_epoch: Any = None
        self.epochs_without_drop = 0
        self.fired = False
        self.fired_epoch: Any = None

    def update(self, value: float, epoch: Any = None) -> bool:
        """Record one epoch's p̄; return True exactly once, on the epoch where the rule fires."""
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"mean correct-class probability must be finite, got {value}")
        if self.fired:
            return False
        if value < self.best - self.min_delta:
            self.best, self.best_epoch, self.epochs_without_drop = value, epoch, 0
        else:
            self.epochs_without_drop += 1
        if self.epochs_without_drop >= self.patience:
            self.fired, self.fired_epoch = True, epoch
            return True
        return False

    def state_dict(self) -> dict:
        return dict(vars(self))

    def load_state_dict(self, state: dict) -> None:
        for key in ("patience", "min_delta", "best", "best_epoch", "epochs_without_drop", "fired", "fired_epoch"):
            setattr(self, key, state[key])


class CCLNetLoss(MultiClassLoss):
    """CCL-Net as a loss object for ``helpers.training.fit`` (Wei et al. 2020, eqs. 1-3, Algorithm 1).

    ``loss(logits, target)`` = L_cls = CE(q_cls, y) + KL(p_y^SL ‖ q_cls) (eq. 3), mean over the batch, with
    the soft labels detached (no gradient reaches the dictionary). ``after_step(features, targets)`` is
    Algorithm 1 line 7: one step of the head's own optimiser on L_CCL for the detached features of the batch
    the model has just been stepped on. ``on_epoch_end(epoch, history)`` records p̄ and applies the freeze rule.

    Defaults follow the paper: α_CC = 10, b = 2, lr_CCL = 5e-4 with SGD (momentum 0.9, weight decay 1e-4),
    patience 10, f2 widths 1024-1024-512. ``optimizer="adam"`` is offered because 5e-4 with SGD moves the
    dictionary slowly (the paper's ResNet-18 needed 137 epochs to converge at this rate, Table 2).
    """

    METRIC_KEYS = ("ccl_mean_correct_prob", "ccl_loss", "ccl_accuracy", "ccl_dictionary_frozen", "ccl_lr")

    def __init__(
        self,
        feature_dim: int,
        num_classes: int,
        lr_ccl: float = 5e-4,
        alpha_cc: float = 10.0,
        b: float = 2.0,
        freeze_patience: int = 10,
        optimizer: str = "sgd",
        momentum: float = 0.9,
        weight_decay: float = 1e-4,
        hidden_dims: Sequence[int] = (1024, 1024),
        embedding_dim: int = 512,
        grad_clip: float | None = None,
        freeze_min_delta: float = 0.0,
        lr_decay_epochs: Sequence[int] = (),
        lr_decay_factor: float = 0.1,
    ):
        super().__init__()
        for name, value in (
            ("lr_ccl", lr_ccl),
            ("alpha_cc", alpha_cc),
            ("b", b),
            ("momentum", momentum),
            ("weight_decay", weight_decay),
            ("lr_decay_factor", lr_decay_factor),
        ):
            check_number(name, value, 0.0)
        if lr_ccl <= 0:
            raise ValueError(f"lr_ccl must be positive, got {lr_ccl}")
        if grad_clip is not None and not (isinstance(grad_clip, (int, float)) and grad_clip > 0):
            raise ValueError(f"grad_clip must be None or a positive number, got {grad_clip!r}")
        if optimizer not in ("sgd", "adam"):
            raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}")
        self.head = CCLHead(feature_dim, num_classes, hidden_dims, embedding_dim)
        self.alpha_cc = float(alpha_cc)
        self.b = float(b)
        self.grad_clip = grad_clip
        self.lr_decay_epochs = sorted(int(e) for e in lr_decay_epochs)
        self.lr_decay_factor = float(lr_decay_factor)
        if optimizer == "sgd":
            self.optimizer = torch.optim.SGD(
                self.head.parameters(), lr=lr_ccl, momentum=momentum, weight_decay=weight_decay
            )
        else:
            self.optimizer = torch.optim.Adam(self.head.parameters(), lr=lr_ccl, weight_decay=weight_decay)
        self.freeze_rule = DictionaryFreezeRule(freeze_patience, freeze_min_delta)
        self.epoch_log: list[dict] = []
        self.epochs_completed = 0
        self.skipped_steps = 0
        self._reset_epoch_stats()

    # ---------------------------------------------------------------------------------------------- state

    @property
    def num_classes(self) -> int:
        return self.head.num_classes

    @property
    def dictionary_frozen(self) -> bool:
        return not self.head.dictionary.requires_grad

    def freeze_dictionary(self) -> None:
        self.head.dictionary.requires_grad_(False)
        self.head.dictionary.grad = None

    def joint_parameters(self) -> list[nn.Parameter]:
        """None: the head and dictionary are trained by the loss's own optimiser in ``after_step``."""
        return []

    def _reset_epoch_stats(self) -> None:
        self._loss_sum = torch.zeros(())
        self._correct = torch.zeros(())
        self._seen = 0

    def _ensure_device(self, device: torch.device) -> None:
        """Follow the model to its device (moves the head and the optimiser's state)."""
        if self.head.dictionary.device == device:
            return
        self.to(device)
        for state in self.optimizer.state.values():
            for key, value in state.items():
                if torch.is_tensor(value) and value.ndim > 0:
                    state[key] = value.to(device)
        self._loss_sum = self._loss_sum.to(device)
        self._correct = self._correct.to(device)

    def get_extra_state(self) -> dict:
        return {
            "optimizer": self.optimizer.state_dict(),
            "freeze_rule": self.freeze_rule.state_dict(),
            "dictionary_frozen": self.dictionary_frozen,
            "epoch_log": [dict(r) for r in self.epoch_log],
            "epochs_completed": self.epochs_completed,
            "skipped_steps": self.skipped_steps,
        }

    def set_extra_state(self, state: dict) -> None:
        if state["dictionary_frozen"]:
            self.freeze_dictionary()
        else:
            self.head.dictionary.requires_grad_(True)
        self.optimizer.load_state_dict(state["optimizer"])
        self.freeze_rule.load_state_dict(state["freeze_rule"])
        self.epoch_log = [dict(r) for r in state["epoch_log"]]
        self.epochs_completed = int(state["epochs_completed"])
        self.skipped_steps = int(state["skipped_steps"])

    def stored_state(self) -> dict:
        """What a stored reference run keeps (``helpers.training.run_store``): the dictionary and the epoch log, not the
        1.7-million-parameter embedding network or its optimiser, which no notebook reads after training."""
        return {
            "dictionary": self.head.dictionary.detach().cpu().clone(),
            "dictionary_frozen": self.dictionary_frozen,
            "epoch_log": [dict(r) for r in self.epoch_log],
            "epochs_completed": self.epochs_completed,
            "skipped_steps": self.skipped_steps,
        }

    def load_stored_state(self, state: dict) -> None:
        with torch.no_grad():
            self.head.dictionary.copy_(state["dictionary"])
        if state["dictionary_frozen"]:
            self.freeze_dictionary()
        self.epoch_log = [dict(r) for r in state["epoch_log"]]
        self.epochs_completed = int(state["epochs_completed"])
        self.skipped_steps = int(state["skipped_steps"])
        self._replay_freeze_rule()

    def _replay_freeze_rule(self) -> None:
        """Rebuild the freeze rule's state (converged / frozen epoch) from the logged p̄ of every epoch: the rule is
        a deterministic function of that sequence, so a stored run need not keep it."""
        self.freeze_rule = DictionaryFreezeRule(self.freeze_rule.patience, self.freeze_rule.min_delta)
        for record in self.epoch_log:
            self.freeze_rule.update(record["ccl_mean_correct_prob"], record["epoch"])

    # ---------------------------------------------------------------------------------------------- soft labels

    def correlation_matrix(self) -> torch.Tensor:
        """(K, K) learned class correlations: row k is the soft-label distribution p_k^SL (eq. 2), detached."""
        with torch.no_grad():
            return soft_labels_from_dictionary(self.head.dictionary.float())

    def mean_correct_class_probability(self) -> float:
        """p̄ = 1/K Σ_k p_{k,k}^SL, the paper's measure of label softness (lower = softer)."""
        return float(self.correlation_matrix().diagonal().mean())

    # ---------------------------------------------------------------------------------------------- backbone loss

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """L_cls = CE(q_cls, y) + KL(p_y^SL ‖ q_cls) (eq. 3), mean over the batch; soft labels detached."""
        logits, target = check_multiclass_inputs(logits, target)
        if logits.shape[1] != self.num_classes:
            raise ValueError(f"CCLNetLoss was built for {self.num_classes} classes, logits have {logits.shape[1]}")
        self._ensure_device(logits.device)
        logits = promote_float(logits)
        log_q = F.log_softmax(logits, dim=1)
        soft = self.correlation_matrix().to(log_q)[target]
        ce = -log_q.gather(1, target.unsqueeze(1)).squeeze(1)
        kl = (torch.xlogy(soft, soft) - soft * log_q).sum(dim=1)
        return (ce + kl).mean()

    # ---------------------------------------------------------------------------------------------- head step

    def after_step(self, features: torch.Tensor, targets: torch.Tensor) -> torch.Tensor | None:
        """Algorithm 1 line 7: one step on L_CCL for θ_2 and θ_dict (θ_dict only until frozen).

        ``features``: the batch's pooled backbone features (N, D); they are detached here, so the backbone
        cannot change. Returns the detached L_CCL value, or None when the step is skipped (N < 2).
        """
        features = promote_float(features.detach())
        targets = check_class_targets(targets, self.num_classes, features.shape[0])
        if features.shape[0] < 2:
            self.skipped_steps += 1
            warnings.warn(
                "CCLNetLoss.after_step: skipped a head step on a batch of one sample (batch norm in "
                "the CCL head needs at least two); use drop_last or a batch size that avoids it",
                RuntimeWarning,
                stacklevel=2,
            )
            return None
        self._ensure_device(features.device)
        self.head.train()
        with torch.enable_grad(), torch.autocast(device_type=features.device.type, enabled=False):
            self.optimizer.zero_grad(set_to_none=True)
            logits = self.head.logits(features)
            loss = F.cross_entropy(logits, targets) + self.alpha_cc * class_correlation_loss(
                self.head.dictionary, self.b
            )
            loss.backward()
            if self.grad_clip is not None:
                nn.utils.clip_grad_norm_(self.head.parameters(), self.grad_clip)
            self.optimizer.step()
        loss = loss.detach()
        self._loss_sum = self._loss_sum.to(loss.device) + loss * features.shape[0]
        self._correct = self._correct.to(loss.device) + (logits.detach().argmax(1) == targets).sum()
        self._seen += features.shape[0]
        return loss

    def ccl_proba(self, features: torch.Tensor) -> torch.Tensor:
        """q_CCL = softmax(−d) for features (head in eval mode; for diagnostics)."""
        was_training = self.head.training
        self.head.eval()
        try:
            with torch.no_grad():
                return torch.softmax(self.head.logits(promote_float(features.detach())), dim=1)
        finally:
            self.head.train(was_training)

    # ---------------------------------------------------------------------------------------------- epoch end

    def on_epoch_end(self, epoch: Any, history: dict | list | None = None) -> dict:
        """Record p̄ and the head's epoch statistics, apply the freeze rule, decay lr_CCL at the milestones.

        The record (keys ``METRIC_KEYS``) is appended to ``self.epoch_log`` and written into ``history``: a dict
        is updated in place; for a list of per-epoch dicts, the last one whose "epoch" equals ``epoch`` is.
        """
        p_bar = self.mean_correct_class_probability()
        if not self.dictionary_frozen and self.freeze_rule.update(p_bar, epoch):
            self.freeze_dictionary()
        self.epochs_completed += 1
        record = {
            "epoch": epoch,
            "ccl_mean_correct_prob": p_bar,
            "ccl_loss": float(self._loss_sum / self._seen) if self._seen else math.nan,
            "ccl_accuracy": float(self._correct / self._seen) if self._seen else math.nan,
            "ccl_dictionary_frozen": self.dictionary_frozen,
            "ccl_lr": self.optimizer.param_groups[0]["lr"],
        }
        self.epoch_log.append(record)
        self._reset_epoch_stats()
        if self.epochs_completed in self.lr_decay_epochs:
            for group in self.optimizer.param_groups:
                group["lr"] *= self.lr_decay_factor
        target = None
        if isinstance(history, dict):
            target = history
        elif isinstance(history, list):
            target = next((h for h in reversed(history) if isinstance(h, dict) and h.get("epoch") == epoch), None)
        if target is not None:
            target.update({k: record[k] for k in self.METRIC_KEYS})
        return record

    @property
    def converged_epoch(self):
        """Epoch of the last drop of p̄ once the rule has fired (Table 2's "epochs to converge"), else None."""
        return self.freeze_rule.best_epoch if self.freeze_rule.fired else None

    @property
    def frozen_epoch(self):
        return self.freeze_rule.fired_epoch

    def extra_repr(self) -> str:
        return (
            f"alpha_cc={self.alpha_cc}, b={self.b}, lr_ccl={self.optimizer.param_groups[0]['lr']}, "
            f"patience={self.freeze_rule.patience}, dictionary_frozen={self.dictionary_frozen}"
        )

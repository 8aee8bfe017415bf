"""The training version: a name for what the training code *does*, not for how its source is written.

A stored or cached run is current when the training version it was stored under equals today's. The version is
the hash of the outputs of a short, fixed CPU computation (:func:`probe_outputs`, about a second) that exercises
every part of the code that shapes a trained run:

* every loss the course trains (multi-class: cross-entropy, label smoothing with and without a prior, focal,
  FLSD-53, MbLS, LS+, DCA, MDCA, CCL-Net; multi-label: BCE, asymmetric focal, ASL, SPA, SPA+LPR, BCE+LPR, LDACE,
  LDACE+CCL): value, gradient and ``predict_proba`` on fixed float64 logits;
* the models (:data:`PROBED_MODELS`): seeded initialisation, forward and backward;
* :func:`helpers.train.fit` for a few steps on a tiny generated data set under each schedule and optimiser, with
  and without augmentation, multi-class and multi-label, and CCL-Net's alternating updates: the history (which
  holds the validation metrics that pick the kept epoch) and the predicted logits.

So an edit of a docstring, a comment, the layout or a metric that training does not use leaves the version
unchanged, and an edit of a loss's arithmetic changes it. Outputs are rounded before hashing (8 significant digits
in float64, 4 after float32 training steps) and the probe runs on one thread in deterministic mode, so that
another CPU or BLAS build gives the same version; a change smaller than the rounding is not seen.

The version is computed once per process, lazily, from the code *loaded in this process*: every module the probe
exercises is imported here, when :mod:`helpers.experiments` is, so a process that imported older code and whose
files were edited afterwards keeps computing the older code's version and never stores or caches a run under the
newer one. The hyper-parameters below are fixed probe values; the course's own values are part of each run's
definition (its key), not of the version.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any, Callable, Iterator

import torch
from torch import nn

from . import determinism, metrics, models, train  # noqa: F401  (metrics: loaded now, used by fit's validation)
from .cclnet import CCLNetLoss
from .data import DatasetBundle, Split
from .losses import (ASL, BCE, DCA, FLSD53, LDACE, LPR, MDCA, SPA, AsymmetricFocal, Composite, CrossEntropy,
                     FocalLoss, LabelSmoothing, LDACEWithCCL, LSPlus, MbLS)

LOSS_DIGITS = 8  # significant digits of float64 loss outputs
TRAINING_DIGITS = 4  # significant digits of outputs after float32 training steps
N_CLASSES, N_LABELS = 4, 5
#: the models the course trains; resnet50 is built by the same ResNetClassifier code as resnet18 (only torchvision's
#: constructor differs, and the torch version is recorded with every run), and probing it would double the time
PROBED_MODELS = ("small_cnn", "small_cnn_wide", "resnet18")


def multiclass_losses() -> dict[str, Callable[[], nn.Module]]:
    """Every multi-class loss the course trains, as fixed probe instances (CCL-Net is probed through ``fit``)."""
    prior = torch.tensor([0.4, 0.3, 0.2, 0.1])
    accuracy = torch.tensor([0.9, 0.7, 0.5, 0.35])
    return {"cross-entropy": CrossEntropy, "LS": lambda: LabelSmoothing(0.1),
            "LS prior": lambda: LabelSmoothing(0.1, prior=prior), "focal": lambda: FocalLoss(3.0),
            "FLSD-53": FLSD53, "MbLS": lambda: MbLS(margin=2.0, lam=0.1),
            "LS+": lambda: LSPlus(accuracy, alpha=0.5), "DCA": lambda: DCA(beta=1.0), "MDCA": lambda: MDCA(beta=1.0)}


def multilabel_losses() -> dict[str, Callable[[], nn.Module]]:
    """Every multi-label loss the course trains (:func:`helpers.multilabel_analysis.course_losses`' set)."""
    return {"BCE": BCE, "focal": lambda: AsymmetricFocal(gamma_pos=0.0, gamma_neg=4.0),
            "ASL": lambda: ASL(gamma_pos=0.0, gamma_neg=4.0, margin=0.05, eps=1e-8),
            "SPA": lambda: SPA(1.0, 1.0, 0.0, 5.0, 3.0, 1.0),
            "SPA+LPR": lambda: Composite(SPA(1.0, 1.0, 0.0, 5.0, 3.0, 1.0), [(1.0, LPR())]),
            "BCE+LPR": lambda: Composite(BCE(), [(1.0, LPR())]), "LDACE": lambda: LDACE(diagonal="p_squared"),
            "LDACE+CCL": lambda: LDACEWithCCL(diagonal="p_squared", ccl_weight=1.0, n_bins=1)}


def _loss_outputs(loss: nn.Module, logits: torch.Tensor, targets: torch.Tensor) -> Iterator[torch.Tensor]:
    logits = logits.clone().requires_grad_(True)
    value = loss.double()(logits, targets)
    value.backward()
    yield value.detach()
    yield logits.grad
    with torch.no_grad():
        yield loss.predict_proba(logits.detach())


def _loss_probe() -> Iterator[tuple[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(24, N_CLASSES, generator=generator, dtype=torch.float64) * 2
    labels = torch.randint(0, N_CLASSES, (24,), generator=generator)
    for name, make in multiclass_losses().items():
        for output in _loss_outputs(make(), logits, labels):
            yield f"loss {name}", output
    logits = torch.randn(24, N_LABELS, generator=generator, dtype=torch.float64) * 2
    targets = (torch.rand(24, N_LABELS, generator=generator) < 0.3).to(torch.float64)
    for name, make in multilabel_losses().items():
        for output in _loss_outputs(make(), logits, targets):
            yield f"loss {name}", output


def _model_probe() -> Iterator[tuple[str, torch.Tensor]]:
    images = train.to_float(torch.randint(0, 256, (2, 3, 8, 8), generator=torch.Generator().manual_seed(1),
                                          dtype=torch.uint8))
    for name in PROBED_MODELS:
        torch.manual_seed(0)
        model = models.build_model(name, 3, N_CLASSES, image_size=8).train()
        logits = model(images)
        logits.square().sum().backward()
        gradient_norms = torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None])
        yield f"model {name}", logits.detach()
        yield f"model {name} gradients", gradient_norms


def tiny_bundle(task: str = "multi-class", n: int = 64) -> DatasetBundle:
    """A fixed generated set of ``n`` 8x8 grey images with a learnable signal in the top rows."""
    generator = torch.Generator().manual_seed(2)
    images = torch.randint(0, 60, (n, 1, 8, 8), generator=generator, dtype=torch.uint8)
    if task == "multi-class":
        labels = torch.randint(0, N_CLASSES, (n,), generator=generator)
        images[:, :, :3] += (labels * 60).to(torch.uint8).view(-1, 1, 1, 1)
        names = [f"class {k}" for k in range(N_CLASSES)]
    else:
        labels = (torch.rand(n, N_LABELS, generator=generator) < 0.4).float()
        images[:, :, :N_LABELS, 0] += (labels * 150).to(torch.uint8).view(n, 1, N_LABELS)
        names = [f"label {k}" for k in range(N_LABELS)]
    split = Split(images, labels)
    return DatasetBundle(name=f"probe {task}", task=task, class_names=names, train=split, val=split, test=split,
                         source="generated by helpers.training_version", licence="none", image_size=8)


def _fit_cases() -> dict[str, tuple[str, Callable[[], nn.Module], dict[str, Any]]]:
    """(task, loss, TrainConfig settings) of each probed training: both recipes' schedules and optimisers."""
    return {"onecycle, augmented": ("multi-class", CrossEntropy, dict(schedule="onecycle", augment=True,
                                                                      weight_decay=5e-4)),
            "constant, last epoch": ("multi-class", CrossEntropy, dict(schedule="constant", augment=False,
                                                                       weight_decay=0.0, monitor="epoch",
                                                                       monitor_mode="max")),
            "cosine, adamw, clipped": ("multi-class", lambda: FocalLoss(2.0),
                                       dict(schedule="cosine", optimizer="adamw", lr=0.01, grad_clip=1.0,
                                            augment=False)),
            "CCL-Net": ("multi-class", lambda: CCLNetLoss(128, N_CLASSES, hidden_dims=(16,), embedding_dim=8,
                                                          lr_ccl=1e-2),
                        dict(schedule="onecycle", augment=False)),
            "multi-label": ("multi-label", BCE, dict(schedule="onecycle", augment=False))}


def _fit_probe() -> Iterator[tuple[str, torch.Tensor]]:
    for name, (task, make_loss, settings) in _fit_cases().items():
        bundle = tiny_bundle(task)
        n_outputs = bundle.n_classes
        torch.manual_seed(3)
        model = models.build_model("small_cnn", 1, n_outputs, image_size=8)
        loss = make_loss()
        config = train.TrainConfig(**({"epochs": 2, "batch_size": 16, "lr": 0.05, "device": "cpu",
                                       "progress": False, "seed": 4} | settings))
        result = train.fit(model, loss, bundle, config)
        for record in result.history:
            yield f"fit {name} history", torch.tensor([value for key, value in sorted(record.items())
                                                       if key != "seconds" and isinstance(value, (int, float))],
                                                      dtype=torch.float64)
        yield f"fit {name} logits", train.predict_logits(result.model, bundle.val.images)


def _rounded(values: torch.Tensor, digits: int) -> str:
    # + 0.0 turns -0.0 into 0.0; nan and inf print as themselves
    return ",".join(f"{value + 0.0:.{digits}g}" for value in values.detach().double().flatten().tolist())


def probe_outputs() -> Iterator[tuple[str, str]]:
    """(name, rounded values) of every probed output, in a fixed order (module docstring)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    state = torch.random.get_rng_state()
    try:
        with determinism.deterministic():
            for name, values in _loss_probe():
                yield name, _rounded(values, LOSS_DIGITS)
            for probe in (_model_probe, _fit_probe):
                for name, values in probe():
                    yield name, _rounded(values, TRAINING_DIGITS)
    finally:
        torch.random.set_rng_state(state)
        torch.set_num_threads(threads)


def compute_training_version() -> str:
    """Run the probe now and hash its outputs (16 hex digits)."""
    digest = hashlib.sha256()
    for name, text in probe_outputs():
        digest.update(f"{name}={text};".encode())
    return digest.hexdigest()[:16]


@functools.cache
def training_version() -> str:
    """The training version of the code loaded in this process, computed on first use and kept."""
    return compute_training_version()

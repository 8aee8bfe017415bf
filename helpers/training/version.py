"""The training version: a name for what the training code *does*, not for how its source is written.

A stored or cached run is current when the training version it was stored under equals today's. The version is
the hash of the outputs of a short, fixed CPU computation (:func:`probe_outputs`, about a second) that exercises
every part of the code that shapes a trained run:

* every loss the course trains (multi-class: cross-entropy, label smoothing with and without a prior, focal,
  FLSD-53, MbLS, LS+, DCA, MDCA; multi-label: BCE, asymmetric focal, ASL, SPA, SPA+LPR, BCE+LPR, LDACE, LDACE+CCL):
  value, gradient and ``predict_proba`` on fixed float64 logits;
* CCL-Net's loss and its alternating head updates (``after_step``, ``on_epoch_end``);
* the models (:data:`PROBED_MODELS`): seeded initialisation, forward and backward;
* :func:`helpers.training.fit` for a few steps on a tiny generated data set under each schedule and optimiser, with
  and without augmentation, multi-class and multi-label: the history (which holds the validation metrics that pick
  the kept epoch) and a summary of the predicted logits.

So an edit of a docstring, a comment, the layout or a metric that training does not use leaves the version
unchanged, and an edit of a loss's arithmetic changes it. For the version to be the same on every CPU and BLAS
build, everything runs in float64 (the models through :class:`Float64Model`) on one thread in deterministic mode,
and each output is rounded to a few digits of its own scale before hashing (8 for the losses, 4 after training
steps; :func:`_rounded`): PyTorch's AVX-512, AVX2 and plain (``ATEN_CPU_CAPABILITY=default``) kernels give the same
version. A change of behaviour smaller than the rounding is not seen.

The version is computed lazily from the code *loaded in this process*: every module the probe exercises is imported
here, when :mod:`helpers.training.run_store` is, so a process that imported older code and whose files were edited
afterwards keeps computing the older code's version and never stores or caches a run under the newer one. It is
kept while that loaded code stays the same, and computed again when ``importlib.reload`` or IPython's
``%autoreload`` replaced or patched a function or class of it (:func:`training_version`). The hyper-parameters
below are fixed probe values; the course's own values are part of each run's definition (its key), not of the
version.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from helpers.data import DatasetBundle, Split
from helpers.losses import (
    ASL,
    BCE,
    DCA,
    FLSD53,
    LDACE,
    LPR,
    MDCA,
    SPA,
    AsymmetricFocal,
    CCLNetLoss,
    Composite,
    CrossEntropy,
    FocalLoss,
    LabelSmoothing,
    LDACEWithCCL,
    LSPlus,
    MbLS,
)
from helpers.training import determinism, devices, models, prediction, train
from helpers.training.config import TrainConfig

LOSS_DIGITS = 8  # digits (of each output's scale) of the float64 loss outputs: their noise across CPUs is ~1e-16
TRAINING_DIGITS = 4  # digits of model, CCL-Net and training outputs: ~1e-7 apart between vectorised and plain kernels
N_CLASSES, N_LABELS = 4, 5
#: the models the course trains; resnet50 is built by the same ResNetClassifier code as resnet18 (only torchvision's
#: constructor differs, and the torch version is recorded with every run), and probing it would double the time
PROBED_MODELS = ("small_cnn", "small_cnn_wide", "resnet18")


def _now(obj: Any) -> Any:
    """``obj`` as the module that defines it holds it now: after ``importlib.reload`` of that module, the reloaded
    class or function, else ``obj`` (the probe runs the code a caller importing it now would get)."""
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    return getattr(module, obj.__qualname__, obj) if module is not None else obj


def multiclass_losses() -> dict[str, Callable[[], nn.Module]]:
    """Every multi-class loss the course trains, as fixed probe instances (CCL-Net is probed through ``fit``)."""
    prior = torch.tensor([0.4, 0.3, 0.2, 0.1])
    accuracy = torch.tensor([0.9, 0.7, 0.5, 0.35])
    return {
        "cross-entropy": _now(CrossEntropy),
        "LS": lambda: _now(LabelSmoothing)(0.1),
        "LS prior": lambda: _now(LabelSmoothing)(0.1, prior=prior),
        "focal": lambda: _now(FocalLoss)(3.0),
        "FLSD-53": _now(FLSD53),
        "MbLS": lambda: _now(MbLS)(margin=2.0, lam=0.1),
        "LS+": lambda: _now(LSPlus)(accuracy, alpha=0.5),
        "DCA": lambda: _now(DCA)(beta=1.0),
        "MDCA": lambda: _now(MDCA)(beta=1.0),
    }


def multilabel_losses() -> dict[str, Callable[[], nn.Module]]:
    """Every multi-label loss the course trains (:func:`helpers.lessons.course_losses`' set)."""
    return {
        "BCE": _now(BCE),
        "focal": lambda: _now(AsymmetricFocal)(gamma_pos=0.0, gamma_neg=4.0),
        "ASL": lambda: _now(ASL)(gamma_pos=0.0, gamma_neg=4.0, margin=0.05, eps=1e-8),
        "SPA": lambda: _now(SPA)(1.0, 1.0, 0.0, 5.0, 3.0, 1.0),
        "SPA+LPR": lambda: _now(Composite)(_now(SPA)(1.0, 1.0, 0.0, 5.0, 3.0, 1.0), [(1.0, _now(LPR)())]),
        "BCE+LPR": lambda: _now(Composite)(_now(BCE)(), [(1.0, _now(LPR)())]),
        "LDACE": lambda: _now(LDACE)(diagonal="p_squared"),
        "LDACE+CCL": lambda: _now(LDACEWithCCL)(diagonal="p_squared", ccl_weight=1.0, n_bins=1),
    }


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
    images = devices.to_float(
        torch.randint(0, 256, (4, 3, 16, 16), generator=torch.Generator().manual_seed(1), dtype=torch.uint8)
    ).double()
    for name in PROBED_MODELS:
        torch.manual_seed(0)
        model = models.build_model(name, 3, N_CLASSES, image_size=16).double().train()
        logits = model(images)
        logits.square().sum().backward()
        gradient_norms = torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None])
        yield f"model {name}", logits.detach()
        yield f"model {name} gradients", gradient_norms


class Float64Model(nn.Module):
    """A model of :mod:`helpers.training.models` in float64, taking the engine's float32 batches: the probe trains in
    float64 so that another CPU's float32 kernels (vectorised or not) cannot change the rounded outputs."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model.double()
        self.classifier = self.model.classifier
        self.feature_dim = model.feature_dim

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.features(x.double())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


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
    split = _now(Split)(images, labels)
    return _now(DatasetBundle)(
        name=f"probe {task}",
        task=task,
        class_names=names,
        train=split,
        val=split,
        test=split,
        source="generated by helpers.training.version",
        licence="none",
        image_size=8,
    )


def _fit_cases() -> dict[str, tuple[str, Callable[[], nn.Module], dict[str, Any]]]:
    """(task, loss, TrainConfig settings) of each probed training: both recipes' schedules and optimisers (CCL-Net's
    hooks are probed in float64 by :func:`_ccl_net_probe`: ``fit`` hands them float32 features)."""
    return {
        "onecycle, augmented": (
            "multi-class",
            _now(CrossEntropy),
            dict(schedule="onecycle", augment=True, weight_decay=5e-4),
        ),
        "constant, last epoch": (
            "multi-class",
            _now(CrossEntropy),
            dict(schedule="constant", augment=False, weight_decay=0.0, monitor="epoch", monitor_mode="max"),
        ),
        "cosine, adamw, clipped": (
            "multi-class",
            lambda: _now(FocalLoss)(2.0),
            dict(schedule="cosine", optimizer="adamw", lr=0.01, grad_clip=1.0, augment=False),
        ),
        "multi-label": ("multi-label", _now(BCE), dict(schedule="onecycle", augment=False)),
    }


def _fit_probe() -> Iterator[tuple[str, torch.Tensor]]:
    for name, (task, make_loss, settings) in _fit_cases().items():
        bundle = tiny_bundle(task)
        n_outputs = bundle.n_classes
        torch.manual_seed(3)
        model = Float64Model(models.build_model("small_cnn", 1, n_outputs, image_size=8))
        loss = make_loss().double()
        config = _now(TrainConfig)(
            **({"epochs": 2, "batch_size": 16, "lr": 0.05, "device": "cpu", "progress": False, "seed": 4} | settings)
        )
        result = train.fit(model, loss, bundle, config)
        for record in result.history:
            yield (
                f"fit {name} history",
                torch.tensor(
                    [
                        value
                        for key, value in sorted(record.items())
                        if key != "seconds" and isinstance(value, (int, float))
                    ],
                    dtype=torch.float64,
                ),
            )
        yield f"fit {name} logits", _summary(prediction.predict_logits(result.model, bundle.val.images))


def _ccl_net_probe() -> Iterator[tuple[str, torch.Tensor]]:
    """CCL-Net's loss and its alternating head updates (``after_step``, ``on_epoch_end``), in float64."""
    generator = torch.Generator().manual_seed(5)
    features = torch.randn(4, 16, 8, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, N_CLASSES, (4, 16), generator=generator)
    torch.manual_seed(6)
    loss = _now(CCLNetLoss)(8, N_CLASSES, hidden_dims=(16,), embedding_dim=8, lr_ccl=1e-2).double()
    for epoch, (batch, targets) in enumerate(zip(features, labels), start=1):
        logits = batch @ torch.linspace(-1, 1, 8 * N_CLASSES, dtype=torch.float64).view(8, N_CLASSES)
        logits.requires_grad_(True)
        value = loss(logits, targets)
        value.backward()
        yield "CCL-Net loss", torch.stack([value.detach(), logits.grad.norm()])
        yield "CCL-Net head step", loss.after_step(batch, targets).reshape(1)
        history = [{"epoch": epoch}]
        loss.on_epoch_end(epoch, history)
        yield "CCL-Net epoch", torch.tensor([float(v) for _, v in sorted(history[0].items())], dtype=torch.float64)
    yield "CCL-Net dictionary", loss.head.dictionary.detach()


def _rounded(values: torch.Tensor, digits: int) -> str:
    """``values`` as integers in units of 10^-digits of their scale (the power of ten above their largest magnitude):
    a noise far below that unit, such as another CPU's last bits, leaves the text unchanged, also for entries
    near zero, where rounding to significant digits would keep the noise."""
    flat = values.detach().double().flatten()
    magnitudes = flat[torch.isfinite(flat)].abs()
    largest = float(magnitudes.max()) if magnitudes.numel() else 0.0
    scale = 10.0 ** math.ceil(math.log10(largest)) if largest > 0 else 1.0
    unit = scale * 10.0**-digits
    return f"{scale:g}:" + ",".join(str(round(v / unit)) if math.isfinite(v) else repr(v) for v in flat.tolist())


def _summary(logits: torch.Tensor) -> torch.Tensor:
    """Per output: mean, standard deviation, minimum and maximum over the samples."""
    logits = logits.double()
    return torch.stack([logits.mean(0), logits.std(0), logits.amin(0), logits.amax(0)])


def probe_outputs() -> Iterator[tuple[str, str]]:
    """(name, rounded values) of every probed output, in a fixed order (module docstring)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    state = torch.random.get_rng_state()
    try:
        with determinism.deterministic():
            for name, values in _loss_probe():
                yield name, _rounded(values, LOSS_DIGITS)
            for probe in (_model_probe, _ccl_net_probe, _fit_probe):
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


#: the packages whose code the probe runs: a reload of one of their modules can change the version
WATCHED_PACKAGES = ("helpers.losses", "helpers.training", "helpers.metrics", "helpers.data", "helpers.utils")

#: (the training code loaded when the version was computed, the version), or None before the first use
_computed: tuple[dict[str, dict[str, tuple[Any, Any]]], str] | None = None


def training_version() -> str:
    """The training version of the code loaded in this process: computed on first use and kept while that code is
    what the process holds; computed again when ``importlib.reload`` or IPython's ``%autoreload`` replaced or
    patched any function or class of the training code since (:func:`loaded_training_code`), so that no run is
    stored or cached under the version of code the process no longer runs."""
    global _computed
    if _computed is None or code_changed(_computed[0], loaded_training_code()):
        if _computed is not None:
            _warn_stale_reexports()
        version = compute_training_version()
        _computed = (loaded_training_code(), version)  # taken after the probe: what it imported is part of it
    return _computed[1]


def loaded_training_code() -> dict[str, dict[str, tuple[Any, Any]]]:
    """Per loaded module of :data:`WATCHED_PACKAGES`: each function and class it defines, and each method of
    those classes, by qualified name, as (the object, its code object or None). ``importlib.reload`` makes new
    objects under the same names; ``%autoreload`` also gives the old functions new code objects."""
    loaded = {}
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(tuple(f"{package}." for package in WATCHED_PACKAGES)):
            continue
        entries: dict[str, tuple[Any, Any]] = {}
        for attribute, value in list(vars(module).items()):
            if getattr(value, "__module__", None) != name:
                continue  # imported from elsewhere, or put there by a test's monkeypatch
            if inspect.isfunction(value):
                entries[attribute] = (value, value.__code__)
            elif inspect.isclass(value):
                entries[attribute] = (value, None)
                for method_name, method in list(vars(value).items()):
                    function = getattr(method, "__func__", method)  # classmethod, staticmethod
                    if inspect.isfunction(function) and function.__module__ == name:
                        entries[f"{attribute}.{method_name}"] = (function, function.__code__)
        loaded[name] = entries
    return loaded


def code_changed(before: dict[str, dict[str, tuple[Any, Any]]], now: dict[str, dict[str, tuple[Any, Any]]]) -> bool:
    """Whether a module loaded in ``before`` holds another function, class or code object under one of its names,
    or defines a name it did not (a reload). Modules imported since, and names now bound to objects from elsewhere
    (a test's monkeypatch), are not changes of the loaded code."""
    for module, entries in before.items():
        current = now.get(module, {})
        for name, (value, code) in current.items():
            if name not in entries:
                return True
            recorded_value, recorded_code = entries[name]
            if value is not recorded_value or code is not recorded_code:
                return True
    return False


def _warn_stale_reexports() -> None:
    """After a reload, warn about package re-exports that still hold the objects of the earlier code (``from
    helpers.losses import FocalLoss`` then gives the class before the edit, which the new version does not
    describe)."""
    stale = sorted(
        f"{package}.{name}"
        for package, module in list(sys.modules.items())
        if package in WATCHED_PACKAGES and module is not None
        for name, value in list(vars(module).items())
        if inspect.isclass(value) or inspect.isfunction(value)
        if (home := sys.modules.get(getattr(value, "__module__", ""))) is not None
        and home is not module
        and getattr(home, name, value) is not value
    )
    if stale:
        warnings.warn(
            f"the training code was reloaded in this process, but {', '.join(stale[:5])}"
            f"{' and others' if len(stale) > 5 else ''} still name the objects of the code before the reload: "
            "objects made from them train the earlier code under the new training version. Restart the kernel "
            "(or use %autoreload 2, which updates them)",
            RuntimeWarning,
            stacklevel=3,
        )

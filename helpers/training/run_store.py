"""The stored reference runs and a local cache of trained runs: :func:`train_run` loads a run or trains it.

The two training recipes every comparison runs under are in :mod:`helpers.training.recipes`.

**What defines a run** (:mod:`helpers.training.run_keys`): the data, the model, the loss and the training
configuration; a run's files are named by the key, a hash of that definition.

**Stored reference runs** (``stored_runs/<dataset>/<key>.npz``, committed): the validation and test logits, the
training history and the loss's final state (e.g. the CCL-Net dictionary), with the definition, the device's name,
whether it was trained deterministically (:mod:`helpers.training.determinism`), the torch, CUDA and cuDNN versions, and
the training version that produced them. No weights: every notebook works from logits. A notebook run in the
``reference`` profile loads a stored run when present and trains and stores it when absent; the runs load quietly
into the notebook's ledger (:mod:`helpers.training.run_log`: one provenance line, the details folded;
``CALIBMED_VERBOSE=1`` lists every run). ``python -m
helpers.course.train_runs train`` trains every declared run, one at a time, storing each as it finishes (so it
resumes where it stopped).

**Training version** (:func:`training_version`, :mod:`helpers.training.version`): the hash of what the training
code loaded in this process *does* on a short fixed CPU probe (every loss, the models, a few training steps), not
of its source text: an edit of a docstring or of a metric that training does not use keeps it, an edit of a loss's
arithmetic changes it. A stored run is current when its training version equals today's; runs from older code are
still loaded, and one warning line (once per process) says so, with the command that retrains them. Runs stored
before the training version existed recorded a ``code_version`` (a hash of the source) instead: they count as
older code until retrained.

**Local cache** (``runs/cache/<key>-<training version>.pt``, never committed; ``CALIBMED_CACHE_DIR`` moves it):
runs of other profiles, with their weights, keyed by the definition *and* the training version, so any change of
behaviour retrains.
``CALIBMED_NO_CACHE=1`` bypasses the local cache; ``CALIBMED_RETRAIN=1`` also retrains (and re-stores) every stored
run whose training version is not today's, and loads the others: a retrain ends, and resumes where it stopped.
``CALIBMED_RETRAIN_ONLY`` narrows a retrain (:func:`helpers.training.retrain_selected`): ``"recipe=well-regularised
dataset=dermamnist"`` retrains only the older runs of that recipe on that data set and loads the rest as they are.
A trained run whose file cannot be written (a read-only or full folder) is returned all the same, with one
:class:`RunNotSavedWarning` per folder.

**Integrity** (:mod:`helpers.training.run_files`): every stored and cached run written here carries the SHA-256 of
its own bytes; a file that fails it (or any other check) is named and the run trained again. Cached runs are read
with ``torch.load(weights_only=True)``. Stored runs written before the hash existed are read as they are.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from helpers.training import determinism, models, prediction, run_checks, run_files, run_log, train
from helpers.training.config import TrainConfig
from helpers.training.recipes import retrain_selected
from helpers.training.run_files import DamagedRunError
from helpers.training.run_keys import plain_value, run_definition, run_key
from helpers.training.version import training_version
from helpers.utils import REPO_ROOT, display_path

CACHE_DIR = REPO_ROOT / "runs" / "cache"
#: moves the local run cache (default :data:`CACHE_DIR`), e.g. out of a read-only checkout
CACHE_DIR_ENV = "CALIBMED_CACHE_DIR"
STORED_RUNS_DIR = REPO_ROOT / "stored_runs"
STORE_FORMAT = 1


@dataclass
class TrainedRun:
    """A trained run: its logits on the validation and test splits, history and loss state.

    ``model`` holds the weights for a run trained here or loaded from the local cache, and is ``None`` for a stored
    reference run (stored runs keep logits, not weights). ``source`` is ``"trained"``, ``"cache"``, ``"stored"``
    or ``"planned"`` (a placeholder, see :func:`planning`).
    """

    name: str
    model: nn.Module | None
    loss: nn.Module
    history: list[dict[str, float]]
    val_logits: torch.Tensor
    test_logits: torch.Tensor
    seconds: float
    source: str
    key: str
    device: str = ""
    software: dict[str, Any] = field(default_factory=dict)  # helpers.training.software_record when trained

    @property
    def from_cache(self) -> bool:
        return self.source in ("cache", "stored")

    @property
    def val_probs(self) -> torch.Tensor:
        with torch.no_grad():
            return self.loss.predict_proba(self.val_logits).float()

    @property
    def test_probs(self) -> torch.Tensor:
        with torch.no_grad():
            return self.loss.predict_proba(self.test_logits).float()


# ----------------------------------------------------------------------------------------------------------------
# where runs are kept


def default_cache_dir() -> Path:
    """The local run cache: ``$CALIBMED_CACHE_DIR`` when set, else ``runs/cache/`` in this checkout."""
    return Path(os.environ.get(CACHE_DIR_ENV) or CACHE_DIR)


def stored_run_path(bundle: Any, key: str, root: str | os.PathLike | None = None) -> Path:
    return Path(root or STORED_RUNS_DIR) / bundle.name / f"{key}.npz"


# ----------------------------------------------------------------------------------------------------------------
# files


def _state_bytes(loss: nn.Module) -> np.ndarray:
    """The loss's state for a stored run: ``loss.stored_state()`` where a loss keeps less than its whole state
    (CCL-Net: the dictionary, not the embedding network), else ``loss.state_dict()``."""
    state = loss.stored_state() if hasattr(loss, "stored_state") else loss.state_dict()
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def _json_bytes(value: Any) -> np.ndarray:
    return np.frombuffer(json.dumps(value, allow_nan=False, default=plain_value).encode(), dtype=np.uint8)


def _finite_history(history: list[dict[str, float]]) -> list[dict[str, Any]]:
    return [
        {k: (v if not isinstance(v, float) or math.isfinite(v) else None) for k, v in record.items()}
        for record in history
    ]


def save_stored_run(path: Path, run: TrainedRun, definition: dict[str, Any]) -> None:
    """Write a stored reference run (logits, history, loss state, provenance) atomically, sealed with the SHA-256
    of its bytes (:mod:`helpers.training.run_files`)."""
    meta = {
        "format": STORE_FORMAT,
        "key": run.key,
        "name": run.name,
        "definition": definition,
        "training_version": training_version(),
        "device": run.device,
        "seconds": run.seconds,
        "torch": torch.__version__,
        **run.software,
        "stored_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "history": _finite_history(run.history),
        "integrity": run_files.INTEGRITY,
    }
    arrays = {
        "val_logits": run.val_logits.float().numpy(),
        "test_logits": run.test_logits.float().numpy(),
        "loss_state": _state_bytes(run.loss),
        "meta": _json_bytes(meta),
    }
    run_files.write_sealed(path, lambda file: np.savez_compressed(file, **arrays))


def _expected_shapes(bundle: Any) -> dict[str, tuple[int, int]]:
    return {
        "val_logits": (len(bundle.val.labels), bundle.n_classes),
        "test_logits": (len(bundle.test.labels), bundle.n_classes),
    }


def _check_logits(path: Path, logits: dict[str, torch.Tensor], bundle: Any) -> None:
    for name, shape in _expected_shapes(bundle).items():
        tensor = logits[name]
        if tuple(tensor.shape) != shape:
            raise DamagedRunError(f"{path}: {name} has shape {tuple(tensor.shape)}, the data need {shape}")
        if not tensor.is_floating_point() or not bool(torch.isfinite(tensor).all()):
            raise DamagedRunError(f"{path}: {name} holds NaN or infinite values, or is not floating point")


def read_stored_meta(path: Path) -> dict[str, Any]:
    """The metadata of a stored run, checked (its content hash too, when it has one); :class:`DamagedRunError`
    naming the file when it cannot be read."""
    return run_files.read_stored_arrays(path)[0]


def _load_state(path: Path, module: nn.Module, state: Any, load: Any) -> None:
    """``load(state)`` into ``module`` (its ``load_state_dict`` or ``load_stored_state``); when the state does not
    fit, ``module`` is put back as it was and a :class:`DamagedRunError` names the file."""
    before = copy.deepcopy(module.state_dict())
    try:
        load(state)
    except (RuntimeError, KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
        module.load_state_dict(before)
        raise DamagedRunError(
            f"{path}: its {type(module).__name__} state does not fit ({type(error).__name__}: "
            f"{str(error).strip().splitlines()[0] if str(error).strip() else ''})"
        ) from error


def load_stored_run(path: Path, bundle: Any, loss: nn.Module, key: str) -> tuple[dict[str, Any], TrainedRun]:
    """Read a stored run into ``loss`` (its final state); raise :class:`DamagedRunError` naming the file."""
    meta, arrays = run_files.read_stored_arrays(path)
    if meta.get("format") != STORE_FORMAT or meta.get("key") != key:
        raise DamagedRunError(
            f"{path}: format {meta.get('format')} / key {meta.get('key')} do not match "
            f"format {STORE_FORMAT} / key {key}"
        )
    run_checks.check_stored_definition(path, meta, key)
    run_checks.check_history(path, meta["history"])
    logits = {name: torch.from_numpy(arrays[name].copy()) for name in ("val_logits", "test_logits")}
    _check_logits(path, logits, bundle)
    state = run_files.read_loss_state(path, arrays)
    run_checks.check_finite_state(path, state, "the loss state")
    _load_state(path, loss, state, getattr(loss, "load_stored_state", loss.load_state_dict))
    run = TrainedRun(
        meta["name"],
        None,
        loss,
        meta["history"],
        logits["val_logits"],
        logits["test_logits"],
        meta["seconds"],
        "stored",
        key,
        meta.get("device", ""),
    )
    return meta, run


def _save_cached_run(path: Path, run: TrainedRun) -> None:
    """Write a cached run (weights, loss state, logits, history: tensors and plain data), sealed, atomically."""
    payload = {
        "model": run.model.state_dict(),
        "loss": run.loss.state_dict(),
        "history": run.history,
        "val_logits": run.val_logits,
        "test_logits": run.test_logits,
        "seconds": float(run.seconds),
        "device": str(run.device),
        "software": json.loads(json.dumps(run.software, default=plain_value)),
    }
    run_files.write_cached_payload(path, payload)


class RunNotSavedWarning(UserWarning):
    """A trained run could not be written to the run cache or the stored runs; it is used all the same."""


_unwritable_reported: set[Path] = set()


def _save_or_warn(path: Path, save: Any, stored: bool) -> None:
    """``save()`` a trained run; when its folder cannot be written (read-only, full, no permission), warn once per
    folder and go on, so that the caller still returns what was trained."""
    try:
        save()
    except OSError as error:
        folder = path.parent
        if folder in _unwritable_reported:
            return
        _unwritable_reported.add(folder)
        fix = (
            "pass a writable stored_dir, or make stored_runs/ writable"
            if stored
            else f"set {CACHE_DIR_ENV} to a writable folder, or CALIBMED_NO_CACHE=1 to train without the cache"
        )
        warnings.warn(
            f"cannot write trained runs into {display_path(folder)} ({error.strerror or error}): runs "
            f"trained here are used but not saved, and will be trained again next time; {fix}",
            RunNotSavedWarning,
            stacklevel=2,
        )  # reported from train_run, not the caller


def _load_cached_run(path: Path, name: str, model: nn.Module, loss: nn.Module, bundle: Any, key: str) -> TrainedRun:
    stored = run_files.read_cached_payload(path)
    _check_logits(path, {k: stored[k] for k in ("val_logits", "test_logits")}, bundle)
    run_checks.check_history(path, stored["history"])
    run_checks.check_finite_state(path, stored["loss"], "the loss state")
    _load_state(path, model, stored["model"], model.load_state_dict)
    _load_state(path, loss, stored["loss"], loss.load_state_dict)
    return TrainedRun(
        name,
        model,
        loss,
        stored["history"],
        stored["val_logits"],
        stored["test_logits"],
        stored["seconds"],
        "cache",
        key,
        stored.get("device", ""),
        stored.get("software", {}),
    )


# ----------------------------------------------------------------------------------------------------------------
# train or load


@dataclass
class PlannedRun:
    """A run that :func:`train_run` would train, recorded instead while :func:`planning` is active."""

    name: str
    loss: nn.Module
    bundle: Any
    model_name: str
    config: TrainConfig
    stored: bool
    key: str


_plan: list[PlannedRun] | None = None


@contextlib.contextmanager
def planning():
    """While active, :func:`train_run` loads what exists and, instead of training a missing run, records it in the
    yielded list and returns a placeholder (``source == "planned"``, zero logits) so the caller's code runs on."""
    global _plan
    _plan = []
    try:
        yield _plan
    finally:
        _plan = None


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


_LINE_WIDTH = run_log.LINE_WIDTH


def _stored_run_line(name: str, where: str, meta: dict[str, Any]) -> str:
    """ "<name>: stored run <data set>/<key> (trained on <device> in <s> s)", the parenthesis on a second, indented
    line when one line would be longer than the notebooks' line limit."""
    head = f"{name}: stored run {where}"
    detail = f"(trained on {meta.get('device_name') or meta.get('device') or '?'} in {meta['seconds']:.0f} s)"
    return f"{head} {detail}" if len(head) + 1 + len(detail) <= _LINE_WIDTH else f"{head}\n  {detail}"


def behaviour_version(meta: dict[str, Any]) -> str | None:
    """The training version whose behaviour produced a stored run: the one it was stored with, or, for a run stored
    before the training version existed, the one its ``behaviour_verified`` field records (today's behavioural probe
    run on the code that trained it; ``docs/reading_the_numbers.md``). None when neither is known."""
    verified = meta.get("behaviour_verified")
    return meta.get("training_version") or (verified.get("training_version") if isinstance(verified, dict) else None)


def is_current(meta: dict[str, Any]) -> bool:
    """Whether a stored run was produced by today's training behaviour (:func:`behaviour_version`)."""
    return behaviour_version(meta) == training_version()


def is_reproducible_here(meta: dict[str, Any]) -> bool:
    """Whether today's code reproduces a stored run bit for bit: current *and* trained deterministically (a run of
    today's behaviour trained with autotuned GPU kernels is current but one draw among several)."""
    return is_current(meta) and meta.get("deterministic") is True


def _from_older_code(path: Path) -> bool:
    """Whether a stored run is not reproducible by today's code (older training code, or today's behaviour trained
    without determinism), or its metadata cannot be read: what ``CALIBMED_RETRAIN=1`` retrains. Reproducible runs
    are kept, so a retrain ends and resumes where it stopped."""
    try:
        return not is_reproducible_here(read_stored_meta(path))
    except DamagedRunError:
        return True


def _report_run(run: TrainedRun, bundle: Any, config: TrainConfig, line: str | None, meta: dict[str, Any]) -> None:
    """Hand a loaded or trained run to :func:`helpers.training.report` (one summary per suite)."""
    software = meta if run.source == "stored" else run.software
    record = run_log.RunRecord(
        run.name,
        run.source,
        bundle.name,
        config.seed,
        software.get("device_name") or run.device,
        software.get("deterministic"),
        is_current(meta) if run.source == "stored" else True,
    )
    run_log.report(record, line)


def train_run(
    name: str,
    loss: nn.Module,
    bundle: Any,
    model_name: str,
    config: TrainConfig,
    cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
    stored: bool = False,
    stored_dir: str | os.PathLike | None = None,
) -> TrainedRun:
    """Train ``model_name`` with ``loss`` on ``bundle`` through :func:`helpers.training.fit`, or load it.

    With ``stored=True`` (the ``reference`` profile) a stored reference run is loaded when present and a trained
    run is stored. Otherwise the local cache is used (``cache``). Which of these happened is reported through
    :mod:`helpers.training.run_log` (a line per run outside a suite, one summary line per suite), so every notebook
    output says whether its numbers were trained here. A damaged file is named and the run retrained.
    """
    retrain = _flag("CALIBMED_RETRAIN") and retrain_selected(bundle, model_name, config)
    cache = cache and not _flag("CALIBMED_NO_CACHE") and not retrain
    key = run_key(bundle, model_name, loss, config)
    store_path = stored_run_path(bundle, key, stored_dir)
    if stored and store_path.is_file() and not (retrain and _from_older_code(store_path)):
        run = _stored_run_or_none(name, store_path, bundle, loss, key, config)
        if run is not None:
            return run
    cache_path = Path(cache_dir or default_cache_dir()) / f"{key}-{training_version()}.pt"
    model = _seeded_model(model_name, bundle, config)
    if cache and not stored and cache_path.is_file():
        run = _cached_run_or_none(name, cache_path, model, loss, bundle, key, config)
        if run is not None:
            return run
        model = _seeded_model(model_name, bundle, config)  # the damaged file may have loaded part of its state
    if _plan is not None:
        return _planned_run(name, loss, bundle, model_name, config, stored, key)
    if stored or cache:
        _check_run_file_target(
            store_path if stored else cache_path,
            store_path.parent.parent if stored else None,
            _folder_setting(stored, cache_dir, stored_dir),
        )
    definition = run_definition(bundle, model_name, loss, config) if stored else None
    run = _trained_run(name, model, loss, bundle, model_name, config, key)
    _report_run(run, bundle, config, None, {})  # its "training" line is printed by _trained_run
    if stored:
        _save_or_warn(store_path, lambda: save_stored_run(store_path, run, definition), stored=True)
    elif cache:
        _save_or_warn(cache_path, lambda: _save_cached_run(cache_path, run), stored=False)
    return run


def _seeded_model(model_name: str, bundle: Any, config: TrainConfig) -> nn.Module:
    """The run's model, initialised under the run's seed."""
    torch.manual_seed(config.seed)
    return models.build_model(model_name, bundle.n_channels, bundle.n_classes, image_size=bundle.image_size)


def _stored_run_or_none(
    name: str, path: Path, bundle: Any, loss: nn.Module, key: str, config: TrainConfig
) -> TrainedRun | None:
    """The stored run at ``path``, reported; ``None`` (after one line that says so) when the file is damaged."""
    try:
        meta, run = load_stored_run(path, bundle, loss, key)
        run.name = name
        _report_run(run, bundle, config, _stored_run_line(name, f"{bundle.name}/{key}", meta), meta)
        return run
    except DamagedRunError as error:
        print(f"{name}: {error}; training it again")
        return None


def _cached_run_or_none(
    name: str, path: Path, model: nn.Module, loss: nn.Module, bundle: Any, key: str, config: TrainConfig
) -> TrainedRun | None:
    """The cached run at ``path`` (its weights loaded into ``model``), reported; ``None`` (after one line that
    says so) when the file is damaged."""
    try:
        run = _load_cached_run(path, name, model, loss, bundle, key)
        _report_run(
            run,
            bundle,
            config,
            f"{name}: loaded from the run cache ({path.name}; trained in {run.seconds:.0f} s)",
            {},
        )
        return run
    except DamagedRunError as error:
        print(f"{name}: {error}; training it again")
        return None


def _planned_run(
    name: str, loss: nn.Module, bundle: Any, model_name: str, config: TrainConfig, stored: bool, key: str
) -> TrainedRun:
    """Record the run in the active plan (:func:`planning`) and return its placeholder (zero logits)."""
    _plan.append(PlannedRun(name, loss, bundle, model_name, config, stored, key))
    shapes = _expected_shapes(bundle)
    return TrainedRun(
        name,
        None,
        loss,
        [],
        torch.zeros(shapes["val_logits"]),
        torch.zeros(shapes["test_logits"]),
        0.0,
        "planned",
        key,
    )


def _check_run_file_target(target_file: Path, stored_root: Path | None, setting: str) -> None:
    """Fail before training when the run's file cannot be written where it goes: its folder (the stored runs'
    root ``stored_root``, or the cache folder) is a file, or the file's own path is a folder. ``setting``: what
    chose that folder, and so what to change (:func:`_folder_setting`)."""
    target_dir = stored_root if stored_root is not None else target_file.parent
    if target_dir.exists() and not target_dir.is_dir():
        raise NotADirectoryError(
            f"{target_dir} is not a folder: trained runs are stored in a folder there; {setting}, or remove the file"
        )
    if target_file.is_dir():
        raise IsADirectoryError(
            f"{target_file} is a folder, where this run's file is written: remove it (or {setting})"
        )


def _folder_setting(stored: bool, cache_dir: str | os.PathLike | None, stored_dir: str | os.PathLike | None) -> str:
    """How to point a run at another folder, naming the setting that chose the one it has: the ``stored_dir`` or
    ``cache_dir`` argument, ``$CALIBMED_CACHE_DIR``, or the default folder."""
    if stored:
        return "pass another stored_dir" if stored_dir is not None else "pass a stored_dir (default: stored_runs/)"
    if cache_dir is not None:
        return "pass another cache_dir"
    if os.environ.get(CACHE_DIR_ENV):
        return f"set {CACHE_DIR_ENV} (now {os.environ[CACHE_DIR_ENV]!r}) to a folder, or unset it"
    return f"set {CACHE_DIR_ENV} to a folder (default: runs/cache/)"


def _trained_run(
    name: str, model: nn.Module, loss: nn.Module, bundle: Any, model_name: str, config: TrainConfig, key: str
) -> TrainedRun:
    """Train the run (:func:`helpers.training.fit`) and predict its validation and test logits, deterministically."""
    print(f"{name}: training {model_name} with {type(loss).__name__} for {config.epochs} epochs")
    result = train.fit(model, loss, bundle, config)
    with determinism.deterministic():
        val_logits = prediction.predict_logits(result.model, bundle.val.images, batch_size=config.eval_batch_size)
        test_logits = prediction.predict_logits(result.model, bundle.test.images, batch_size=config.eval_batch_size)
    return TrainedRun(
        name,
        result.model.cpu(),
        loss.cpu(),
        result.history,
        val_logits.cpu(),
        test_logits.cpu(),
        result.seconds,
        "trained",
        key,
        result.device,
        result.software,
    )

"""Run profiles and the resolved run configuration of a notebook, the environment report and the results JSON.

Every notebook starts with a cell tagged ``parameters`` whose knobs default to ``None`` ("take the profile's
value"), a table ``PROFILES`` of what ``smoke`` / ``quick`` / ``full`` mean for that notebook, and then::

    cfg = course.configure("01_measuring_calibration", PROFILES, profile=profile, epochs=epochs, ...)

so a papermill sweep can override any single knob and everything else follows the profile
(:mod:`helpers.course.runner` executes the notebooks, :mod:`helpers.course.cli` is the command line).
"""

from __future__ import annotations

import ast
import json
import math
import platform
import sys
import textwrap
import time
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from helpers.course import knobs as knob_rules
from helpers.training import run_log
from helpers.utils import DISPLAY_NAMES, display_path, shorten_paths, write_text_atomically

REPO_ROOT = Path(__file__).resolve().parents[2]
PROFILE_NAMES = ("smoke", "quick", "reference", "full")
KNOBS = (
    "dataset",
    "image_size",
    "model",
    "epochs",
    "batch_size",
    "lr",
    "seed",
    "device",
    "data_dir",
    "max_train",
    "results_path",
)


#: per notebook, the knobs a run has read so far (:meth:`RunConfig.__getattribute__`): what ``details`` shows
_USED_KNOBS: dict[str, set[str]] = {}
#: per notebook, ``time.perf_counter()`` when ``configure`` ran: the compute time ``details`` shows
_STARTED: dict[str, float] = {}
_CORE_KNOBS = frozenset(KNOBS)


def used_knobs(notebook: str) -> set[str]:
    """The knobs of ``notebook``'s configuration read since ``configure`` (by the notebook or the library)."""
    return set(_USED_KNOBS.get(notebook, set()))


def seconds_since_configure(notebook: str) -> float | None:
    """Seconds since ``configure`` ran for ``notebook`` in this process, or None."""
    started = _STARTED.get(notebook)
    return None if started is None else time.perf_counter() - started


def _note_used(notebook: str | None, name: str) -> None:
    if notebook is not None and notebook in _USED_KNOBS:
        _USED_KNOBS[notebook].add(name)


class KnobDict(dict):
    """``RunConfig.extra``: a dict that notes each notebook-specific knob read by key (``cfg.extra["seeds"]``,
    ``cfg.extra.get(...)``); copying it (``{**extra}``, ``dict(extra)``) reads no knob."""

    def __init__(self, *args: Any, notebook: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.notebook = notebook

    def __getitem__(self, key: str) -> Any:
        _note_used(self.notebook, key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        _note_used(self.notebook, key)
        return super().get(key, default)


@dataclass
class RunConfig:
    """Every knob of one notebook run, after the profile's defaults were filled in.

    Reading a knob (``cfg.epochs``, ``cfg.seeds``, ``cfg.extra.get("seeds")``) notes it as used by the notebook, so the
    details cell shows only the knobs the run read (issue 28, item 3); ``dataclasses.asdict`` and
    ``dataclasses.replace`` read every field to copy them and are not counted.
    """

    notebook: str
    profile: str
    dataset: str
    image_size: int
    model: str
    epochs: int
    batch_size: int
    lr: float
    seed: int
    device: str
    data_dir: str | None
    max_train: int | None
    results_path: str
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.extra, KnobDict):
            self.extra = KnobDict(self.extra, notebook=self.notebook)

    def __getattribute__(self, name: str) -> Any:
        if name in _CORE_KNOBS and sys._getframe(1).f_globals.get("__name__") != "dataclasses":
            _note_used(object.__getattribute__(self, "__dict__").get("notebook"), name)
        return object.__getattribute__(self, name)

    def __getattr__(self, name: str) -> Any:
        # notebook-specific knobs (e.g. ``alphas``, ``recipes``) live in ``extra``
        extra = self.__dict__.get("extra", {})
        if name in extra:
            _note_used(self.__dict__.get("notebook"), name)
            return dict.__getitem__(extra, name)
        raise AttributeError(f"RunConfig has no knob {name!r}; knobs are {sorted(list(asdict(self)) + list(extra))}")

    def describe(self, width: int = 110, only: set[str] | None = None) -> str:
        """``[notebook] profile 'quick', dataset 'dermamnist'`` and then every knob (or those in ``only``), in lines
        of at most ``width`` characters; paths as ``helpers.utils.display_path`` writes them. The folded details
        cell prints it (``helpers.course.details``), the main flow does not."""
        shown = {
            k: display_path(v) if k in ("results_path", "data_dir") and v is not None else v
            for k, v in asdict(self).items()
            if k not in ("notebook", "profile", "dataset", "extra")
        }
        every = {**shown, **dict(self.extra.items())}
        knobs = [f"{k}={_knob_text(v)}" for k, v in every.items() if only is None or k in only]
        head = f"[{self.notebook}] profile {self.profile!r}, dataset {self.dataset!r}; knobs: "
        return "\n".join(
            textwrap.wrap(
                head + ", ".join(knobs), width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
            )
        )


def _knob_text(value: Any) -> str:
    """A knob's value as ``describe`` prints it: ``repr``, except that a list of names reads as ``[BCE, focal]``
    (a printed Python list of quoted strings is not an output a person reads, helpers.course.output_rules)."""
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return "[" + ", ".join(value) + "]"
    return repr(value)


def configure(notebook: str, profiles: Mapping[str, Mapping[str, Any]], profile: str, **knobs: Any) -> RunConfig:
    """Fill every knob that is ``None`` from ``profiles[profile]`` and return the resolved configuration, printing
    nothing: the notebook's main flow prints one provenance line (``helpers.course.provenance``), its folded details
    cell the knobs the run read (``helpers.course.details``). It starts the run's ledger of loaded runs
    (:func:`helpers.training.run_log.reset_session`) and its clock.

    ``profiles`` maps each of smoke / quick / full to that notebook's defaults. Knobs passed explicitly (not None)
    win over the profile, so ``papermill -p epochs 3`` changes only the epochs. Every resolved value is checked
    against its rule (:mod:`helpers.course.knobs`): a wrong type or range is a ValueError naming the knob and the value.
    """
    if profile not in PROFILE_NAMES:
        raise ValueError(f"profile must be one of {PROFILE_NAMES}, got {profile!r}")
    missing_profiles = [p for p in PROFILE_NAMES if p not in profiles]
    if missing_profiles:
        raise ValueError(f"the PROFILES table of {notebook} lacks {missing_profiles}")
    _check_declared_knobs(notebook, profiles, knobs)
    values = dict(profiles[profile])
    values.update({k: knob_rules.plain(v) for k, v in knobs.items() if v is not None})
    values.setdefault("device", "auto")
    values.setdefault("seed", 0)
    values.setdefault("data_dir", None)
    values.setdefault("max_train", None)
    if values.get("results_path") is None:
        values["results_path"] = str(REPO_ROOT / "runs" / "results" / f"{notebook}.json")
    required = [k for k in KNOBS if k not in ("data_dir", "max_train")]
    missing = [k for k in required if values.get(k) is None]
    if missing:
        raise ValueError(f"{notebook}: no value for {missing} in profile {profile!r} nor in the parameters cell")
    knob_rules.check(notebook, values, profiles)
    knob_rules.check_results_path(notebook, values["results_path"])
    core = {k: values.pop(k) for k in KNOBS}
    _USED_KNOBS[notebook] = set()
    _STARTED[notebook] = time.perf_counter()
    run_log.reset_session()
    cfg = RunConfig(notebook=notebook, profile=profile, extra=values, **core)
    warnings.showwarning = show_warning_briefly
    return cfg


def _check_declared_knobs(notebook: str, profiles: Mapping[str, Mapping[str, Any]], knobs: Mapping[str, Any]) -> None:
    """Refuse knobs the notebook does not declare (a misspelling would otherwise be ignored without a word).

    Declared: the course knobs (KNOBS) and what any profile of PROFILES sets (a profile may set knobs of its own,
    e.g. the reference profile's seeds). In a kernel run by papermill, a parameter injected under a name the
    notebook's parameters cell does not declare (``papermill -p epoch 3`` for ``epochs``) is refused too.
    """
    declared = set(KNOBS).union(*(profiles[name] for name in PROFILE_NAMES))
    unknown = sorted(set(knobs) - declared)
    if unknown:
        raise ValueError(
            f"{notebook}: knob(s) {unknown} are declared neither by PROFILES nor as course knobs; "
            f"declared: {sorted(declared)}"
        )
    injected = sorted(_injected_parameter_names() - set(knobs) - {"profile"})
    if injected:
        raise ValueError(
            f"{notebook}: parameter(s) {injected} were injected (papermill -p) but are not declared by "
            f"this notebook's parameters cell; its parameters: profile, {', '.join(knobs)}"
        )


def _injected_parameter_names() -> set[str]:
    """Names assigned by papermill's injected cell ("# Parameters" first line) in this IPython kernel's input
    history; empty outside a kernel or when papermill injected nothing."""
    try:
        from IPython import get_ipython
    except ImportError:
        return set()
    shell = get_ipython()
    history = shell.user_ns.get("In", []) if shell is not None else []
    injected = [cell for cell in history if isinstance(cell, str) and cell.startswith("# Parameters\n")]
    return set(assigned_names(injected[-1])) if injected else set()


def assigned_names(source: str) -> list[str]:
    """Names assigned at the top level of a cell's source (``name = value``), in order."""
    return [
        target.id
        for node in ast.parse(source).body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    ]


def show_warning_briefly(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """Print a warning as a short note on stdout, without the source file and line Python adds: a notebook's
    stored output says the point, not the machine's paths (``configure`` installs it for the notebook's kernel)."""
    module = Path(filename).stem if filename else "?"
    label = "note" if category is UserWarning else category.__name__
    text = f"{label} ({module}): {message}"
    print(
        "\n".join(
            textwrap.wrap(
                shorten_paths(text), 110, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
            )
        ),
        file=file or sys.stdout,
    )


def environment_report() -> dict[str, Any]:
    """Versions and the compute device: printed by notebook 00 and stored in every results JSON."""
    import numpy
    import torch

    report: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "cuda_available": torch.cuda.is_available(),
        "mps_available": bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()),
        "cpu_threads": torch.get_num_threads(),
    }
    if torch.cuda.is_available():
        report["cuda_device"] = torch.cuda.get_device_name(0)
    for name in ("torchvision", "medmnist", "sklearn", "matplotlib"):
        try:
            report[name] = __import__(name).__version__
        except ImportError:
            report[name] = None
    return report


#: the rows of :func:`environment_table`, in words
ENVIRONMENT_LABELS: dict[str, str] = {
    "python": "Python",
    "platform": "platform",
    "torch": "PyTorch",
    "numpy": "NumPy",
    "cuda_available": "CUDA GPU available",
    "cuda_device": "CUDA GPU",
    "mps_available": "Apple MPS available",
    "cpu_threads": "CPU threads used by torch",
    "torchvision": "torchvision",
    "medmnist": "medmnist",
    "sklearn": "scikit-learn",
    "matplotlib": "matplotlib",
}

#: data sets and models of the stored runs, in words (notebook 00's tables): the course's one table of display names
DATASET_WORDS: dict[str, str] = DISPLAY_NAMES["dataset"]
MODEL_WORDS: dict[str, str] = DISPLAY_NAMES["model"]


def in_words(name: str) -> str:
    """A data set's or model's key in words (``small_cnn`` → "small CNN"); an unknown key is returned as it is."""
    return DATASET_WORDS.get(name, MODEL_WORDS.get(name, name))


def environment_table(report: Mapping[str, Any]):
    """:func:`environment_report` as a one-column table with its rows in words (yes/no for the flags, "not
    installed" for a missing package), the way notebook 00 shows it instead of a printed dict."""
    import pandas as pd

    def shown(value: Any) -> str:
        if isinstance(value, bool):
            return "yes" if value else "no"
        return "not installed" if value is None else str(value)

    rows = {ENVIRONMENT_LABELS.get(key, key.replace("_", " ")): shown(value) for key, value in report.items()}
    return pd.DataFrame({"version or value": rows}).rename_axis("component")


def _jsonable(value: Any) -> Any:
    """Tensors, numpy scalars and arrays, paths and dataclasses → plain JSON values; NaN and ±inf → None (null),
    so the file is strict JSON that every reader accepts."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "tolist"):
        return _jsonable(value.tolist())
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return _jsonable(asdict(value))
    return value


def save_results(
    cfg: RunConfig,
    results: Mapping[str, Any],
    data_source: str | None = None,
    top_level: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``results`` with the run's configuration and environment to ``cfg.results_path``; return the path.

    ``top_level`` adds keys to the payload's top level beside ``results`` (e.g. the ``dataset``, ``seeds`` and
    ``models`` a results schema asks for at the top). A key the payload already has is accepted only with the
    same value (``profile``), so it can neither overwrite the run's record nor contradict it. Paths (the data
    source, the configured results path and data folder) are stored as :func:`helpers.utils.display_path` writes
    them, so a committed results file names no folder of the machine that wrote it. Nothing is printed: the folded
    details cell (``helpers.course.details``) names the file.
    """
    config = {
        k: display_path(v) if k in ("results_path", "data_dir") and isinstance(v, str) else v
        for k, v in _jsonable(asdict(cfg)).items()
    }
    payload = {
        "notebook": cfg.notebook,
        "profile": cfg.profile,
        "config": config,
        "data_source": None if data_source is None else shorten_paths(data_source),
        "environment": environment_report(),
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "results": _jsonable(results),
    }
    for key, value in _jsonable(dict(top_level or {})).items():
        if key in payload and payload[key] != value:
            raise ValueError(
                f"save_results: top_level[{key!r}] = {value!r} contradicts the payload's {key!r} = "
                f"{payload[key]!r}; choose another key or drop it"
            )
        payload[key] = value
    path = Path(cfg.results_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(payload, indent=2, allow_nan=False))
    return path


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through :func:`helpers.utils.write_text_atomically`: a reader sees the
    old file or the new one, never a partial one, and the file gets the mode the umask gives a new file."""
    write_text_atomically(path, text)

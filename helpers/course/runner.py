"""Course plumbing: run profiles, the resolved run configuration, results JSON, and the notebook runner.

Every notebook starts with a cell tagged ``parameters`` whose knobs default to ``None`` ("take the profile's
value"), a table ``PROFILES`` of what ``smoke`` / ``quick`` / ``full`` mean for that notebook, and then::

    cfg = course.configure("01_measuring_calibration", PROFILES, profile=profile, epochs=epochs, ...)

so a papermill sweep can override any single knob and everything else follows the profile.

Command line (``python -m helpers.course --help``)::

    run      execute every notebook with papermill into a run folder (executed copies, results JSON, summary)
    prepare  inject parameters without executing (the CI executes the prepared copies with nbval)
    compare  whether a run's notebooks show the same tables as the committed ones
    publish  copy a checked reference run into notebooks/ and results/reference/ (the committed course)
    check    verify that every notebook of the folder's last run (its summary.json) succeeded and wrote a fresh
             results JSON
    check-outputs  report the output rules (helpers.course.output_rules) per notebook
    clean-outputs  strip progress bars, widget state and the absolute checkout path from stored outputs, in place
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import math
import os
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
from helpers.utils import display_path, shorten_paths, write_text_atomically

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
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


@dataclass
class RunConfig:
    """Every knob of one notebook run, after the profile's defaults were filled in."""

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

    def __getattr__(self, name: str) -> Any:
        # notebook-specific knobs (e.g. ``alphas``, ``recipes``) live in ``extra``
        extra = self.__dict__.get("extra", {})
        if name in extra:
            return extra[name]
        raise AttributeError(f"RunConfig has no knob {name!r}; knobs are {sorted(list(asdict(self)) + list(extra))}")

    def describe(self, width: int = 110) -> str:
        """``[notebook] profile 'quick', dataset 'dermamnist'`` and then every knob, in lines of at most ``width``
        characters; paths as ``helpers.utils.display_path`` writes them."""
        shown = {
            k: display_path(v) if k in ("results_path", "data_dir") and v is not None else v
            for k, v in asdict(self).items()
            if k not in ("notebook", "profile", "dataset", "extra")
        }
        knobs = [f"{k}={_knob_text(v)}" for k, v in {**shown, **self.extra}.items()]
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
    """Fill every knob that is ``None`` from ``profiles[profile]`` and print the resolved configuration.

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
    values.update({k: v for k, v in knobs.items() if v is not None})
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
    core = {k: values.pop(k) for k in KNOBS}
    cfg = RunConfig(notebook=notebook, profile=profile, extra=values, **core)
    print(cfg.describe())
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
    return set(_assigned_names(injected[-1])) if injected else set()


def _assigned_names(source: str) -> list[str]:
    """Names assigned at the top level of a cell's source (``name = value``), in order."""
    return [
        target.id
        for node in ast.parse(source).body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    ]


def notebook_profiles(notebook: str) -> dict[str, dict[str, Any]]:
    """The ``PROFILES`` table of a course notebook, read from its code cell (a literal dict: it is evaluated with
    no builtins), so that commands such as ``python -m helpers.course.suites`` use exactly the notebook's settings."""
    [path] = list_notebooks([notebook])
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        source = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
        for node in ast.parse(source).body if "PROFILES" in source else []:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PROFILES" for t in node.targets):
                return eval(compile(ast.Expression(node.value), str(path), "eval"), {"__builtins__": {}, "dict": dict})
    raise ValueError(f"{path.name} has no `PROFILES = {{...}}` assignment in a code cell")


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

#: data sets and models of the stored runs, in words (notebook 00's tables)
DATASET_WORDS: dict[str, str] = {
    "dermamnist": "DermaMNIST",
    "chestmnist": "ChestMNIST",
    "chestxray14": "ChestX-ray14",
    "isic2018": "ISIC 2018",
    "isic2018_heldout": "ISIC 2018, held-out lesions",
    "isic2018_sites": "ISIC 2018, split by site",
    "synthetic_dermamnist": "synthetic DermaMNIST-like",
    "synthetic_chestmnist": "synthetic chest, coupled",
    "synthetic_chestmnist_independent": "synthetic chest, independent",
}
MODEL_WORDS: dict[str, str] = {
    "small_cnn": "small CNN",
    "small_cnn_wide": "wide small CNN",
    "resnet18": "ResNet-18",
    "resnet50": "ResNet-50",
}


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
    them, so a committed results file names no folder of the machine that wrote it.
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
    print(f"results written to {display_path(path)}")
    return path


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through :func:`helpers.utils.write_text_atomically`: a reader sees the
    old file or the new one, never a partial one, and the file gets the mode the umask gives a new file."""
    write_text_atomically(path, text)


# ----------------------------------------------------------------------------------------------------------------
# the runner


def list_notebooks(selection: list[str] | None = None) -> list[Path]:
    """Course notebooks in order; ``selection`` filters by prefix (``["00", "01"]``) or full stem."""
    notebooks = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
    if selection:
        chosen = [nb for nb in notebooks if any(nb.stem == s or nb.stem.startswith(s + "_") for s in selection)]
        unknown = [s for s in selection if not any(nb.stem == s or nb.stem.startswith(s + "_") for nb in notebooks)]
        if unknown:
            raise ValueError(f"no notebook matches {unknown}; available: {[nb.stem for nb in notebooks]}")
        notebooks = chosen
    if not notebooks:
        raise FileNotFoundError(f"no course notebooks found in {NOTEBOOK_DIR}")
    return notebooks


def notebook_parameters(notebook: Path) -> list[str]:
    """The names its cell tagged ``parameters`` assigns, in order (parsed with ``ast``: papermill's own inspector
    skips a line whose comment holds an apostrophe)."""
    import nbformat

    cells = [
        cell
        for cell in nbformat.read(notebook, as_version=4).cells
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", [])
    ]
    if len(cells) != 1:
        raise ValueError(f"{notebook.name} needs exactly one code cell tagged 'parameters', found {len(cells)}")
    return _assigned_names(cells[0].source)


def _check_parameter_names(notebooks: list[Path], names: list[str]) -> None:
    """Refuse, before anything runs, a parameter that a selected notebook does not declare."""
    problems = []
    for notebook in notebooks:
        declared = notebook_parameters(notebook)
        unknown = [name for name in names if name not in declared]
        if unknown:
            problems.append(
                f"{notebook.stem}: unknown parameter(s) {unknown}; its parameters are: {', '.join(declared)}"
            )
    if problems:
        raise ValueError("nothing was run:\n  " + "\n  ".join(problems))


def _declared_profiles(notebook: Path) -> dict[str, dict[str, Any]]:
    """The notebook's PROFILES table, or none for a notebook without one (then only the shared rules apply)."""
    try:
        return notebook_profiles(notebook.stem)
    except ValueError:
        return {}


def _check_parameter_values(notebooks: list[Path], parameters: Mapping[str, Any]) -> None:
    """Refuse, before anything runs, a parameter value that breaks its knob rule (:mod:`helpers.course.knobs`) in a
    selected notebook."""
    if not parameters:
        return
    problems = [
        f"{notebook.stem}: {problem}"
        for notebook in notebooks
        for problem in knob_rules.problems(parameters, _declared_profiles(notebook))
    ]
    if problems:
        raise ValueError("nothing was run; knob value(s) not allowed:\n  " + "\n  ".join(problems))


def _clear_previous_outputs(out: Path) -> None:
    """Remove what an earlier run wrote into ``out`` (executed copies, results JSON, summary): a failed run must
    not leave the previous run's results to be read as its own."""
    stale = [
        *(out / "notebooks").glob("*.ipynb"),
        *(out / "results").glob("*.json"),
        *(out / name for name in ("summary.json", "summary.md") if (out / name).exists()),
    ]
    for path in stale:
        path.unlink()
    if stale:
        print(f"removed {len(stale)} file(s) of an earlier run in {out}")


def _parameters_for(notebook: Path, out: Path, profile: str | None, extra: Mapping[str, Any]) -> dict[str, Any]:
    parameters: dict[str, Any] = {"results_path": str((out / "results" / f"{notebook.stem}.json").resolve())}
    if profile is not None:
        parameters["profile"] = profile
    parameters.update(extra)
    return parameters


def run_course(
    out: Path,
    profile: str | None = None,
    selection: list[str] | None = None,
    prepare_only: bool = False,
    extra: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Execute (or only prepare) every selected notebook with papermill into ``out``; write a summary."""
    notebooks = list_notebooks(selection)  # bad selections and parameter names fail before any folder is made
    _check_parameter_names(notebooks, list(extra or {}))
    _check_parameter_values(notebooks, extra or {})
    out = Path(out)
    _clear_previous_outputs(out)
    (out / "notebooks").mkdir(parents=True, exist_ok=True)
    (out / "results").mkdir(parents=True, exist_ok=True)
    started_at = time.time()
    rows = []
    with kernel_environment():
        for notebook in notebooks:
            rows.append(_execute_one(notebook, out, profile, extra or {}, prepare_only))
    _write_summary(out, rows, profile, started_at)
    failed = [r["notebook"] for r in rows if r["status"] == "failed"]
    if failed:
        raise SystemExit(f"notebooks failed: {failed}; executed copies with the traceback are in {out / 'notebooks'}")
    return rows


#: the matplotlib backend of a Jupyter kernel that stores figures as PNG outputs
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
#: set to "1" for kernels that no one looks at (``make course``, CI): see :func:`interact`
HEADLESS_ENV = "CALIBMED_HEADLESS"


def interact(function: Any, **controls: Any) -> Any:
    """``ipywidgets.interact(function, **controls)`` in a notebook someone is looking at. In a kernel started by
    ``make course`` or CI (``CALIBMED_HEADLESS=1``) it prints one line and draws nothing: there nobody can move
    a slider (each widget has a static figure above it), and nbclient can wait forever on a cell whose widget
    draws a figure as it is displayed (jupyter/nbclient#312, nteract/papermill#723; it happened here twice in
    notebook 01 under papermill, with the kernel idle)."""
    if os.environ.get(HEADLESS_ENV) == "1":
        print("(interactive widget: shown when the notebook is opened in JupyterLab; static figure above)")
        return None
    import ipywidgets

    return ipywidgets.interact(function, **controls)


@contextlib.contextmanager
def kernel_environment():
    """The environment the executed notebooks' kernels inherit, restored afterwards: one final line per training
    instead of stored progress bars (``CALIBMED_PROGRESS=final`` unless set), the inline matplotlib backend, and
    ``CALIBMED_HEADLESS=1`` (widgets are not displayed, :func:`interact`). A kernel obeys an inherited
    ``MPLBACKEND``; with ``Agg`` (which the Makefile exports for the tests) every figure is drawn and dropped, and
    the executed notebook holds no PNG."""
    saved = {name: os.environ.get(name) for name in ("CALIBMED_PROGRESS", "MPLBACKEND", HEADLESS_ENV)}
    os.environ.setdefault("CALIBMED_PROGRESS", "final")
    os.environ["MPLBACKEND"] = INLINE_BACKEND
    os.environ[HEADLESS_ENV] = "1"
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _execute_one(
    notebook: Path, out: Path, profile: str | None, extra: Mapping[str, Any], prepare_only: bool
) -> dict[str, Any]:
    """Execute (or prepare) one notebook into ``out``; its summary row (a failure is recorded, not raised)."""
    import papermill

    parameters = _parameters_for(notebook, out, profile, extra)
    target = out / "notebooks" / notebook.name
    started = time.perf_counter()
    status = "prepared" if prepare_only else "ok"
    error = None
    try:
        # the injected results_path is relative to the folder the notebook executes in (notebooks/ here; its
        # own folder for the prepared copies nbval runs), so no stored output shows this machine's layout
        workdir = target.parent if prepare_only else NOTEBOOK_DIR
        injected = {**parameters, "results_path": os.path.relpath(parameters["results_path"], workdir.resolve())}
        papermill.execute_notebook(
            str(notebook),
            str(target),
            parameters=injected,
            prepare_only=prepare_only,
            cwd=str(NOTEBOOK_DIR),
            kernel_name="python3",
            progress_bar=False,
        )
    except Exception as exc:  # the summary records which notebook failed; the run still fails at the end
        status, error = (
            "failed",
            f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}",
        )
    seconds = time.perf_counter() - started
    print(f"{notebook.stem:45s} {status:9s} {seconds:7.1f} s" + (f"  {error}" if error else ""), flush=True)
    return {
        "notebook": notebook.stem,
        "status": status,
        "seconds": round(seconds, 1),
        "error": error,
        "results": parameters["results_path"],
    }


def _write_summary(out: Path, rows: list[dict[str, Any]], profile: str | None, started_at: float) -> None:
    write_atomically(
        out / "summary.json",
        json.dumps({"profile": profile or "notebook defaults", "started_at": started_at, "notebooks": rows}, indent=2),
    )
    lines = [
        f"# CalibMed run — profile: {profile or 'notebook defaults'}",
        "",
        "| notebook | status | seconds | results |",
        "|---|---|---|---|",
    ]
    lines += [f"| {r['notebook']} | {r['status']} | {r['seconds']} | {Path(r['results']).name} |" for r in rows]
    write_atomically(out / "summary.md", "\n".join(lines) + "\n")
    print(f"summary: {out / 'summary.md'}")


def _load_json_object(path: Path) -> dict[str, Any]:
    """The JSON object stored in ``path``; a ValueError whose text completes "<path> ..." with what is wrong (not
    UTF-8, not JSON, not an object)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"is not UTF-8 text ({error.reason} at byte {error.start})") from error
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"is not valid JSON ({error})") from error
    if not isinstance(value, dict):
        raise ValueError(f"holds a {type(value).__name__}, not a JSON object")
    return value


def _read_summary(out: Path) -> dict[str, Any]:
    """A run folder's ``summary.json``, checked: a start time and a non-empty list of notebook rows, each with its
    notebook and status. Anything else fails naming the file and what is wrong."""
    summary_path = out / "summary.json"
    again = "run `prepare` or `run` into the folder again"
    if not summary_path.is_file():
        raise SystemExit(f"no summary.json in {out}: run `prepare` or `run` into it first")
    try:
        summary = _load_json_object(summary_path)
    except ValueError as error:
        raise SystemExit(f"{summary_path} {error}; {again}") from None
    if "started_at" not in summary:
        raise SystemExit(f"{summary_path} was written by an older runner (no start time): run `prepare` or `run` again")
    started_at = summary["started_at"]
    if isinstance(started_at, bool) or not isinstance(started_at, (int, float)):
        raise SystemExit(
            f"{summary_path}: started_at must be a number (seconds since the epoch), got {started_at!r}; {again}"
        )
    rows = summary.get("notebooks")
    if not isinstance(rows, list):
        raise SystemExit(f"{summary_path} has no 'notebooks' list (got {rows!r}); {again}")
    if not rows:
        raise SystemExit(f"{summary_path} lists no notebooks: the run executed nothing; {again}")
    for number, row in enumerate(rows, 1):
        missing = [
            key for key in ("notebook", "status") if not isinstance(row, dict) or not isinstance(row.get(key), str)
        ]
        if missing:
            raise SystemExit(
                f"{summary_path}: notebook row {number} ({row!r}) lacks the text entries {missing}; {again}"
            )
    return summary


def check_results(out: Path) -> None:
    """Fail unless every notebook of this run (its ``summary.json``) succeeded, or was prepared, and wrote a
    results JSON after the run started that names its notebook."""
    out = Path(out)
    summary = _read_summary(out)
    problems = [
        problem
        for row in summary["notebooks"]
        if (problem := _result_problem(out, row, summary["started_at"])) is not None
    ]
    if problems:
        raise SystemExit("results check failed:\n  " + "\n  ".join(problems))
    print(f"results check: all {len(summary['notebooks'])} notebooks of this run wrote their results JSON")


_MTIME_SLACK_SECONDS = 1.0  # file times come from a coarse clock that may lag time.time() by a few milliseconds


def _result_problem(out: Path, row: Mapping[str, Any], started_at: float) -> str | None:
    """What is wrong with one notebook's outcome in this run, or None."""
    stem = row["notebook"]
    if row["status"] not in ("ok", "prepared"):
        return f"{stem}: {row['status']} in this run ({row.get('error')})"
    path = out / "results" / f"{stem}.json"
    if not path.is_file():
        return f"{stem}: no results JSON at {path}"
    if path.stat().st_mtime < started_at - _MTIME_SLACK_SECONDS:
        return f"{stem}: results JSON at {path} is older than this run (stale)"
    try:
        payload = _load_json_object(path)
    except ValueError as error:
        return f"{stem}: results JSON at {path} {error}"
    if payload.get("notebook") != stem or not payload.get("results"):
        return f"{stem}: results JSON at {path} is empty or names another notebook"
    return None


REFERENCE_RESULTS_DIR = REPO_ROOT / "results" / "reference"


def publish(out: Path) -> list[Path]:
    """Make a checked reference run the committed course: each executed notebook replaces ``notebooks/<name>``
    and its results JSON goes to ``results/reference/<name>.json`` (with a repository-relative results path).

    Each notebook is first cleaned as ``clean-outputs`` does (the executing kernel saves widget state, for one), its
    injected ``results_path`` names the committed JSON instead of the run's folder, and it must then keep every
    output rule of :mod:`helpers.course.output_rules`; otherwise nothing is published."""
    from helpers.course import output_rules

    out = Path(out)
    check_results(out)
    summary = json.loads((out / "summary.json").read_text())
    if summary.get("profile") != "reference":
        raise SystemExit(f"{out} was run in profile {summary.get('profile')!r}: only a reference run is published")
    cleaned, problems = {}, []
    for row in summary["notebooks"]:
        stem = row["notebook"]
        executed, _ = output_rules.clean_notebook(
            json.loads((out / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))
        )
        cleaned[stem] = output_rules.settle_injected_results_path(executed, stem)
        problems += [
            f"{stem}: {rule}: {found[0]}" for rule, found in output_rules.check_notebook(cleaned[stem]).items() if found
        ]
    if problems:
        raise SystemExit(
            "nothing was published; the executed notebooks break output rules:\n  " + "\n  ".join(problems)
        )
    written = []
    REFERENCE_RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    for row in summary["notebooks"]:
        stem = row["notebook"]
        payload = json.loads((out / "results" / f"{stem}.json").read_text())
        relative = f"results/reference/{stem}.json"
        payload["config"]["results_path"] = relative
        output_rules.write_notebook_atomically(cleaned[stem], NOTEBOOK_DIR / f"{stem}.ipynb")
        write_atomically(REFERENCE_RESULTS_DIR / f"{stem}.json", json.dumps(payload, indent=2, allow_nan=False))
        written += [NOTEBOOK_DIR / f"{stem}.ipynb", REFERENCE_RESULTS_DIR / f"{stem}.json"]
        print(f"published {stem}: notebooks/{stem}.ipynb, {relative}")
    return written


#: the tag of a cell whose tables are measurements of the executing machine (throughput, run-time estimates)
MACHINE_DEPENDENT_TAG = "machine-dependent"


def _tables(path: Path) -> tuple[list[str], int]:
    """The tables a notebook shows — every DataFrame or markdown output (``text/html`` or ``text/markdown``), in
    order, as stored — outside cells tagged ``machine-dependent``, and how many tables those tagged cells show."""
    found, machine_dependent = [], 0
    try:
        cells = _load_json_object(path).get("cells")
    except ValueError as error:
        raise SystemExit(f"{path} {error}") from None
    if not isinstance(cells, list):
        raise SystemExit(f"{path} has no list of cells: not a notebook")
    for cell in cells:
        tables = [
            "".join(text) if isinstance(text, list) else text
            for output in cell.get("outputs", [])
            for kind in ("text/html", "text/markdown")
            if (text := output.get("data", {}).get(kind)) is not None
        ]
        if MACHINE_DEPENDENT_TAG in cell.get("metadata", {}).get("tags", []):
            machine_dependent += len(tables)
        else:
            found += tables
    return found, machine_dependent


def compare_tables(out: Path, committed: Path = NOTEBOOK_DIR) -> bool:
    """Whether every executed notebook of a run shows the same tables as the committed copy; prints one line each.
    Tables of cells tagged ``machine-dependent`` (measured speed) are left out and counted."""
    identical = True
    out = Path(out)
    rerun = "pass a run folder written by `python -m helpers.course run`"
    if not out.is_dir():
        raise SystemExit(f"{out} is not a folder: {rerun}")
    executed_notebooks = sorted((out / "notebooks").glob("*.ipynb"))
    if not executed_notebooks:
        raise SystemExit(f"no executed notebooks in {out / 'notebooks'}: {rerun}")
    for executed in executed_notebooks:
        counterpart = Path(committed) / executed.name
        if not counterpart.is_file():
            raise SystemExit(f"{executed.name}: no committed notebook {counterpart} to compare it with")
        (ours, skipped), (theirs, _) = _tables(executed), _tables(counterpart)
        same = sum(a == b for a, b in zip(ours, theirs))
        verdict = "identical" if ours == theirs else f"DIFFERENT ({same} of {max(len(ours), len(theirs))} equal)"
        identical &= ours == theirs
        print(
            f"{executed.stem:45s} {len(ours):3d} tables: {verdict}"
            + (f" ({skipped} machine-dependent left out)" if skipped else "")
        )
    return identical


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _outputs_command(args: argparse.Namespace) -> None:
    from helpers.course import output_rules

    paths = args.notebooks or sorted(NOTEBOOK_DIR.glob("*.ipynb"))
    if args.command == "clean-outputs":
        print(
            "| notebook | output bytes before | after | outputs removed | widget state removed "
            "| run paths and times removed | rules failing |"
        )
        print("|---|---:|---:|---:|---|---:|---|")
        for row in output_rules.clean_files(paths, args.repo_root):
            print(
                f"| {row['notebook']} | {row['bytes_before']:,} | {row['bytes_after']:,} | {row['outputs_removed']} "
                f"| {'yes' if row['widget_state_removed'] else 'no'} | {row['run_metadata_removed']} "
                f"| {', '.join(row['rules_failing']) or 'none'} |"
            )
    else:
        print(output_rules.report_table(paths))


def main(argv: list[str] | None = None, ray_engine: Any = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m helpers.course", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "prepare"):
        p = sub.add_parser(name)
        p.add_argument(
            "--profile",
            choices=PROFILE_NAMES,
            default=None,
            help="profile injected into every notebook (default: each notebook's own default, quick)",
        )
        p.add_argument("--out", type=Path, default=None, help="run folder (default: runs/<time>-<profile>)")
        p.add_argument("--notebooks", nargs="*", default=None, help="prefixes such as 00 01 (default: all)")
        p.add_argument(
            "-p",
            "--parameter",
            nargs=2,
            action="append",
            default=[],
            metavar=("NAME", "VALUE"),
            help="extra parameter for every notebook, VALUE parsed as JSON when possible",
        )
    _add_grid_arguments(sub.choices["run"])
    check = sub.add_parser("check")
    check.add_argument("out", type=Path)
    publish_parser = sub.add_parser(
        "publish",
        help="copy a checked reference run's notebooks and results JSON into notebooks/ and results/reference/",
    )
    publish_parser.add_argument("out", type=Path)
    compare_parser = sub.add_parser(
        "compare",
        help="do a run's executed notebooks show the committed notebooks' tables (DataFrame / markdown outputs)?",
    )
    compare_parser.add_argument("out", type=Path)
    for name in ("clean-outputs", "check-outputs"):
        p = sub.add_parser(
            name,
            help="strip progress bars, widget state and absolute path prefixes from stored outputs (in place)"
            if name == "clean-outputs"
            else "report the output rules per notebook",
        )
        p.add_argument("notebooks", nargs="*", type=Path, help="notebook files (default: notebooks/*.ipynb)")
        if name == "clean-outputs":
            p.add_argument(
                "--repo-root",
                action="append",
                default=None,
                metavar="PATH",
                help="absolute checkout path of the machine that executed the notebooks, rewritten to a "
                "relative path (repeatable; default: this checkout)",
            )
    args = parser.parse_args(argv)

    if args.command == "check":
        check_results(args.out)
        return
    if args.command == "publish":
        publish(args.out)
        return
    if args.command == "compare":
        if not compare_tables(args.out):
            raise SystemExit("some tables differ from the committed notebooks")
        return
    if args.command in ("clean-outputs", "check-outputs"):
        _outputs_command(args)
        return
    out = args.out or REPO_ROOT / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{args.profile or 'default'}"
    extra = {name: _parse_value(value) for name, value in args.parameter}
    print(f"python {sys.version.split()[0]}, data dir: {os.environ.get('CALIBMED_DATA_DIR', '(default data/)')}")
    if args.command == "run" and (args.engine == "ray" or args.grid):
        _run_grid_command(parser, args, out, extra, ray_engine)
        return
    try:
        run_course(
            out, profile=args.profile, selection=args.notebooks, prepare_only=args.command == "prepare", extra=extra
        )
    except ValueError as error:  # a bad selection or parameter name: a message, not a traceback
        raise SystemExit(f"error: {error}") from None


def _add_grid_arguments(run_parser: argparse.ArgumentParser) -> None:
    """``run --engine ray --grid NAME=A,B ...`` (helpers/ray_engine.py; Ray is the optional extra ``scale``)."""
    run_parser.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="ray: every (grid point, notebook) a Ray task, each point in its own folder",
    )
    run_parser.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="NAME=A,B",
        help="a parameter swept over its values (repeatable: the grid is every combination)",
    )
    run_parser.add_argument(
        "--address", default=None, help="Ray cluster to join: auto or HOST:PORT (default: a local Ray on this machine)"
    )
    run_parser.add_argument("--gpus-per-run", type=float, default=0.0, help="GPU share of each notebook's task")


def _run_grid_command(
    parser: argparse.ArgumentParser, args: argparse.Namespace, out: Path, extra: Mapping[str, Any], ray_engine: Any
) -> None:
    """``ray_engine``: the module :mod:`helpers.course.ray_engine`, which ``python -m helpers.course`` passes to
    :func:`main`
    (the engine sits above this module and imports it; this module never imports the engine)."""
    if args.engine != "ray":
        parser.error("--grid runs through Ray: add --engine ray")
    if ray_engine is None:
        raise SystemExit("--engine ray is a command-line option: run python -m helpers.course run --engine ray")
    try:
        grid = ray_engine.parse_grid(args.grid)
        ray_engine.run_grid(
            out,
            grid,
            profile=args.profile,
            selection=args.notebooks,
            extra=extra,
            address=args.address,
            gpus_per_notebook=args.gpus_per_run,
        )
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None


if __name__ == "__main__":
    # only the program's entry imports the Ray engine (which imports this module as helpers.course.runner): no cycle
    from helpers.course import ray_engine

    main(ray_engine=ray_engine)

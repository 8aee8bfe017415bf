"""The notebook runner: execute (or prepare) every selected notebook with papermill into a run folder, check what a
run wrote, publish a checked reference run as the committed course, and compare a run's tables with the committed
ones (command line: :mod:`helpers.course.cli`, ``python -m helpers.course``).

A run folder holds the executed copies (``notebooks/``), each notebook's results JSON (``results/``) and a summary
(``summary.json``, ``summary.md``); the Ray engine (:mod:`helpers.course.ray_engine`) writes the same layout per
grid point through :func:`execute_notebook`, :func:`check_parameter_names`, :func:`check_parameter_values`,
:func:`clear_previous_outputs` and :func:`write_summary`.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from helpers.course import data_check, output_cleanup, output_rules
from helpers.course import knobs as knob_rules
from helpers.course.profiles import REPO_ROOT, assigned_names, write_atomically
from helpers.data import resolve_data_dir

NOTEBOOK_DIR = REPO_ROOT / "notebooks"


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


def notebook_profiles(notebook: str) -> dict[str, dict[str, Any]]:
    """The ``PROFILES`` table of a course notebook, read from its code cell (a literal dict: it is evaluated with
    no builtins), so that commands such as ``python -m helpers.course.train_runs`` use exactly the notebook's
    settings."""
    [path] = list_notebooks([notebook])
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        source = output_cleanup.cell_source(cell) if cell["cell_type"] == "code" else ""
        for node in ast.parse(source).body if "PROFILES" in source else []:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PROFILES" for t in node.targets):
                return eval(compile(ast.Expression(node.value), str(path), "eval"), {"__builtins__": {}, "dict": dict})
    raise ValueError(f"{path.name} has no `PROFILES = {{...}}` assignment in a code cell")


def _parameters_source(notebook: Path) -> str:
    """The source of the notebook's one code cell tagged ``parameters``."""
    import nbformat

    cells = [
        cell
        for cell in nbformat.read(notebook, as_version=4).cells
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", [])
    ]
    if len(cells) != 1:
        raise ValueError(f"{notebook.name} needs exactly one code cell tagged 'parameters', found {len(cells)}")
    return cells[0].source


def notebook_parameters(notebook: Path) -> list[str]:
    """The names its cell tagged ``parameters`` assigns, in order (parsed with ``ast``: papermill's own inspector
    skips a line whose comment holds an apostrophe)."""
    return assigned_names(_parameters_source(notebook))


def notebook_defaults(notebook: Path) -> dict[str, Any]:
    """The values its parameters cell assigns that are Python literals (``profile = "quick"``, ``seed = 0``,
    ``dataset = None``), by name."""
    values = {}
    for node in ast.parse(_parameters_source(notebook)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            with contextlib.suppress(ValueError, SyntaxError):
                values[node.targets[0].id] = ast.literal_eval(node.value)
    return values


def data_needs(notebook: Path, profile: str | None, extra: Mapping[str, Any]) -> list[data_check.Need]:
    """The data the notebook needs in a run with ``profile`` and the parameters ``extra``
    (:func:`helpers.course.data_check.notebook_needs`); a relative ``data_dir`` counts from the notebooks' folder,
    where their kernels run."""
    defaults = notebook_defaults(notebook)
    chosen = extra.get("data_dir") if extra.get("data_dir") is not None else defaults.get("data_dir")
    directory = resolve_data_dir(None if chosen is None else NOTEBOOK_DIR / Path(chosen).expanduser())
    return data_check.notebook_needs(notebook.stem, _declared_profiles(notebook), defaults, profile, extra, directory)


def skipped_notebooks(notebooks: list[Path], profile: str | None, extra: Mapping[str, Any]) -> dict[str, str]:
    """{notebook: why it is skipped} for the notebooks whose real-image data are absent
    (:func:`helpers.course.data_check.skip_reason`); SystemExit before anything runs when
    ``CALIBMED_REQUIRE_ALL_DATA=1`` forbids skipping."""
    skipped = {
        notebook.stem: reason
        for notebook in notebooks
        if (reason := data_check.skip_reason(data_needs(notebook, profile, extra))) is not None
    }
    if skipped and data_check.require_all_data():
        raise SystemExit(
            f"nothing was run: {data_check.REQUIRE_ALL_DATA_ENV}=1 but "
            + "; ".join(f"{stem}: {reason}" for stem, reason in skipped.items())
        )
    return skipped


def check_parameter_names(notebooks: list[Path], names: list[str]) -> None:
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


def check_parameter_values(notebooks: list[Path], parameters: Mapping[str, Any]) -> None:
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


def clear_previous_outputs(out: Path) -> None:
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
    """Execute (or only prepare) every selected notebook with papermill into ``out``; write a summary. A notebook
    whose real-image data are absent is not executed: its summary row says ``skipped`` and why
    (:func:`skipped_notebooks`)."""
    notebooks = list_notebooks(selection)  # bad selections and parameter names fail before any folder is made
    check_parameter_names(notebooks, list(extra or {}))
    check_parameter_values(notebooks, extra or {})
    skipped = skipped_notebooks(notebooks, profile, extra or {})
    out = Path(out)
    clear_previous_outputs(out)
    (out / "notebooks").mkdir(parents=True, exist_ok=True)
    (out / "results").mkdir(parents=True, exist_ok=True)
    started_at = time.time()
    rows = []
    with kernel_environment():
        for notebook in notebooks:
            if notebook.stem in skipped:
                rows.append(skipped_row(notebook, out, profile, extra or {}, skipped[notebook.stem]))
            else:
                rows.append(execute_notebook(notebook, out, profile, extra or {}, prepare_only))
    write_summary(out, rows, profile, started_at)
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


def kernel_manager_config() -> Any:
    """The traitlets config of the kernel manager papermill starts each notebook's kernel with: CurveZMQ transport
    encryption (``KernelManager.transport_encryption = "auto"``: keys provisioned for a kernelspec that declares
    ``curve`` support, as ipykernel's does). jupyter_client's default is ``"disabled"``, and ipykernel (7.4 and later)
    then warns "Kernel is running over TCP without encryption" once per kernel. Empty where jupyter_client has no
    such setting or pyzmq lacks CurveZMQ (there the kernel's warning is true and stays)."""
    import zmq
    from jupyter_client import KernelManager
    from traitlets.config import Config

    config = Config()
    if "transport_encryption" in KernelManager.class_trait_names() and zmq.has("curve"):
        config.KernelManager.transport_encryption = "auto"
    return config


def execute_notebook(
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
            config=kernel_manager_config(),
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


def skipped_row(
    notebook: Path, out: Path, profile: str | None, extra: Mapping[str, Any], reason: str
) -> dict[str, Any]:
    """The summary row of a notebook the run does not execute for want of data, printed as one line."""
    print(f"{notebook.stem:45s} skipped: {reason}", flush=True)
    return {
        "notebook": notebook.stem,
        "status": "skipped",
        "seconds": 0.0,
        "error": None,
        "reason": reason,
        "results": _parameters_for(notebook, out, profile, extra)["results_path"],
    }


def write_summary(out: Path, rows: list[dict[str, Any]], profile: str | None, started_at: float) -> None:
    """Write the run's ``summary.json`` (the profile, the start time and one row per notebook, as
    :func:`execute_notebook` returns them; what :func:`check_results` reads) and ``summary.md`` (the same rows as a
    table) into ``out``."""
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
    lines += [
        f"| {r['notebook']} | {r['status']}{': ' + r['reason'] if r.get('reason') else ''} | {r['seconds']} "
        f"| {Path(r['results']).name} |"
        for r in rows
    ]
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
    results JSON after the run started that names its notebook. A notebook the run skipped for want of data
    (status ``skipped`` with its reason) is accepted and named, unless ``CALIBMED_REQUIRE_ALL_DATA=1``."""
    out = Path(out)
    summary = _read_summary(out)
    rows = summary["notebooks"]
    problems = [problem for row in rows if (problem := _result_problem(out, row, summary["started_at"])) is not None]
    if problems:
        raise SystemExit("results check failed:\n  " + "\n  ".join(problems))
    skipped = [row["notebook"] for row in rows if row["status"] == "skipped"]
    ran = len(rows) - len(skipped)
    print(
        f"results check: all {ran} notebooks of this run wrote their results JSON"
        + (f"; skipped for want of data: {', '.join(skipped)}" if skipped else "")
    )


_MTIME_SLACK_SECONDS = 1.0  # file times come from a coarse clock that may lag time.time() by a few milliseconds


def _result_problem(out: Path, row: Mapping[str, Any], started_at: float) -> str | None:
    """What is wrong with one notebook's outcome in this run, or None."""
    stem = row["notebook"]
    if row["status"] == "skipped":
        reason = row.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            return f"{stem}: skipped in this run without a reason"
        if data_check.require_all_data():
            return f"{stem}: skipped ({reason}) but {data_check.REQUIRE_ALL_DATA_ENV}=1: every notebook must run"
        return None
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
    out = Path(out)
    check_results(out)
    summary = json.loads((out / "summary.json").read_text())
    if summary.get("profile") != "reference":
        raise SystemExit(f"{out} was run in profile {summary.get('profile')!r}: only a reference run is published")
    skipped = [row["notebook"] for row in summary["notebooks"] if row["status"] == "skipped"]
    if skipped:
        raise SystemExit(f"nothing was published: {out} skipped {', '.join(skipped)} for want of data")
    cleaned, problems = {}, []
    for row in summary["notebooks"]:
        stem = row["notebook"]
        executed, _ = output_cleanup.clean_notebook(
            json.loads((out / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))
        )
        cleaned[stem] = output_cleanup.settle_injected_results_path(executed, stem)
        committed = NOTEBOOK_DIR / f"{stem}.ipynb"
        if committed.is_file():
            stale = output_cleanup.first_source_difference(cleaned[stem], _load_json_object(committed))
            if stale:
                problems.append(f"{stem}: {stale}: it was executed before an edit; re-run it")
        problems += [
            f"{stem}: {rule}: {found[0]}" for rule, found in output_rules.check_notebook(cleaned[stem]).items() if found
        ]
    if problems:
        raise SystemExit(
            "nothing was published; the executed notebooks break output rules or differ from the committed sources:\n  "
            + "\n  ".join(problems)
        )
    written = []
    REFERENCE_RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    for row in summary["notebooks"]:
        stem = row["notebook"]
        payload = json.loads((out / "results" / f"{stem}.json").read_text())
        relative = f"results/reference/{stem}.json"
        payload["config"]["results_path"] = relative
        output_cleanup.write_notebook_atomically(cleaned[stem], NOTEBOOK_DIR / f"{stem}.ipynb")
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


def parse_value(text: str) -> Any:
    """A parameter's value given on the command line: parsed as JSON when it is JSON (``3``, ``[0, 1]``, ``true``),
    else kept as text (``dermamnist``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text

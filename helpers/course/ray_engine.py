"""Sweeps beyond one machine on Ray (issue 17): the declared runs and notebook grids as Ray tasks.

Ray (https://docs.ray.io) is an optional extra: ``pip install -e '.[scale]'``. Without ``--engine ray`` nothing
here is imported and the course works as before.

* **Declared runs** (``python -m helpers.course.train_runs train --engine ray``): every run the notebooks declare
  that is not stored yet becomes one Ray task, with ``--gpus-per-run`` of a GPU (fractional: 0.0625 packs sixteen
  runs onto one GPU) and ``--cpus-per-run`` CPUs. A task receives only what *names* the run — notebook, profile,
  knobs and the run's content key (:class:`RunName`) — and rebuilds it on its node from that node's data
  (``CALIBMED_DATA_DIR``), so no data crosses the network. A key the node does not declare (its data or code
  differ) is refused with the reason. Rounds are kept: LS+ is declared only once its cross-entropy run exists.
* **The store stays correct.** A task first plans again on its node: a run already stored (or cached) there is
  not trained. The trained file comes back to the driver as bytes and is written atomically under its content key
  (:func:`keep_file`); the same key always names the same run, so a task that Ray retries after its node died
  writes the same file again, never a second copy and never half of one. What a node returns is not trusted: the
  outcome's fields, the run it names, the file's name and its bytes (content hash, structure, read so that nothing
  in it runs) are checked before anything is written (:func:`check_outcome`).
* **Notebook grids** (``python -m helpers.course run --engine ray --grid seed=0,1 --grid dataset=...``): every
  (grid point, notebook) is a task that executes the notebook with papermill on its node into a temporary
  folder and returns the executed notebook and its results JSON; the driver writes them into
  ``<sweep>/<point>/`` (``seed=0,dataset=dermamnist``), writes each point's summary, one summary of the sweep
  and runs ``course check`` on every point.

Ray retries a task whose worker or node died (``max_retries``); a Python error inside a task is not retried and
stops the command with the task's traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.course.grids import (  # noqa: F401  (the grid's parts, also reached through this module)
    check_grid_values,
    grid_points,
    parse_grid,
    point_folder,
    point_folders,
    split_values,
)
from helpers.utils import atomic

ENGINES = ("local", "ray")
INSTALL_HINT = "pip install -e '.[scale]' (make venv installs it)"


def require_ray() -> Any:
    """The ``ray`` module, or a clear error saying how to install it."""
    try:
        import ray
    except ImportError as error:
        raise SystemExit(f"--engine ray needs Ray, which is not installed here: {INSTALL_HINT}") from error
    return ray


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """``--engine ray`` and its options for ``python -m helpers.course.train_runs train`` (Ray is the optional extra
    ``scale``)."""
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="local",
        help="local: this process (or --workers forked processes); ray: every run a Ray task",
    )
    parser.add_argument(
        "--address",
        default=None,
        help="Ray cluster to join: auto (the one `ray start` runs here) or HOST:PORT; default: a "
        "local Ray on this machine",
    )
    parser.add_argument(
        "--gpus-per-run", type=gpu_share, default=0.0, help="GPU share of each Ray task (0.0625: 16 a GPU)"
    )
    parser.add_argument("--cpus-per-run", type=cpu_count, default=1, help="CPUs (and torch threads) of each Ray task")


def gpu_share(text: str) -> float:
    """The ``--gpus-per-run`` argument: a finite number >= 0 (argparse's usage error otherwise, before any work)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a GPU share: give a finite number >= 0 (0: no GPU; 0.0625: sixteen runs share a GPU)"
        )
    return value


def cpu_count(text: str) -> int:
    """The ``--cpus-per-run`` argument: an integer >= 1 (argparse's usage error otherwise, before any work)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a CPU count: give an integer >= 1")
    return value


def check_resources(gpus: float, cpus: int, gpus_name: str, cpus_name: str) -> None:
    """ValueError naming the argument unless ``gpus`` (a task's GPU share) is a finite number >= 0 and ``cpus`` an
    integer >= 1; checked before Ray is joined."""
    if isinstance(gpus, bool) or not isinstance(gpus, (int, float)) or not (math.isfinite(gpus) and gpus >= 0):
        raise ValueError(f"{gpus_name} must be a finite number >= 0 (a task's share of a GPU), got {gpus!r}")
    if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1:
        raise ValueError(f"{cpus_name} must be an integer >= 1, got {cpus!r}")


def check_engine_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse Ray options without ``--engine ray`` (they would be ignored without a word)."""
    given = [
        flag
        for flag, value in (
            ("--address", args.address),
            ("--gpus-per-run", args.gpus_per_run),
            ("--cpus-per-run", args.cpus_per_run != 1),
        )
        if value
    ]
    if args.engine != "ray" and given:
        parser.error(f"{', '.join(given)} only apply with --engine ray")


def connect(address: str | None = None, num_cpus: int | None = None) -> Any:
    """Join the Ray cluster at ``address`` (``auto``: the one ``ray start`` runs on this machine; ``HOST:PORT``),
    or start a local Ray on this machine when ``address`` is None (with ``num_cpus`` CPUs, default all).
    Returns the ``ray`` module; a second call reuses the connection."""
    ray = require_ray()
    if not ray.is_initialized():
        options: dict[str, Any] = {"include_dashboard": False} if address is None else {}
        if address is None and num_cpus is not None:
            options["num_cpus"] = num_cpus
        ray.init(address=address, log_to_driver=True, configure_logging=False, **options)
    return ray


# ----------------------------------------------------------------------------------------------------------------
# files written atomically under content keys


def keep_file(root: Path, relative: str, payload: bytes) -> str:
    """Put a file a task returned under ``root``: ``"kept"`` when written, ``"present"`` when the same bytes are
    already there (the node shares this folder, or a retried task sent it twice). A different file under the same
    content key is replaced (the newer training of the same definition, e.g. ``CALIBMED_RETRAIN=1``)."""
    target = Path(root) / relative
    if Path(relative).is_absolute() or ".." in Path(relative).parts:
        raise ValueError(f"a task returned the file name {relative!r}; it must be relative to the store folder")
    if target.is_file() and target.read_bytes() == payload:
        return "present"
    atomic.write_bytes_atomically(target, payload)  # a unique temporary name, the umask's permissions
    return "kept"


# ----------------------------------------------------------------------------------------------------------------
# declared runs


@dataclass(frozen=True)
class RunName:
    """What names a declared run: the notebook that declares it, the profile, the knobs given on the command line
    and the run's content key (:func:`helpers.training.run_key`). A node rebuilds the run from these."""

    notebook: str
    profile: str
    knobs: tuple[tuple[str, Any], ...]
    key: str
    title: str

    @property
    def knob_dict(self) -> dict[str, Any]:
        return dict(self.knobs)


@contextlib.contextmanager
def store_roots(stored_dir: str | os.PathLike | None, cache_dir: str | os.PathLike | None) -> Iterator[None]:
    """While active, runs are stored under ``stored_dir`` and cached under ``cache_dir`` (None: the defaults,
    ``stored_runs/`` and ``runs/cache/`` of this checkout)."""
    from helpers.training import run_store

    saved = run_store.STORED_RUNS_DIR, run_store.CACHE_DIR
    run_store.STORED_RUNS_DIR = Path(stored_dir) if stored_dir else saved[0]
    run_store.CACHE_DIR = Path(cache_dir) if cache_dir else saved[1]
    try:
        yield
    finally:
        run_store.STORED_RUNS_DIR, run_store.CACHE_DIR = saved


def missing_runs(notebooks: Sequence[str], profile: str, knobs: Mapping[str, Any]) -> list[tuple[RunName, Any]]:
    """Every declared run that is neither stored nor cached, once, with the first notebook that declares it:
    ``(RunName, helpers.training.PlannedRun)`` pairs (as :func:`helpers.course.declared_runs`, per
    notebook)."""
    from helpers.course import suites
    from helpers.training import run_store

    frozen = tuple(sorted(knobs.items()))
    found: dict[str, tuple[RunName, Any]] = {}
    for notebook in notebooks:
        with run_store.planning() as plan, contextlib.redirect_stdout(io.StringIO()):
            suites.DECLARED_RUNS[notebook](suites.reference_config(notebook, profile, **knobs))
        for planned in plan:
            found.setdefault(planned.key, (RunName(notebook, profile, frozen, planned.key, planned.name), planned))
    return list(found.values())


def _run_file(stored: bool, key: str, dataset: str) -> tuple[Path, str]:
    """The store folder and the file name (relative to it) of a trained run."""
    from helpers.training import run_store

    if stored:
        return run_store.STORED_RUNS_DIR, f"{dataset}/{key}.npz"
    return run_store.default_cache_dir(), f"{key}-{run_store.training_version()}.pt"


def train_named_run(
    run: RunName, stored_dir: str | None = None, cache_dir: str | None = None, threads: int = 1
) -> dict[str, Any]:
    """Rebuild the run ``run`` names from this node's data and code, train it unless it is already stored here,
    and return its file's bytes and provenance (the body of a Ray task; it also runs without Ray)."""
    import torch

    from helpers.training import run_store

    torch.set_num_threads(threads)
    with store_roots(stored_dir, cache_dir):
        planned = {name.key: plan for name, plan in missing_runs([run.notebook], run.profile, run.knob_dict)}
        if run.key in planned:
            plan = planned[run.key]
            trained = run_store.train_run(
                plan.name, plan.loss, plan.bundle, plan.model_name, plan.config, stored=plan.stored
            )
            status, seconds, stored, dataset = "trained", trained.seconds, plan.stored, plan.bundle.name
        else:
            status, seconds = "already stored", 0.0
            stored, dataset = _find_stored(run)
        root, relative = _run_file(stored, run.key, dataset)
        if not (root / relative).is_file():
            raise FileNotFoundError(
                f"{run.title} was trained on {socket.gethostname()} but not written to "
                f"{root / relative}: the Ray engine returns runs through the store and the run "
                "cache, so unset CALIBMED_NO_CACHE on the nodes"
            )
        return {
            "key": run.key,
            "title": run.title,
            "status": status,
            "seconds": seconds,
            "stored": stored,
            "file": relative,
            "payload": (root / relative).read_bytes(),
            "host": socket.gethostname(),
            "node": _node_id(),
            "pid": os.getpid(),
            "training_version": run_store.training_version(),
        }


def _find_stored(run: RunName) -> tuple[bool, str]:
    """Where a run this node does not need to train lies: (stored?, data set); a clear error when it lies nowhere,
    i.e. this node does not declare the run at all."""
    from helpers.training import run_store

    stored = sorted(Path(run_store.STORED_RUNS_DIR).glob(f"*/{run.key}.npz"))
    if stored:
        return True, stored[0].parent.name
    cached = Path(run_store.default_cache_dir()) / f"{run.key}-{run_store.training_version()}.pt"
    if cached.is_file():
        return False, ""
    raise LookupError(
        f"node {socket.gethostname()} does not declare run {run.key} ({run.title}) of {run.notebook}, "
        f"profile {run.profile!r}: its data (CALIBMED_DATA_DIR={os.environ.get('CALIBMED_DATA_DIR')}) "
        f"or its training code (version {run_store.training_version()}) differ from the driver's. Install the same "
        "checkout and the same data on every node"
    )


def _node_id() -> str:
    try:
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""
    except Exception:  # outside a Ray task there is no node
        return ""


#: what a task's outcome (:func:`train_named_run`) holds, with the types the driver accepts
OUTCOME_FIELDS: dict[str, type | tuple[type, ...]] = {
    "key": str,
    "title": str,
    "status": str,
    "seconds": (int, float),
    "stored": bool,
    "file": str,
    "payload": bytes,
    "host": str,
    "training_version": str,
}
_DATASET_FOLDER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def check_outcome(outcome: Any, training_version: str, key: str) -> None:
    """Treat what a node returned for the run ``key`` as untrusted: its fields and their types, the training
    version, the run it names, the file name (the run's own name in the store or the cache) and the file's bytes
    (:func:`helpers.training.check_run_file_bytes`: content hash, structure, nothing that runs when loaded).
    TypeError / ValueError / :class:`helpers.training.DamagedRunError` naming what is wrong; RuntimeError when the
    node's training code differs."""
    if not isinstance(outcome, Mapping):
        raise TypeError(f"the task for run {key} returned a {type(outcome).__name__}, not an outcome mapping")
    missing = [name for name in OUTCOME_FIELDS if name not in outcome]
    wrong = [
        f"{name} is {type(outcome[name]).__name__}"
        for name, kind in OUTCOME_FIELDS.items()
        if name in outcome
        and (not isinstance(outcome[name], kind) or (kind is not bool and isinstance(outcome[name], bool)))
    ]
    if missing or wrong:
        raise ValueError(
            f"the task for run {key} returned an outcome that lacks {missing} or has entries of the wrong type "
            f"{wrong}: is every node running this checkout?"
        )
    if outcome["training_version"] != training_version:
        raise RuntimeError(
            f"{outcome['title']} was trained on {outcome['host']} with training version "
            f"{outcome['training_version']}; this checkout's is {training_version}. Install the same checkout "
            "on every node (docs/sweeps.md)"
        )
    if outcome["key"] != key:
        raise ValueError(f"the task for run {key} returned run {outcome['key']} from {outcome['host']}")
    dataset, _, name = outcome["file"].rpartition("/")
    if outcome["stored"]:
        expected, allowed = f"<data set>/{key}.npz", name == f"{key}.npz" and _DATASET_FOLDER.fullmatch(dataset)
    else:
        expected = f"{key}-{training_version}.pt"
        allowed = outcome["file"] == expected
    if not allowed:
        raise ValueError(
            f"the task for run {key} returned the file name {outcome['file']!r} from {outcome['host']}; "
            f"this run's file is {expected}"
        )
    from helpers.training import check_run_file_bytes

    check_run_file_bytes(outcome["file"], outcome["payload"], key)


def keep_run(outcome: Mapping[str, Any], training_version: str, key: str) -> str:
    """Write a task's trained run ``key`` into this checkout's store (:func:`keep_file`), after checking what the
    node returned (:func:`check_outcome`): the node is not trusted."""
    from helpers.training import run_store

    check_outcome(outcome, training_version, key)
    root = run_store.STORED_RUNS_DIR if outcome["stored"] else run_store.default_cache_dir()
    return keep_file(root, outcome["file"], outcome["payload"])


def train_declared(
    notebooks: Sequence[str],
    profile: str,
    knobs: Mapping[str, Any],
    address: str | None = None,
    gpus_per_run: float = 0.0,
    cpus_per_run: int = 1,
    max_retries: int = 3,
    stored_dir: str | None = None,
    cache_dir: str | None = None,
    num_cpus: int | None = None,
    on_outcome: Callable[[dict[str, Any], int], None] | None = None,
) -> list[dict[str, Any]]:
    """Train every run the notebooks declare that is not stored yet as Ray tasks, round after round (LS+ waits
    for its cross-entropy run); return one outcome per task (without the file bytes), in completion order.

    ``stored_dir`` / ``cache_dir`` (None: each node's own ``stored_runs/`` and ``runs/cache/``) are passed to every
    task as they are: give them only when every node sees those paths. ``on_outcome(outcome, pending)`` is called
    after each run is kept, with the number of tasks still running (the cluster test kills a node there).
    """
    from helpers.training import run_store

    if os.environ.get("CALIBMED_RETRAIN", "") not in ("", "0"):
        raise SystemExit(
            "--engine ray trains the runs that are missing; it does not retrain stored runs "
            "(CALIBMED_RETRAIN=1): retrain with `make reference-runs RETRAIN=1`, or delete the stored runs "
            "to retrain (stored_runs/<dataset>/<key>.npz, runs/cache/) and run --engine ray without it"
        )
    check_resources(gpus_per_run, cpus_per_run, "gpus_per_run (--gpus-per-run)", "cpus_per_run (--cpus-per-run)")
    ray = connect(address, num_cpus)
    task = ray.remote(train_named_run).options(
        num_cpus=cpus_per_run, num_gpus=gpus_per_run, max_retries=max_retries, retry_exceptions=False
    )
    outcomes: list[dict[str, Any]] = []
    previous: set[str] = set()
    with store_roots(stored_dir, cache_dir):
        code = run_store.training_version()
        while True:
            missing = missing_runs(notebooks, profile, knobs)
            keys = {name.key for name, _ in missing}
            if not missing:
                return outcomes
            if keys & previous:
                raise RuntimeError(f"runs still missing after a round that returned them: {sorted(keys & previous)}")
            previous = keys
            print(
                f"{len(missing)} runs to train as Ray tasks ({_resources(ray)}; {gpus_per_run:g} GPU and "
                f"{cpus_per_run} CPU per run)",
                flush=True,
            )
            pending = {task.remote(name, stored_dir, cache_dir, cpus_per_run): name for name, _ in missing}
            while pending:
                [done], _ = ray.wait(list(pending), num_returns=1)
                name = pending.pop(done)
                outcome = ray.get(done)
                kept = keep_run(outcome, code, name.key)
                outcome = {k: v for k, v in outcome.items() if k != "payload"} | {"kept": kept}
                outcomes.append(outcome)
                print(
                    f"[{len(outcomes)}] {outcome['title']}: {outcome['status']} on {outcome['host']} "
                    f"({outcome['seconds']:.0f} s)",
                    flush=True,
                )
                if on_outcome is not None:
                    on_outcome(outcome, len(pending))


def _resources(ray: Any) -> str:
    total = ray.cluster_resources()
    nodes = sum(1 for node in ray.nodes() if node["Alive"])
    return f"{nodes} node(s), {total.get('CPU', 0):g} CPU, {total.get('GPU', 0):g} GPU"


# ----------------------------------------------------------------------------------------------------------------
# notebook grids


def execute_notebook_task(notebook: str, profile: str | None, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Execute one course notebook with papermill on this node into a temporary folder; return its summary row
    and the bytes of the executed notebook and of its results JSON (the body of a Ray task)."""
    from helpers.course import runner as course

    [path] = course.list_notebooks([notebook])
    work = Path(tempfile.mkdtemp(prefix="calibmed-grid-"))
    try:
        (work / "notebooks").mkdir()
        (work / "results").mkdir()
        with course.kernel_environment(), contextlib.redirect_stdout(io.StringIO()):
            row = course.execute_notebook(path, work, profile, parameters, prepare_only=False)
        files = {}
        for relative in (f"notebooks/{path.name}", f"results/{path.stem}.json"):
            if (work / relative).is_file():
                files[relative] = (work / relative).read_bytes()
        return {"row": row, "files": files, "host": socket.gethostname()}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_grid(
    out: Path,
    grid: Mapping[str, Sequence[Any]],
    profile: str | None = None,
    selection: Sequence[str] | None = None,
    extra: Mapping[str, Any] | None = None,
    address: str | None = None,
    cpus_per_notebook: int = 1,
    gpus_per_notebook: float = 0.0,
    max_retries: int = 3,
    num_cpus: int | None = None,
) -> list[dict[str, Any]]:
    """Execute every selected notebook at every grid point as Ray tasks into ``out/<point>/`` (executed copies,
    results JSON, summary as ``python -m helpers.course run`` writes them), write ``out/summary.md`` and
    ``out/summary.json`` over all points, and check every point (``course check``). Returns one row per point.
    The parameters' names and values, the grid points' folders and Ray are checked before any folder is touched."""
    from helpers.course import runner as course

    check_resources(gpus_per_notebook, cpus_per_notebook, "gpus_per_notebook", "cpus_per_notebook")
    both = sorted(set(extra or {}) & set(grid))
    if both:
        raise ValueError(
            f"{', '.join(both)} given both as a parameter (-p) and in the grid (--grid): the grid's values would "
            "replace the parameter's; give each in one place"
        )
    notebooks = course.list_notebooks(list(selection) if selection else None)
    points = grid_points(grid)
    course.check_parameter_names(notebooks, list({**(extra or {}), **grid}))
    check_grid_values(notebooks, grid, extra or {})
    folders = point_folders(Path(out), points)
    ray = connect(address, num_cpus)  # Ray missing or unreachable: the earlier outputs are still there
    for folder in folders:
        course.clear_previous_outputs(folder)
        (folder / "notebooks").mkdir(parents=True, exist_ok=True)
        (folder / "results").mkdir(parents=True, exist_ok=True)
    task = ray.remote(execute_notebook_task).options(
        num_cpus=cpus_per_notebook, num_gpus=gpus_per_notebook, max_retries=max_retries, retry_exceptions=False
    )
    started_at = time.time()
    print(f"{len(points)} grid points x {len(notebooks)} notebooks as Ray tasks ({_resources(ray)})", flush=True)
    pending = {
        task.remote(notebook.stem, profile, {**(extra or {}), **point}): (index, notebook)
        for index, point in enumerate(points)
        for notebook in notebooks
    }
    rows: dict[int, dict[str, dict[str, Any]]] = {index: {} for index in range(len(points))}
    while pending:
        [done], _ = ray.wait(list(pending), num_returns=1)
        index, notebook = pending.pop(done)
        result = ray.get(done)
        for relative, payload in result["files"].items():
            atomic.write_bytes_atomically(folders[index] / relative, payload)
        row = dict(
            result["row"], results=str(folders[index] / "results" / f"{notebook.stem}.json"), host=result["host"]
        )
        rows[index][notebook.stem] = row
        print(
            f"{folders[index].name:30s} {notebook.stem:45s} {row['status']:7s} {row['seconds']:7.1f} s "
            f"on {row['host']}" + (f"  {row['error']}" if row["error"] else ""),
            flush=True,
        )
    summary = []
    for index, point in enumerate(points):
        ordered = [rows[index][notebook.stem] for notebook in notebooks]
        with contextlib.redirect_stdout(io.StringIO()):
            course.write_summary(folders[index], ordered, profile, started_at)
        summary.append({"point": point, "folder": folders[index].name, "notebooks": ordered})
    _write_sweep_summary(out, summary, profile, started_at)
    problems = []
    for folder in folders:
        try:
            course.check_results(folder)
        except SystemExit as failure:
            problems.append(f"{folder.name}: {failure}")
    if problems:
        raise SystemExit("sweep check failed:\n  " + "\n  ".join(problems))
    print(f"sweep check: all {len(points)} grid points x {len(notebooks)} notebooks wrote their results JSON")
    return summary


def _write_sweep_summary(out: Path, summary: list[dict[str, Any]], profile: str | None, started_at: float) -> None:
    atomic.write_text_atomically(
        out / "summary.json",
        json.dumps(
            {"profile": profile or "notebook defaults", "started_at": started_at, "engine": "ray", "points": summary},
            indent=2,
        ),
    )
    lines = [
        f"# CalibMed sweep — profile: {profile or 'notebook defaults'}, {len(summary)} grid points",
        "",
        "| grid point | notebook | status | seconds | host |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {entry['folder']} | {row['notebook']} | {row['status']} | {row['seconds']} | {row['host']} |"
        for entry in summary
        for row in entry["notebooks"]
    ]
    atomic.write_text_atomically(out / "summary.md", "\n".join(lines) + "\n")
    print(f"sweep summary: {out / 'summary.md'}")

"""What a notebook prints about the runs it loads: nothing per suite, one provenance line on request, the rest folded.

:func:`helpers.training.train_run` reports every run it loads or trains here through :func:`report`. Nothing is
printed per run or per suite (issue 28, item 3: the main flow shows one quiet line of provenance): every run joins the
process's ledger (:func:`session_records`), from which a notebook prints

* one line in its main flow, :func:`provenance_line`, in words:
  ``72 stored runs · DermaMNIST 28 px · seeds 0–4 · trained deterministically on a CPU``
  (with "· 45 of 72 from older training code" when stored runs are not today's);
* the details in its folded expert cell (``helpers.course.details``): :func:`summary_line` with the devices as
  recorded and the training version, and the stale-run warning (:func:`stale_warning`) with the retrain command.

``CALIBMED_VERBOSE=1`` prints one line per run and each suite's :func:`summary_line`, as before issue 28.
"""

from __future__ import annotations

import contextlib
import functools
import os
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

LINE_WIDTH = 110  # notebook outputs keep printed lines under 120 characters (helpers.course.MAX_LINE)
RETRAIN_COMMAND = "make reference-runs RETRAIN=1"
SOURCES = {"stored": "stored runs loaded", "cache": "runs loaded from the run cache", "trained": "runs trained here"}
#: the sources in the provenance line's words (:func:`provenance_line`)
SOURCE_WORDS = {"stored": "stored runs", "cache": "runs from the run cache", "trained": "runs trained here"}


@dataclass(frozen=True)
class RunRecord:
    """One run as the summary counts it. ``deterministic`` and ``device`` are ``None``/``""`` where a stored run
    did not record them (runs stored before determinism was recorded)."""

    name: str
    source: str
    dataset: str
    seed: int
    device: str
    deterministic: bool | None
    current: bool


_collected: list[RunRecord] | None = None
_session: list[RunRecord] = []
_warned_stale = False


def verbose() -> bool:
    """Whether ``CALIBMED_VERBOSE`` asks for one line per run."""
    return os.environ.get("CALIBMED_VERBOSE", "") not in ("", "0")


def report(record: RunRecord, line: str | None) -> None:
    """Record a run for the suite's summary and the process's ledger; print its ``line`` (if any) when verbose."""
    if _collected is not None:
        _collected.append(record)
    else:
        _session.append(record)
    if line is not None and verbose():
        print(line)


def session_records() -> list[RunRecord]:
    """Every run loaded or trained in this process since :func:`reset_session` (suites that failed excluded)."""
    return list(_session)


def reset_session() -> None:
    """Forget the runs of the ledger (``helpers.course.configure`` starts each notebook run with an empty one)."""
    global _warned_stale
    _session.clear()
    _warned_stale = False


def warn_stale(stale: int, total: int) -> None:
    """Print, once per process, that ``stale`` of ``total`` runs come from older training code."""
    global _warned_stale
    if _warned_stale:
        return
    _warned_stale = True
    print(textwrap.fill(stale_warning(stale, total), width=LINE_WIDTH, break_long_words=False, break_on_hyphens=False))


def stale_warning(stale: int, total: int) -> str:
    """The warning line a reader of a notebook sees when stored runs come from older training code: what it means
    for the numbers shown, where that is explained, and the command that retrains them."""
    return (
        f"warning: {stale} of {total} stored runs come from older training code. The numbers below are those "
        "runs'; a retrain with today's code may move them (see 'Stored runs' in docs/reading_the_numbers.md). "
        f"Retrain: {RETRAIN_COMMAND}"
    )


@contextlib.contextmanager
def collecting(training_version: Callable[[], str]) -> Iterator[list[RunRecord]]:
    """Collect the runs reported inside; the outermost block prints the summary (and the warning) on success."""
    global _collected
    outer = _collected is None
    if outer:
        _collected = []
    try:
        yield _collected
        if outer and _collected:
            _session.extend(_collected)
            if verbose():
                print_summary(_collected, training_version())
    finally:
        if outer:
            _collected = None


def summarised(training_version: Callable[[], str]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a suite function so that the runs it loads are summarised in one line (:func:`collecting`)."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with collecting(training_version):
                return function(*args, **kwargs)

        return wrapper

    return decorate


def print_summary(records: list[RunRecord], training_version: str) -> None:
    print(
        textwrap.fill(
            summary_line(records, training_version), width=LINE_WIDTH, break_long_words=False, break_on_hyphens=False
        )
    )
    stale = sum(not record.current for record in records)
    if stale:
        warn_stale(stale, len(records))


def summary_line(records: list[RunRecord], training_version: str) -> str:
    """The one line that stands for ``records`` (module docstring)."""
    counts = [
        f"{count} {SOURCES[source]}"
        for source in SOURCES
        if (count := sum(record.source == source for record in records))
    ]
    datasets = ", ".join(sorted({record.dataset for record in records}))
    stale = sum(not record.current for record in records)
    version = (
        f"training version {training_version}"
        if not stale
        else f"{stale} of {len(records)} from older training code (today's: {training_version})"
    )
    return f"{', '.join(counts)} — {datasets}, {_seeds(records)}, {_how_trained(records)}, {version}"


def _seeds(records: list[RunRecord]) -> str:
    seeds = sorted({record.seed for record in records})
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}–{seeds[-1]}"
    return "seeds " + ", ".join(map(str, seeds))


def _how_trained(records: list[RunRecord]) -> str:
    devices = ", ".join(sorted({record.device or "an unrecorded device" for record in records}))
    deterministic = sum(record.deterministic is True for record in records)
    if deterministic == len(records):
        return f"trained deterministically on {devices}"
    if deterministic == 0:
        return f"trained on {devices}, not deterministically"
    return f"trained on {devices}, {deterministic} of {len(records)} deterministically"


def device_kind(device: str) -> str:
    """A recorded device in words: "a CPU", "a GPU" (CUDA, any NVIDIA name), "an Apple GPU" (MPS), or "an unrecorded
    device" for runs stored before the device was recorded."""
    lowered = device.lower()
    if not lowered:
        return "an unrecorded device"
    if "mps" in lowered or "apple" in lowered:
        return "an Apple GPU"
    if "cpu" in lowered:
        return "a CPU"
    if "cuda" in lowered or "nvidia" in lowered or "gpu" in lowered:
        return "a GPU"
    return f"a {device}"


def provenance_line(records: list[RunRecord], data: str, stale_note: bool = True) -> str:
    """The one line of provenance a notebook prints in its main flow (module docstring): how many runs and where
    from, ``data`` (the data set in words, e.g. "DermaMNIST 28 px"), the seeds, the kind of device and whether
    deterministically (all or none; a mix is counted in :func:`summary_line`); no hash, no path, no list. ``data``
    alone when ``records`` is empty (a notebook that loads no run)."""
    if not records:
        return f"{data} · no trained model loaded"
    counts = [
        f"{count} {SOURCE_WORDS[source] if count > 1 else SOURCE_WORDS[source].replace('runs', 'run')}"
        for source in SOURCES
        if (count := sum(record.source == source for record in records))
    ]
    kinds = sorted({device_kind(record.device) for record in records})
    where = " and ".join(kinds)
    deterministic = sum(record.deterministic is True for record in records)
    if deterministic == len(records):
        how = f"trained deterministically on {where}"
    elif deterministic == 0:
        how = f"trained on {where}, not deterministically"
    else:  # how many deterministically is told by the folded details (summary_line), not the main flow
        how = f"trained on {where}"
    parts = [" + ".join(counts), data, _seeds(records), how]
    stale = sum(not record.current for record in records)
    if stale and stale_note:
        parts.append(f"{stale} of {len(records)} from older training code")
    return " · ".join(parts)

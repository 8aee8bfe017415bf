"""What a notebook prints about the runs it loads: one summary line per suite, the listing only on request.

:func:`helpers.training.train_run` reports every run it loads or trains here through :func:`report`. Inside a
suite (:func:`summarised`, which every run suite of :mod:`helpers.course.suites` uses) nothing is printed per run; when
the outermost suite returns, one summary line says how many runs were loaded or trained, on which data, seeds and
devices, whether deterministically, and under which training version, for example

    54 stored runs loaded — dermamnist, seeds 0–2, trained deterministically on NVIDIA H100 80GB HBM3,
    training version 1a2b3c4d5e6f7a8b

``CALIBMED_VERBOSE=1`` also prints one line per run. When stored runs come from older training code (their training
version, :mod:`helpers.training.version`, is not today's), one warning line says so, once per process, with the
command that retrains them; the summary counts them. A run loaded outside a suite prints its own line.
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
_warned_stale = False


def verbose() -> bool:
    """Whether ``CALIBMED_VERBOSE`` asks for one line per run."""
    return os.environ.get("CALIBMED_VERBOSE", "") not in ("", "0")


def report(record: RunRecord, line: str | None) -> None:
    """Record a run for the suite's summary; print its ``line`` (if any) when verbose or outside a suite."""
    if _collected is not None:
        _collected.append(record)
    if line is not None and (verbose() or _collected is None):
        print(line)
    if _collected is None and not record.current:
        warn_stale(1, 1)


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

"""One quiet line of provenance in a notebook's main flow, and everything else in one folded details cell (issue 28,
item 3).

A run notebook prints, in its main flow, at most one line saying what it read (:func:`provenance`)::

    72 stored runs · DermaMNIST 28 px · seeds 0–4 · trained on a CPU and a GPU

in words (display names, :func:`helpers.utils.display_name`): no hash, no path, no list, no settings. Everything
the machinery knows goes into one code cell tagged ``expert`` at the end of the notebook (:func:`details`), which the
website and JupyterLab fold: the knobs the run read (only those), the data files and their md5 checks, the devices
and training version of the runs, the warning about runs of older training code with the command that retrains them,
the results file and the compute time. :mod:`helpers.course.output_rules` enforces it on the main flow.
"""

from __future__ import annotations

import platform
import textwrap
from pathlib import Path
from typing import Any

from helpers.course import profiles
from helpers.training import run_log, run_store
from helpers.utils import display_name, display_path, shorten_paths

WIDTH = 110  # printed lines stay under helpers.course.output_rules.MAX_LINE


def data_words(cfg: Any, *bundles: Any) -> str:
    """The data a notebook read, in words: "DermaMNIST 28 px", or each bundle's display name and one image size
    ("synthetic chest X-rays (coupled labels), synthetic chest X-rays (independent labels) · 28 px")."""
    if not bundles:
        return f"{display_name('dataset', cfg.dataset)} {cfg.image_size} px"
    names = ", ".join(dict.fromkeys(display_name("dataset", bundle.name) for bundle in bundles))
    sizes = sorted({bundle.image_size for bundle in bundles})
    return f"{names} {' and '.join(map(str, sizes))} px"


def provenance_line(cfg: Any, *bundles: Any) -> str:
    """The one provenance line (module docstring) for the runs loaded since ``configure`` and the data read
    (``bundles``, else the configured data set); a profile other than the reference profile is named first, since
    its numbers are not the course's."""
    line = run_log.provenance_line(run_log.session_records(), data_words(cfg, *bundles))
    return line if cfg.profile == "reference" else f"{cfg.profile} profile · {line}"


def provenance(cfg: Any, *bundles: Any) -> None:
    """Print :func:`provenance_line` (wrapped under ``WIDTH`` characters): the notebook's one main-flow line about
    the machinery."""
    print(_wrap(provenance_line(cfg, *bundles)))


def details_text(cfg: Any, *bundles: Any, results_file: str | Path | None = None) -> str:
    """What :func:`details` prints."""
    used = profiles.used_knobs(cfg.notebook) - {"results_path"}  # the results file has its own line
    sections = [
        f"notebook {cfg.notebook}, profile {cfg.profile!r}",
        "settings this run read: " + (_settings(cfg, used) if used else "none"),
    ]
    sections += [
        " ".join(
            [f"data: {display_name('dataset', bundle.name)}, source {shorten_paths(bundle.source)}.", *bundle.checks]
        )
        for bundle in bundles
    ]
    records = run_log.session_records()
    if records:
        sections.append(run_log.summary_line(records, run_store.training_version()))
        stale = sum(not record.current for record in records)
        if stale:
            sections.append(run_log.stale_warning(stale, len(records)))
    if results_file is not None:
        sections.append(f"results written to {display_path(Path(results_file))}")
    seconds = profiles.seconds_since_configure(cfg.notebook)
    if seconds is not None:
        sections.append(f"compute time since configure: {seconds:.0f} s")
    sections.append(f"Python {platform.python_version()}; " + _versions())
    return "\n".join(_wrap(section) for section in sections)


def details(cfg: Any, *bundles: Any, results_file: str | Path | None = None) -> None:
    """Print the run's details for the notebook's one folded cell tagged ``expert`` (module docstring)."""
    print(details_text(cfg, *bundles, results_file=results_file))


def _settings(cfg: Any, used: set[str]) -> str:
    """The knobs of ``used`` as ``RunConfig.describe`` writes them, on one line (wrapped by :func:`_wrap`)."""
    return cfg.describe(width=10_000, only=used).split("; knobs: ", 1)[-1]


def _versions() -> str:
    import numpy
    import torch

    return f"PyTorch {torch.__version__}, NumPy {numpy.__version__}"


def _wrap(text: str) -> str:
    return "\n".join(
        "\n".join(
            textwrap.wrap(line, WIDTH, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False) or [""]
        )
        for line in text.splitlines()
    )

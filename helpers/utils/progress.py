"""Progress bars for people, one summary line for stored outputs.

A tqdm bar redraws itself with carriage returns; in a terminal or a live JupyterLab session that is what you want,
but a notebook executed by papermill, nbval or CI stores every redraw as a separate stderr output (notebook 01 once
held 144 of them). ``progress_bar`` therefore picks one of three modes:

``bar``    the usual tqdm bar;
``final``  nothing while it runs, then one line on ``close()``: ``epochs: 30/30 in 16 min 28 s (train_loss=…)``;
``off``    nothing at all.

The rule, first match wins (``progress_mode`` implements it):

1. the environment variable ``CALIBMED_PROGRESS`` (``bar``, ``final`` or ``off``), if set;
2. ``final`` when the environment variable ``CI`` is set (to anything but ``""``, ``0`` or ``false``);
3. inside a Jupyter kernel: ``bar`` when the kernel was started by a Jupyter server (JupyterLab / Notebook put
   ``JPY_SESSION_NAME`` into the kernel's environment), otherwise ``final`` — papermill, nbclient, nbval and
   ``jupyter nbconvert --execute`` start their kernels without it;
4. outside a kernel: ``bar`` when stderr is a terminal, otherwise ``final`` (a log file, a pipe).

``python -m helpers.course run`` and ``make notebooks-smoke`` set ``CALIBMED_PROGRESS=final`` explicitly; when you
execute a notebook by hand with papermill, rule 3 already gives ``final``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

PROGRESS_ENV = "CALIBMED_PROGRESS"
MODES = ("bar", "final", "off")


def _in_jupyter_kernel() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    get_ipython = getattr(shell, "get_ipython", None)
    return get_ipython is not None and hasattr(get_ipython(), "kernel")


def progress_mode() -> str:
    """``bar``, ``final`` or ``off`` for the current process, by the rule in the module docstring."""
    chosen = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if chosen:
        if chosen not in MODES:
            raise ValueError(f"{PROGRESS_ENV}={chosen!r} is not one of {MODES}; unset it to choose automatically")
        return chosen
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false"):
        return "final"
    if _in_jupyter_kernel():
        return "bar" if os.environ.get("JPY_SESSION_NAME") else "final"
    stderr = sys.stderr
    return "bar" if stderr is not None and hasattr(stderr, "isatty") and stderr.isatty() else "final"


def format_duration(seconds: float) -> str:
    """``42 s``, ``16 min 28 s``, ``2 h 03 min``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def final_line(desc: str, done: int, total: int | None, duration: str, postfix: str = "") -> str:
    """The one line that stands for a finished bar (also used to clean stored tqdm outputs)."""
    count = f"{done}/{total}" if total is not None else str(done)
    return f"{desc}: {count} in {duration}" + (f" ({postfix})" if postfix else "")


class FinalLine:
    """A silent stand-in for a tqdm bar that prints one summary line when closed (the ``final`` mode)."""

    def __init__(self, iterable: Iterable, desc: str, total: int | None, initial: int = 0, file: TextIO | None = None):
        self.iterable, self.desc, self.total, self.initial = iterable, desc, total, initial
        self.n = 0
        self.postfix = ""
        self.file = file
        self.started = time.perf_counter()
        self.closed = False

    def __iter__(self) -> Iterator:
        for item in self.iterable:
            yield item
            self.n += 1

    def set_postfix(self, **values: Any) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())

    def close(self) -> None:
        if self.closed or self.n == 0:
            self.closed = True
            return
        self.closed = True
        duration = format_duration(time.perf_counter() - self.started)
        print(
            final_line(self.desc, self.initial + self.n, self.total, duration, self.postfix),
            file=self.file or sys.stdout,
            flush=True,
        )


def progress_bar(
    iterable: Iterable, *, desc: str, total: int | None = None, initial: int = 0, disable: bool = False
) -> Any:
    """A tqdm bar, a ``FinalLine`` or a disabled tqdm, by ``progress_mode()``; all three iterate ``iterable``
    and accept ``set_postfix(**values)`` and ``close()``."""
    from tqdm import tqdm

    mode = "off" if disable else progress_mode()
    if mode == "final":
        return FinalLine(iterable, desc, total, initial)
    return tqdm(iterable, desc=desc, total=total, initial=initial, disable=mode == "off", leave=True)

"""Deterministic training: the same seed gives the same run, bit for bit, on the same machine and software.

Issue 19 measured on an H100 that, under the over-fitting recipe, a run's numbers depend on which kernels ran: two
runs of one seed with cuDNN's autotuner agreed, but deterministic cuDNN algorithms gave a third answer (test NLL
1.600 against 1.073). :func:`deterministic` therefore wraps every training run (:func:`helpers.training.fit`) and
the prediction of the logits a trained run stores (:func:`helpers.training.train_run`):

* ``torch.use_deterministic_algorithms(True)``: an operation without a deterministic implementation raises
  instead of silently varying (PyTorch, "Reproducibility");
* ``torch.backends.cudnn.benchmark = False`` and ``cudnn.deterministic = True``: no autotuning, so the kernels do
  not depend on timing;
* ``CUBLAS_WORKSPACE_CONFIG=:4096:8``: cuBLAS (CUDA >= 10.2) is deterministic only with a fixed workspace, and it
  reads the variable once, when CUDA initialises; it is set here, when this module is imported
  (``helpers.training.train`` imports it), unless the user set it already.

The previous settings are restored on exit, so code outside training keeps PyTorch's defaults. Every stored run
records :func:`software_record`: deterministic or not, the torch, CUDA and cuDNN versions and the device's name.
"""

from __future__ import annotations

import contextlib
import os
import platform
from collections.abc import Iterator
from typing import Any

CUBLAS_WORKSPACE = ":4096:8"
_DETERMINISTIC_WORKSPACES = (":4096:8", ":16:8")  # the two values cuBLAS documents as deterministic
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)  # before torch can initialise CUDA

import torch  # noqa: E402  (after the variable: CUDA must not start before it is set)


def check_cublas_workspace() -> None:
    """Raise when CUDA runs with a cuBLAS workspace setting that is not deterministic. Only an initialised CUDA is
    asked (``is_available`` would start the driver before ``helpers.course.suites`` forks its workers); before that,
    PyTorch itself refuses a cuBLAS call in deterministic mode without the setting."""
    value = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if torch.cuda.is_initialized() and value not in _DETERMINISTIC_WORKSPACES:
        raise RuntimeError(
            f"CUBLAS_WORKSPACE_CONFIG is {value!r}: deterministic training on CUDA needs "
            f"{CUBLAS_WORKSPACE!r} (or ':16:8'), set before CUDA initialises. Unset it or export "
            f"CUBLAS_WORKSPACE_CONFIG={CUBLAS_WORKSPACE} and restart the kernel."
        )


@contextlib.contextmanager
def deterministic() -> Iterator[None]:
    """Run the enclosed code with deterministic algorithms and without cuDNN autotuning; restore the settings after."""
    check_cublas_workspace()
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.benchmark,
        torch.backends.cudnn.deterministic,
    )
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = before[2], before[3]


def device_name(device: torch.device | str) -> str:
    """The accelerator's marketing name (``NVIDIA H100 80GB HBM3``), or the CPU's architecture for the CPU."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple MPS"
    return f"CPU ({platform.machine() or 'unknown architecture'})"


def software_record(device: torch.device | str) -> dict[str, Any]:
    """What a stored run records about how it was trained: determinism, software versions and the device's name."""
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "deterministic": torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.benchmark,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "device_name": device_name(device),
    }

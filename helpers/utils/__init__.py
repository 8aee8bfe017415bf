"""Utilities every layer may use: atomic file writes, the repository root and paths as the notebooks print them,
progress bars.

The floor of the library: it imports nothing from ``helpers``."""

from helpers.utils.atomic import (  # noqa: F401
    move_folder_into_place,
    write_atomically_with,
    write_bytes_atomically,
    write_text_atomically,
)
from helpers.utils.names import DISPLAY_NAMES, display_name, short_class_names  # noqa: F401
from helpers.utils.paths import (  # noqa: F401
    DATA_DIR_ENV,
    REPO_ROOT,
    display_path,
    shorten_paths,
)
from helpers.utils.progress import (  # noqa: F401
    MODES,
    PROGRESS_ENV,
    FinalLine,
    final_line,
    format_duration,
    progress_bar,
    progress_mode,
)

__all__ = [
    "DISPLAY_NAMES",
    "display_name",
    "short_class_names",
    "move_folder_into_place",
    "write_atomically_with",
    "write_bytes_atomically",
    "write_text_atomically",
    "REPO_ROOT",
    "DATA_DIR_ENV",
    "display_path",
    "shorten_paths",
    "PROGRESS_ENV",
    "MODES",
    "progress_mode",
    "format_duration",
    "final_line",
    "FinalLine",
    "progress_bar",
]

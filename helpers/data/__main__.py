"""``python -m helpers.data fetch NAME``: download a data set into the data directory (``make data`` fetches
DermaMNIST).

``NAME`` is a MedMNIST 2D set (``dermamnist``, ``chestmnist``, ``pathmnist``, ...; ``--size 28|64|128|224``):
its official file from ``medmnist.INFO``'s URL, md5-checked (:mod:`helpers.data.fetch`); ``isic2018``: the ISIC
2018 Task 3 archives, their sizes said first (``--yes`` skips the question), unpacked into ``<data dir>/ISIC2018``;
``chestxray14``: what to download from the NIH and where to put it (:mod:`helpers.data.fetch_archives`).

The data directory is ``--data-dir``, else ``$CALIBMED_DATA_DIR``, else ``data/`` in the repository. A failure
ends with one message (exit status 1) saying what went wrong and how to fix it; nothing partial is left behind.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from helpers.data.fetch import FetchError, fetch_medmnist
from helpers.data.fetch_archives import chestxray14_instructions, fetch_isic2018
from helpers.data.medmnist_files import MEDMNIST_2D, MEDMNIST_SIZES

#: the data sets ``fetch`` knows
FETCH_NAMES = MEDMNIST_2D + ("isic2018", "chestxray14")


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m helpers.data``."""
    parser = argparse.ArgumentParser(
        prog="python -m helpers.data", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    fetch = sub.add_parser("fetch", help="download a data set into the data directory")
    fetch.add_argument("name", choices=FETCH_NAMES, metavar="NAME", help=f"one of: {', '.join(FETCH_NAMES)}")
    fetch.add_argument("--size", type=int, choices=MEDMNIST_SIZES, default=28, help="MedMNIST image size (px)")
    fetch.add_argument("--data-dir", type=Path, default=None, help="default: $CALIBMED_DATA_DIR, else data/")
    fetch.add_argument("--yes", action="store_true", help="isic2018: download without asking")
    fetch.add_argument("--force", action="store_true", help="MedMNIST: download again even if the file is there")
    return parser


def main(argv: list[str] | None = None) -> None:
    """Parse ``argv`` (default: the program's arguments) and fetch; a failure is SystemExit with one message."""
    args = build_parser().parse_args(argv)
    try:
        if args.name == "isic2018":
            fetch_isic2018(args.data_dir, yes=args.yes)
        elif args.name == "chestxray14":
            print(chestxray14_instructions(args.data_dir))
        else:
            fetch_medmnist(args.name, args.size, args.data_dir, force=args.force)
    except (FetchError, OSError, ValueError) as error:
        raise SystemExit(f"error: {error}") from None


if __name__ == "__main__":
    main()

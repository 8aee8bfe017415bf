"""The course runner's command line: ``python -m helpers.course --help`` (:mod:`helpers.course.__main__`).

Commands::

    run      execute every notebook with papermill into a run folder (executed copies, results JSON, summary)
    prepare  inject parameters without executing (the CI executes the prepared copies with nbval)
    compare  whether a run's notebooks show the same tables as the committed ones
    publish  copy a checked reference run into notebooks/ and results/reference/ (the committed course)
    check    verify that every notebook of the folder's last run (its summary.json) succeeded and wrote a fresh
             results JSON (a notebook skipped for want of data is named and accepted)
    check-data  before a run: download the missing MedMNIST files the notebooks need, else stop with one message;
             name the notebooks a run would skip because their real-image data are absent (helpers.course.data_check)
    check-outputs  report the output rules (helpers.course.output_rules) per notebook
    clean-outputs  strip progress bars, widget state and the absolute checkout path from stored outputs, in place

``run --engine ray --grid NAME=A,B`` executes every (grid point, notebook) as a Ray task
(:mod:`helpers.course.ray_engine`; Ray is the optional extra ``scale``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from helpers.course import data_check, output_cleanup, output_rules, ray_engine, runner
from helpers.course.profiles import PROFILE_NAMES, REPO_ROOT

#: the commands that read or publish a run folder
FOLDER_COMMANDS = ("check", "publish", "compare")
#: the commands that clean or check stored notebook outputs
OUTPUT_COMMANDS = ("clean-outputs", "check-outputs")


def main(argv: list[str] | None = None) -> None:
    """Parse ``argv`` (default: the program's arguments) and run the command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in FOLDER_COMMANDS:
        _folder_command(args)
    elif args.command in OUTPUT_COMMANDS:
        _outputs_command(args)
    elif args.command == "check-data":
        _check_data_command(args)
    else:
        _run_command(parser, args)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command (:data:`FOLDER_COMMANDS`, :data:`OUTPUT_COMMANDS`, ``run`` and ``prepare``)."""
    parser = argparse.ArgumentParser(
        prog="python -m helpers.course", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run_commands(sub)
    _add_check_data_command(sub)
    _add_folder_commands(sub)
    _add_output_commands(sub)
    return parser


def _add_run_commands(sub: Any) -> None:
    """``run`` and ``prepare``: profile, run folder, notebooks and extra parameters; ``run`` also takes a grid."""
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


def _add_check_data_command(sub: Any) -> None:
    """``check-data``: the run's profile, notebooks and parameters, as ``run`` takes them."""
    p = sub.add_parser(
        "check-data",
        help="download the MedMNIST files the notebooks need (else stop with one message) and name the notebooks "
        "a run would skip for want of real-image data",
    )
    p.add_argument(
        "--profile", choices=PROFILE_NAMES, default=None, help="the run's profile (default: each notebook's)"
    )
    p.add_argument("--notebooks", nargs="*", default=None, help="prefixes such as 00 01 (default: all)")
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    p.add_argument("--no-fetch", action="store_true", help="do not download; a missing file stops the check")


def _check_data_command(args: argparse.Namespace) -> None:
    extra = {name: runner.parse_value(value) for name, value in args.parameter}
    try:
        notebooks = runner.list_notebooks(args.notebooks)
        runner.check_parameter_names(notebooks, list(extra))
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    needs = {notebook.stem: runner.data_needs(notebook, args.profile, extra) for notebook in notebooks}
    data_check.check_data(needs, fetch=not args.no_fetch)


def _add_grid_arguments(run_parser: argparse.ArgumentParser) -> None:
    """``run --engine ray --grid NAME=A,B ...`` (helpers/course/ray_engine.py; Ray is the optional extra
    ``scale``)."""
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
    run_parser.add_argument(
        "--gpus-per-run", type=ray_engine.gpu_share, default=0.0, help="GPU share of each notebook's task"
    )


def _add_folder_commands(sub: Any) -> None:
    """``check``, ``publish`` and ``compare``: each reads one run folder."""
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


def _add_output_commands(sub: Any) -> None:
    """``clean-outputs`` and ``check-outputs``: notebook files (default: every committed notebook)."""
    for name in OUTPUT_COMMANDS:
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


def _folder_command(args: argparse.Namespace) -> None:
    if args.command == "check":
        runner.check_results(args.out)
    elif args.command == "publish":
        runner.publish(args.out)
    elif not runner.compare_tables(args.out):
        raise SystemExit("some tables differ from the committed notebooks")


def _outputs_command(args: argparse.Namespace) -> None:
    paths = args.notebooks or sorted(runner.NOTEBOOK_DIR.glob("*.ipynb"))
    if args.command == "clean-outputs":
        print(
            "| notebook | output bytes before | after | outputs removed | widget state removed "
            "| run paths and times removed | rules failing |"
        )
        print("|---|---:|---:|---:|---|---:|---|")
        for row in output_cleanup.clean_files(paths, args.repo_root):
            print(
                f"| {row['notebook']} | {row['bytes_before']:,} | {row['bytes_after']:,} | {row['outputs_removed']} "
                f"| {'yes' if row['widget_state_removed'] else 'no'} | {row['run_metadata_removed']} "
                f"| {', '.join(row['rules_failing']) or 'none'} |"
            )
    else:
        print(output_rules.report_table(paths))


def _run_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``run`` or ``prepare``: locally, or through Ray for ``run --engine ray`` (with or without a grid)."""
    out = args.out or REPO_ROOT / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{args.profile or 'default'}"
    extra = {name: runner.parse_value(value) for name, value in args.parameter}
    print(f"python {sys.version.split()[0]}, data dir: {os.environ.get('CALIBMED_DATA_DIR', '(default data/)')}")
    if args.command == "run" and (args.engine == "ray" or args.grid):
        _run_grid_command(parser, args, out, extra)
        return
    if args.command == "run":
        ray_only = [
            flag for flag, value in (("--address", args.address), ("--gpus-per-run", args.gpus_per_run)) if value
        ]
        if ray_only:
            parser.error(f"{', '.join(ray_only)} only apply with --engine ray (the local engine would ignore them)")
    try:
        runner.run_course(
            out, profile=args.profile, selection=args.notebooks, prepare_only=args.command == "prepare", extra=extra
        )
    except ValueError as error:  # a bad selection or parameter name: a message, not a traceback
        raise SystemExit(f"error: {error}") from None


def _run_grid_command(
    parser: argparse.ArgumentParser, args: argparse.Namespace, out: Path, extra: Mapping[str, Any]
) -> None:
    """``run --engine ray [--grid NAME=A,B ...]``: every (grid point, notebook) a Ray task
    (:func:`helpers.course.ray_engine.run_grid`)."""
    if args.engine != "ray":
        parser.error("--grid runs through Ray: add --engine ray")
    try:
        grid = ray_engine.parse_grid(args.grid)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    both = sorted(set(extra) & set(grid))
    if both:
        parser.error(
            f"{', '.join(both)} is given both by -p and by --grid (the grid's values would replace -p's): give it "
            "in one of them"
        )
    try:
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

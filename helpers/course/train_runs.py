"""Train (or list) every run the notebooks declare that is not stored yet (:data:`helpers.course.DECLARED_RUNS`)::

    python -m helpers.course.train_runs train [--profile reference] [--notebooks 02 03] [--device cuda] [--workers 4]
    python -m helpers.course.train_runs list  [--profile reference]

``train`` builds each notebook's configuration from its ``PROFILES`` table and trains every declared run that is
not stored yet, one at a time (or ``--workers`` processes side by side on a GPU, or ``--engine ray``: every run a Ray
task, :mod:`helpers.course.ray_engine`), storing each as it finishes: stop it at any point and it resumes where it
stopped. In the ``reference`` profile runs are stored in ``stored_runs/`` (committed); in the other profiles they go
to the local cache. ``CALIBMED_RETRAIN=1`` retrains the stored runs that older training code produced
(:func:`helpers.training.is_current`), so a retrain resumes too. ``list`` names the declared runs that are missing.

The program's entry: it imports the declarations (:mod:`helpers.course.suites`) and the Ray engine, both below it.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from helpers.course import ray_engine, runner, suites
from helpers.course.profiles import PROFILE_NAMES


def main(argv: list[str] | None = None) -> None:
    """Parse ``argv`` (default: the program's arguments) and list or train the declared runs."""
    parser = build_parser()
    args = parser.parse_args(argv)
    ray_engine.check_engine_arguments(parser, args)
    if args.engine == "ray" and args.workers != 1:
        parser.error("--workers is the local process pool; with --engine ray the cluster's resources decide")
    stems = [p.stem for p in runner.list_notebooks(args.notebooks)]
    notebooks = [s for s in stems if s in suites.DECLARED_RUNS]
    knobs = {"device": args.device} if args.device else {}
    if args.command == "list":
        list_missing(notebooks, args.profile, knobs)
    else:
        train_missing(args, notebooks, knobs)


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``train`` and ``list``, with the Ray engine's options
    (:func:`helpers.course.ray_engine.add_engine_arguments`)."""
    parser = argparse.ArgumentParser(
        prog="python -m helpers.course.train_runs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=("train", "list"))
    parser.add_argument("--profile", default="reference", choices=PROFILE_NAMES)
    parser.add_argument("--notebooks", nargs="*", default=None, help="prefixes such as 02 03 (default: all)")
    parser.add_argument("--device", default=None, help="override the profile's device (auto, cpu, cuda)")
    parser.add_argument("--workers", type=int, default=1, help="training processes side by side (GPU)")
    ray_engine.add_engine_arguments(parser)
    return parser


def list_missing(notebooks: list[str], profile: str, knobs: dict[str, Any]) -> None:
    """Print every declared run that is neither stored nor cached, and how many."""
    missing = suites.declared_runs(notebooks, profile, knobs)
    for planned in missing:
        print(f"missing: {planned.name} ({planned.bundle.name}/{planned.key})")
    print(f"{len(missing)} declared runs missing (runs that depend on a missing run are listed once it exists)")


def train_missing(args: argparse.Namespace, notebooks: list[str], knobs: dict[str, Any]) -> None:
    """Train every missing declared run here (:func:`helpers.course.suites.train_declared`) or as Ray tasks
    (:func:`helpers.course.ray_engine.train_declared`); in the reference profile, then name the stored runs of
    older training code."""
    print(f"training every run declared by {notebooks} (profile {args.profile!r})", flush=True)
    started = time.perf_counter()
    if args.engine == "ray":
        outcomes = ray_engine.train_declared(
            notebooks,
            args.profile,
            knobs,
            address=args.address,
            gpus_per_run=args.gpus_per_run,
            cpus_per_run=args.cpus_per_run,
        )
        count = sum(outcome["status"] == "trained" for outcome in outcomes)
    else:
        count = suites.train_declared(notebooks, args.profile, knobs, args.workers)
    print(f"trained {count} runs in {time.perf_counter() - started:.0f} s; every declared run is present", flush=True)
    if args.profile == "reference":
        suites.report_runs_of_older_code()


if __name__ == "__main__":
    main()

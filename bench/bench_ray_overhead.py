"""The Ray engine against the process pool on one machine: the overhead per run, as a ratio (issue 17, item 4).

    .venv/bin/python bench/bench_ray_overhead.py [--notebooks 01 04] [--workers 2] [--profile smoke]

Both paths train the same declared runs (by default notebooks 01 and 04 in the ``smoke`` profile: six runs of one
epoch on 512 DermaMNIST images, in two rounds because LS+ waits for its cross-entropy run), each into a fresh
temporary run cache, ``--workers`` runs side by side with one torch thread each:

* ``pool``: ``python -m helpers.course.train_runs train --workers N`` (:func:`helpers.course.suites.train_declared`,
  forked processes);
* ``ray``: ``python -m helpers.course.train_runs train --engine ray`` (:func:`helpers.course.ray_engine.train_declared`)
  on a local Ray with N CPUs, one CPU per run; starting Ray is timed on its own line.

For each path: the wall time, the seconds the runs themselves trained (``fit``'s own clock, read back from the
cached runs), and the overhead per run = (wall x workers - training seconds) / runs: the worker-seconds a run
costs beyond its training (planning, loading data, starting processes, scheduling, writing). The ratio row divides
Ray's figures by the pool's. Needs ``CALIBMED_DATA_DIR`` with ``dermamnist.npz`` and the ``scale`` extra.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers import course
from helpers.course import (
    ray_engine,
    suites,  # noqa: E402
)


def trained_seconds(cache: Path) -> list[float]:
    return [
        float(torch.load(path, map_location="cpu", weights_only=True)["seconds"]) for path in sorted(cache.glob("*.pt"))
    ]


def run_pool(notebooks: list[str], profile: str, workers: int, cache: Path) -> float:
    os.environ.setdefault("CALIBMED_SUITE_THREADS", "1")
    started = time.perf_counter()
    with ray_engine.store_roots(None, cache), contextlib.redirect_stdout(io.StringIO()):
        suites.train_declared(notebooks, profile, {"device": "cpu"}, workers)
    return time.perf_counter() - started


def run_ray(notebooks: list[str], profile: str, cache: Path) -> float:
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        ray_engine.train_declared(notebooks, profile, {"device": "cpu"}, cache_dir=str(cache))
    return time.perf_counter() - started


def row(path: str, wall: float, seconds: list[float], workers: int) -> dict[str, float]:
    overhead = (wall * workers - sum(seconds)) / len(seconds)
    print(f"| {path} | {wall:.1f} | {len(seconds)} | {sum(seconds):.1f} | {wall / len(seconds):.1f} | {overhead:.1f} |")
    return {"wall": wall, "per_run": wall / len(seconds), "overhead": overhead}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notebooks", nargs="*", default=["01", "04"])
    parser.add_argument("--profile", default="smoke", choices=course.PROFILE_NAMES)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    notebooks = [p.stem for p in course.list_notebooks(args.notebooks) if p.stem in suites.DECLARED_RUNS]
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as folder:
        pool_cache, ray_cache = Path(folder) / "pool", Path(folder) / "ray"
        pool_wall = run_pool(notebooks, args.profile, args.workers, pool_cache)
        started = time.perf_counter()
        ray_engine.connect(None, num_cpus=args.workers)
        ray_start = time.perf_counter() - started
        ray_wall = run_ray(notebooks, args.profile, ray_cache)
        print(
            f"{len(notebooks)} notebooks {notebooks}, profile {args.profile!r}, {args.workers} workers, "
            f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; starting a local Ray: {ray_start:.1f} s "
            "(not in the rows below)\n"
        )
        print("| path | wall s | runs | training s | wall s per run | overhead s per run |")
        print("|---|---:|---:|---:|---:|---:|")
        pool = row("pool (--workers)", pool_wall, trained_seconds(pool_cache), args.workers)
        ray = row("ray (--engine ray)", ray_wall, trained_seconds(ray_cache), args.workers)
        print(
            f"| ratio ray / pool | {ray['wall'] / pool['wall']:.2f} | | | {ray['per_run'] / pool['per_run']:.2f} | "
            f"{ray['overhead'] / pool['overhead']:.2f} |"
        )


if __name__ == "__main__":
    main()

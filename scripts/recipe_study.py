"""Choose the over-fitting recipe from cross-entropy alone (issue 8, item 2), before any other loss is trained.

Trains cross-entropy on all of DermaMNIST under the well-regularised recipe and under candidate over-fitting
recipes, for training seeds 0, 1, 2, and prints test accuracy, AUROC, ECE and NLL per seed with mean ± sd. The
targets: well-regularised CE mean accuracy >= 0.75 and AUROC >= 0.92; over-fitting CE ECE >= 0.06 on every seed (a
mean >= 0.06 is not enough), a mean at least twice the well-regularised CE's, seed ranges not overlapping.

    python scripts/recipe_study.py --out results/recipe_study.json [--workers 4] [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CANDIDATES = {
    "well-regularised (small_cnn, SGD 0.1 one-cycle, wd 5e-4, augmentation, 30 epochs, best val NLL)": dict(
        recipe="well-regularised", model="small_cnn", epochs=30, lr=0.1
    ),
    "A: small_cnn, SGD 0.05 constant, no wd/aug, 40 epochs, last (today's over-fitting recipe)": dict(
        recipe="over-fitting", model="small_cnn", epochs=40, lr=0.1
    ),
    "B: small_cnn_wide, Adam 1e-3 constant, no wd/aug, 30 epochs, last": dict(
        recipe="over-fitting", model="small_cnn_wide", epochs=30, lr=2e-3, optimizer="adamw"
    ),
    "C: small_cnn_wide, SGD 0.05 constant, no wd/aug, 40 epochs, last": dict(
        recipe="over-fitting", model="small_cnn_wide", epochs=40, lr=0.1
    ),
    "D: small_cnn, Adam 1e-3 constant, no wd/aug, 30 epochs, last": dict(
        recipe="over-fitting", model="small_cnn", epochs=30, lr=2e-3, optimizer="adamw"
    ),
    "E: small_cnn_wide, Adam 1e-3 constant, no wd/aug, 60 epochs, last": dict(
        recipe="over-fitting", model="small_cnn_wide", epochs=60, lr=2e-3, optimizer="adamw"
    ),
    "F: small_cnn, Adam 1e-3 constant, no wd/aug, 60 epochs, last": dict(
        recipe="over-fitting", model="small_cnn", epochs=60, lr=2e-3, optimizer="adamw"
    ),
    "G: small_cnn_wide, Adam 1e-3 constant, no wd/aug, 100 epochs, last": dict(
        recipe="over-fitting", model="small_cnn_wide", epochs=100, lr=2e-3, optimizer="adamw"
    ),
    "H: small_cnn_wide, SGD 0.05 constant, no wd/aug, 100 epochs, last": dict(
        recipe="over-fitting", model="small_cnn_wide", epochs=100, lr=0.1
    ),
}
SEEDS = (0, 1, 2)


def one_run(args):
    name, spec, seed, device = args
    import torch

    torch.set_num_threads(1)
    from helpers import data, metrics
    from helpers.losses import CrossEntropy
    from helpers.training import recipes, run_store

    bundle = data.load_dataset("dermamnist")
    spec = dict(spec)
    overrides = {k: spec.pop(k) for k in ("optimizer",) if k in spec}
    config = recipes.recipe_config(
        spec["recipe"],
        epochs=spec["epochs"],
        lr=spec["lr"],
        batch_size=128,
        seed=seed,
        device=device,
        progress=False,
        **overrides,
    )
    run = run_store.train_run(f"{name[:1]} seed {seed}", CrossEntropy(), bundle, spec["model"], config, cache=False)
    probs, labels = run.test_probs, bundle.test.labels
    return (
        name,
        seed,
        {
            "accuracy": metrics.accuracy(probs, labels),
            "auroc_ovr": metrics.auroc_ovr(probs, labels),
            "ece": metrics.ece(probs, labels),
            "nll": metrics.nll(probs, labels),
            "seconds": run.seconds,
            "device": run.device,
        },
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--candidates", default=None, help="first letters of the candidates to run, e.g. 'wAB'")
    args = parser.parse_args()
    chosen = {name: spec for name, spec in CANDIDATES.items() if args.candidates is None or name[0] in args.candidates}
    jobs = [(name, spec, seed, args.device) for name, spec in chosen.items() for seed in SEEDS]
    started = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        outcomes = list(pool.map(one_run, jobs))
    table = {}
    for name, seed, values in outcomes:
        table.setdefault(name, {})[seed] = values
    for name, by_seed in table.items():
        print(name)
        for metric in ("accuracy", "auroc_ovr", "ece", "nll"):
            values = [by_seed[s][metric] for s in SEEDS]
            print(
                f"  {metric:10s} "
                + " ".join(f"{v:.4f}" for v in values)
                + f"   mean {statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"
            )
    payload = {
        "seeds": list(SEEDS),
        "candidates": chosen,
        "results": table,
        "wall_seconds": time.perf_counter() - started,
    }
    from helpers import course

    args.out.parent.mkdir(parents=True, exist_ok=True)
    course.write_atomically(args.out, json.dumps(payload, indent=2))
    print(f"wall time {payload['wall_seconds']:.0f} s")


if __name__ == "__main__":
    main()

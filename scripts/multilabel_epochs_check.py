"""Is 20 epochs enough for the multi-label reference runs? (issue 9, item 1)

The reference recipe (notebooks 08–11 and 13) trains 20 epochs with a one-cycle schedule and keeps the epoch of lowest
validation NLL. Under a one-cycle schedule the last epochs anneal the learning rate, so the validation NLL falls
until the end whatever the length; the question that matters is whether a longer schedule gives a better model.
This script trains the same run (loss, data, recipe, seed) for 20 and for a longer schedule on this machine and
prints the test metrics of both, beside the three stored 20-epoch reference runs of that loss (trained on a GPU)
for the seed-to-seed spread.

    python scripts/multilabel_epochs_check.py --out results/multilabel_epochs_check.json [--losses BCE SPA+LPR]
        [--long-epochs 40] [--seed 0]

Runs go through the local run cache (runs/cache/), never into stored_runs/.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

METRICS = ("macro_auroc", "nll", "brier", "true_rms")


def test_metrics(loss, logits, bundle) -> dict[str, float]:
    from helpers import metrics

    probs = loss.predict_proba(logits).double()
    labels = bundle.test.labels
    return {
        "macro_auroc": metrics.macro_auroc(probs, labels),
        "nll": metrics.multilabel_nll(probs, labels),
        "brier": metrics.multilabel_brier(probs, labels),
        "true_rms": metrics.true_rms(probs, bundle.true_posteriors["test"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--losses", nargs="+", default=["BCE"])
    parser.add_argument("--long-epochs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from helpers import course, data
    from helpers.lessons import multilabel_analysis as mla
    from helpers.training import run_store

    profile = course.notebook_profiles("11_multilabel_comparison")["reference"]
    bundle = data.load_dataset(profile["dataset"], image_size=profile["image_size"])
    results: dict[str, dict] = {}
    for name in args.losses:
        loss = mla.course_losses([name], lpr_weight=profile["lpr_weight"])[name]
        row: dict[str, dict] = {}
        for epochs in (profile["epochs"], args.long_epochs):
            config = mla.multilabel_train_config(
                epochs, profile["lr"], profile["batch_size"], seed=args.seed, device="cpu"
            )
            run = run_store.train_run(
                f"{name}, {epochs} epochs, seed {args.seed}", loss, bundle, profile["model"], config
            )
            best = min(range(len(run.history)), key=lambda i: run.history[i]["val_nll"])
            row[f"{epochs} epochs, seed {args.seed}, here"] = {
                **test_metrics(run.loss, run.test_logits, bundle),
                "kept_epoch": best + 1,
                "best_val_nll": run.history[best]["val_nll"],
                "training_seconds": round(run.seconds, 1),
            }
        stored = []
        for seed in profile["seeds"]:
            config = mla.multilabel_train_config(profile["epochs"], profile["lr"], profile["batch_size"], seed=seed)
            path = run_store.stored_run_path(bundle, run_store.run_key(bundle, profile["model"], loss, config))
            if path.is_file():
                run = run_store.train_run(
                    f"{name}, stored, seed {seed}", loss, bundle, profile["model"], config, stored=True
                )
                stored.append(test_metrics(run.loss, run.test_logits, bundle))
        if stored:
            row[f"{profile['epochs']} epochs, stored seeds {profile['seeds']} (mean, sd)"] = {
                metric: [statistics.mean(s[metric] for s in stored), statistics.stdev(s[metric] for s in stored)]
                for metric in METRICS
            }
        results[name] = row
        for label, values in row.items():
            shown = ", ".join(
                f"{k} {v[0]:.4f} ± {v[1]:.4f}"
                if isinstance(v, list)
                else f"{k} {v:.4f}"
                if isinstance(v, float)
                else f"{k} {v}"
                for k, v in values.items()
            )
            print(f"{name:8s} {label}: {shown}", flush=True)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "dataset": profile["dataset"],
        "model": profile["model"],
        "recipe": "multilabel_train_config",
        "long_epochs": args.long_epochs,
        "seed": args.seed,
        "results": results,
    }
    course.write_atomically(out, json.dumps(payload, indent=2))
    print(f"written {out}")


if __name__ == "__main__":
    main()

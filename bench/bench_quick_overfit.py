"""The ``quick`` profile's over-fitting runs: the small CNN against the widened one, side by side in one run.

    .venv/bin/python bench/bench_quick_overfit.py [--data-dir DIR] [--epochs 3] [--rounds 2] [--device cpu]

Each timed run is what a ``quick`` notebook trains under the over-fitting recipe: ``helpers.training.fit`` on a
seeded 1,000-image subset of DermaMNIST's training split (``max_train=1000``, seed 0, as the notebooks load it),
batch 32, SGD at the recipe's constant rate, no weight decay or augmentation, one validation pass over all 1,003
validation images per epoch, for ``--epochs`` epochs. The two models alternate over ``--rounds`` rounds (background
load hits both alike); the figure per model is the median seconds per epoch, with the ratio to the small CNN and
the time of a 15-epoch ``quick`` run. This measurement is why the ``quick`` profile sets
``overfit_model="small_cnn"`` (``helpers.course.recipe_model``); the ``reference`` profile keeps the wide CNN on
all 7,007 images.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers import data
from helpers.losses import CrossEntropy  # noqa: E402
from helpers.training import (
    models,
    recipes,
    train,  # noqa: E402
)

QUICK_TRAIN_IMAGES = 1000
QUICK_BATCH = 32
QUICK_EPOCHS = 15
MODELS = ("small_cnn", "small_cnn_wide")


def seconds_per_epoch(model_name: str, bundle: data.DatasetBundle, epochs: int, device: str) -> float:
    config = recipes.recipe_config(
        "over-fitting", epochs=epochs, lr=0.1, batch_size=QUICK_BATCH, seed=0, device=device, progress=False
    )
    torch.manual_seed(0)
    model = models.build_model(model_name, bundle.n_channels, bundle.n_classes, image_size=bundle.image_size)
    started = time.perf_counter()
    train.fit(model, CrossEntropy(), bundle, config)
    return (time.perf_counter() - started) / epochs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    bundle = data.load_dataset("dermamnist", data_dir=args.data_dir, max_train=QUICK_TRAIN_IMAGES, seed=0)
    seconds_per_epoch(MODELS[0], bundle, 1, args.device)  # warm-up
    measured: dict[str, list[float]] = {name: [] for name in MODELS}
    for _ in range(args.rounds):
        for name in MODELS:
            measured[name].append(seconds_per_epoch(name, bundle, args.epochs, args.device))
    where = f"{args.device}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}"
    print(
        f"over-fitting recipe, {QUICK_TRAIN_IMAGES:,} training images, batch {QUICK_BATCH}, validation "
        f"{len(bundle.val.labels):,} images per epoch; {where}, torch {torch.__version__}"
    )
    base = statistics.median(measured[MODELS[0]])
    print(f"{'model':16s} {'s / epoch':>10s} {'× small_cnn':>12s} {f'{QUICK_EPOCHS}-epoch run (s)':>20s}")
    for name, values in measured.items():
        value = statistics.median(values)
        print(f"{name:16s} {value:10.2f} {value / base:12.2f} {value * QUICK_EPOCHS:20.0f}")


if __name__ == "__main__":
    main()

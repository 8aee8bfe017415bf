"""Training throughput of this engine against the reference pipeline, side by side in one run.

    .venv/bin/python bench/bench_training.py [--data-dir DIR] [--device auto] [--repeats 5] [--threads N]

The reference is the pipeline of medmnist's getting-started notebook and of the LDACE reference code: the
``medmnist.DermaMNIST`` Dataset with ``transforms.Compose([ToTensor(), Normalize(mean=[.5], std=[.5])])`` applied
per item (a PIL image each time) and a ``torch.utils.data.DataLoader`` (batch 128, shuffled) with 0 and 2 workers.
This engine indexes the uint8 tensor kept on the device with a seeded permutation, normalises with ``to_float``
and augments the whole batch at once (``augment_batch``).

(a) Data path alone: batches of normalised images and labels, nothing else. Ours is timed without augmentation,
    with flips, and with flips + shifts/rotations (the ``TrainConfig(augment=True)`` default); the reference does
    no augmentation at all, so those rows favour the reference.
(b) Whole training step, same SmallCNN and SGD (lr 0.01, momentum 0.9) on both sides: ours through
    ``helpers.training.fit`` itself (default augmentation, plus one validation pass over 128 images counted
    against us), the reference through the notebook's loop (``zero_grad``, forward, ``squeeze().long()``, cross-entropy,
    ``backward``, ``step``).

Each figure is the median of ``--repeats`` timed windows after a warm-up; the two sides are interleaved so that
background load hits both alike. The load average is printed: on a shared machine the absolute numbers move, the
ratios much less. Targets (issue 2): data path >= 10x the reference; training step never slower on the CPU.
The DataLoader with 2 workers uses persistent workers, so worker start-up is not timed (again in its favour).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from helpers.data import DatasetBundle, Split, load_dataset, resolve_data_dir
from helpers.losses import CrossEntropy
from helpers.training import Augmentation, SmallCNN, TrainConfig, augment_batch, fit, resolve_device, to_float

BATCH_SIZE = 128
REFERENCE_LR = 0.01


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def subset(bundle: DatasetBundle, n_train: int, n_val: int) -> DatasetBundle:
    """The bundle cut to its first ``n_train`` training and ``n_val`` validation images."""
    return replace(
        bundle,
        train=Split(bundle.train.images[:n_train], bundle.train.labels[:n_train]),
        val=Split(bundle.val.images[:n_val], bundle.val.labels[:n_val]),
    )


def reference_loader(data_dir: Path, num_workers: int) -> torch.utils.data.DataLoader:
    import medmnist
    from torchvision import transforms

    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize(mean=[0.5], std=[0.5])])
    dataset = medmnist.DermaMNIST(split="train", transform=transform, root=str(data_dir), download=False)
    return torch.utils.data.DataLoader(
        dataset, batch_size=BATCH_SIZE, shuffle=True, num_workers=num_workers, persistent_workers=num_workers > 0
    )


def endless(loader: torch.utils.data.DataLoader) -> Iterator:
    while True:
        yield from loader


def our_batches(
    images: torch.Tensor, labels: torch.Tensor, augmentation: Augmentation | None, seed: int = 0
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The engine's data path: a seeded permutation indexing device tensors, to_float, batched augmentation."""
    shuffle, augment = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed + 1)
    n = images.shape[0]
    while True:
        permutation = torch.randperm(n, generator=shuffle).to(images.device)
        for start in range(0, n - BATCH_SIZE + 1, BATCH_SIZE):
            index = permutation[start : start + BATCH_SIZE]
            yield augment_batch(to_float(images[index]), augment, augmentation), labels[index]


def time_batches(batches: Iterator, n_batches: int, device: torch.device) -> float:
    """Images per second over ``n_batches`` batches pulled from ``batches`` (moved to ``device``)."""
    _synchronize(device)
    start, count = time.perf_counter(), 0
    for _ in range(n_batches):
        x, y = next(batches)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        count += x.shape[0]
    _synchronize(device)
    return count / (time.perf_counter() - start)


def reference_training(loader_batches: Iterator, n_batches: int, device: torch.device) -> float:
    """The getting-started notebook's training loop on SmallCNN; images per second over ``n_batches`` steps."""
    torch.manual_seed(0)
    model = SmallCNN(3, 7).to(device).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=REFERENCE_LR, momentum=0.9)

    def step(inputs, targets):
        optimizer.zero_grad()
        outputs = model(inputs.to(device))
        loss = F.cross_entropy(outputs, targets.to(device).squeeze(1).long())
        loss.backward()
        optimizer.step()

    for _ in range(3):  # warm-up
        step(*next(loader_batches))
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(n_batches):
        step(*next(loader_batches))
    _synchronize(device)
    return n_batches * BATCH_SIZE / (time.perf_counter() - start)


def engine_training(bundle: DatasetBundle, n_batches: int, epochs: int, device: torch.device) -> float:
    """``fit`` on ``n_batches`` x 128 training images for ``epochs`` epochs; images per second of its epochs."""
    n = n_batches * BATCH_SIZE
    data = subset(bundle, n, BATCH_SIZE)
    torch.manual_seed(0)
    config = TrainConfig(
        epochs=epochs,
        batch_size=BATCH_SIZE,
        lr=REFERENCE_LR,
        schedule="constant",
        weight_decay=0.0,
        momentum=0.9,
        device=str(device),
        progress=False,
    )
    history = fit(SmallCNN(3, 7), CrossEntropy(), data, config).history
    return epochs * n / sum(record["seconds"] for record in history)


def median_interleaved(functions: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    results: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            results[name].append(function())
    return {name: statistics.median(values) for name, values in results.items()}


def print_table(title: str, rows: dict[str, float]) -> None:
    """Images/s of every row and its ratio to the two reference rows (the first two)."""
    references = list(rows)[:2]
    print(f"\n{title}")
    print(f"  {'pipeline':<46}{'images/s':>10}{'vs ref 0 workers':>18}{'vs ref 2 workers':>18}")
    for name, rate in rows.items():
        ratios = "".join(f"{rate / rows[ref]:>17.2f}x" for ref in references)
        print(f"  {name:<46}{rate:>10,.0f}{ratios}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data-dir",
        default=None,
        help="folder with dermamnist.npz (default: $CALIBMED_DATA_DIR, else data/ in the repo)",
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--data-batches", type=int, default=None, help="batches per data-path window")
    parser.add_argument("--train-batches", type=int, default=None, help="steps per training window")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    gpu = device.type != "cpu"
    data_batches = args.data_batches or (200 if gpu else 40)
    train_batches = args.train_batches or (54 if gpu else 16)
    train_epochs = 3 if gpu else 1
    data_dir = resolve_data_dir(args.data_dir)

    machine = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.machine()
    print(
        f"torch {torch.__version__} on {device} ({machine}), "
        f"{torch.get_num_threads()} threads, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start"
    )
    bundle = load_dataset("dermamnist", data_dir=data_dir)
    device_images, device_labels = bundle.train.images.to(device), bundle.train.labels.to(device)
    loaders = {workers: endless(reference_loader(data_dir, workers)) for workers in (0, 2)}
    ours = {
        "ours: index + to_float": our_batches(device_images, device_labels, None),
        "ours: + flips": our_batches(device_images, device_labels, Augmentation(max_shift=0, max_rotation=0)),
        "ours: + flips, shifts, rotations (default)": our_batches(device_images, device_labels, Augmentation()),
    }
    for batches in list(ours.values()) + list(loaders.values()):  # warm-up (starts the workers)
        time_batches(batches, 3, device)

    started = time.perf_counter()
    functions = {
        f"reference: DataLoader, {w} workers": (lambda b=b: time_batches(b, data_batches, device))
        for w, b in loaders.items()
    }
    functions.update({name: (lambda b=b: time_batches(b, data_batches * 5, device)) for name, b in ours.items()})
    data_rates = median_interleaved(functions, args.repeats)
    print_table(f"(a) data path, batch {BATCH_SIZE} (median of {args.repeats})", data_rates)

    engine_training(bundle, 2, 1, device)  # warm-up
    train_rates = median_interleaved(
        {
            "reference: notebook loop, 0 workers": lambda: reference_training(loaders[0], train_batches, device),
            "reference: notebook loop, 2 workers": lambda: reference_training(loaders[2], train_batches, device),
            "ours: fit() (default augmentation)": lambda: engine_training(bundle, train_batches, train_epochs, device),
        },
        args.repeats,
    )
    print_table(f"(b) training step, SmallCNN, SGD, batch {BATCH_SIZE} (median of {args.repeats})", train_rates)
    print(f"\ntimed part took {time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()

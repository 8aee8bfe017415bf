"""SmallCNN training step per memory format, compilation and precision, side by side in one run (issue 8, item 8).

    .venv/bin/python bench/bench_memory_format.py [--device cpu|cuda] [--model small_cnn] [--steps 30] [--rounds 3]

One training step = forward, cross-entropy, backward and an SGD step (momentum 0.9) on a batch of 128 random 28 px
RGB images, the course's DermaMNIST setting. Variants: the default (contiguous NCHW) memory format; channels-last
(model and batch in NHWC); bf16 autocast; and on CUDA channels-last with bf16
autocast (what ``helpers.training.fit`` does there); with ``--compile`` also ``torch.compile`` (slow to compile on
a CPU: it needs a C++ compiler and minutes). Each figure is the median over ``--rounds`` interleaved rounds of
``--steps`` timed steps after warm-up, as images per second, with the ratio to the default. ``helpers.training.train``
uses the fastest measured layout per device (:func:`helpers.training.preferred_memory_format`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.training import build_model  # noqa: E402

BATCH = 128


def make_step(
    device: torch.device, model_name: str, channels_last: bool, compiled: bool, autocast_dtype: torch.dtype | None
) -> Callable[[], None]:
    torch.manual_seed(0)
    model = build_model(model_name, 3, 7).to(device)
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    forward = torch.compile(model) if compiled else model
    images = torch.rand(BATCH, 3, 28, 28, device=device).contiguous(memory_format=memory_format)
    labels = torch.randint(0, 7, (BATCH,), device=device)

    def step() -> None:
        with torch.autocast(device.type, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None):
            loss = F.cross_entropy(forward(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def images_per_second(step: Callable[[], None], steps: int, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    for _ in range(steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return steps * BATCH / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", default="small_cnn")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compile", action="store_true", help="also time torch.compile (minutes of compilation)")
    args = parser.parse_args()
    device = torch.device(args.device)
    variants = {
        "default (NCHW)": (False, False, None),
        "channels-last": (True, False, None),
        "bf16 autocast": (False, False, torch.bfloat16),
    }
    if args.compile:
        variants["torch.compile"] = (False, True, None)
    if device.type == "cuda":
        variants["channels-last + bf16 autocast"] = (True, False, torch.bfloat16)
    steps = {}
    for name, (channels_last, compiled, dtype) in variants.items():
        steps[name] = make_step(device, args.model, channels_last, compiled, dtype)
        images_per_second(steps[name], 5, device)  # warm-up (and compilation)
    measured: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, step in steps.items():
            measured[name].append(images_per_second(step, args.steps, device))
    where = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"CPU, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}"
    )
    print(f"{args.model} training step, batch {BATCH}, 28 px RGB, {where}, torch {torch.__version__}")
    base = statistics.median(measured["default (NCHW)"])
    print(f"{'variant':32s} {'images/s':>10s} {'× default':>10s}")
    for name, values in measured.items():
        value = statistics.median(values)
        print(f"{name:32s} {value:10.0f} {value / base:10.2f}")


if __name__ == "__main__":
    main()

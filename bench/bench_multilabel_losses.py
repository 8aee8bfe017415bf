"""Forward + backward time of the multi-label losses against BCE, side by side (issue 4 benchmark).

For each device (CPU; CUDA too when available) and T in {14, 80}, batch 256, it times

* "loss": one forward and backward pass of the loss alone on random logits and targets (the network's cost,
  identical for every loss, left out: the ratio is the loss's own overhead), and
* "step": one forward and backward pass of a small CNN on 28×28 grey images (two conv layers, the size of the
  course's small_cnn) followed by the loss: the ratio a training run actually sees,

and prints the median times and their ratios to BCE. Issue 4's target: LPR and LDACE at most 1.5× BCE at T = 14.
"LPR (on σ)" is the regulariser alone on σ(logits); "BCE + LPR" is what training with it runs. The first row,
"floor: sum", is the smallest possible loss (one reduction and its backward pass): at batch 256, T = 14 every
loss here is dominated by the fixed cost of each dispatched op and of the autograd engine, not by arithmetic,
so the ratios there count operations more than they measure the pairwise work (compare the T = 80 columns).

    .venv/bin/python bench/bench_multilabel_losses.py [--threads 1] [--min-run-time 0.3] [--rounds 3] \
        [--device auto|cpu|cuda]

Timing uses torch.utils.benchmark (warm-up, CUDA synchronisation, blocked repeats, median), interleaved rounds
(the fastest median is kept), and on CPU with one thread the thread's CPU time rather than wall time, so that
load from other processes on a shared machine does not inflate one cell and not another.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils import benchmark

from helpers.losses import ASL, BCE, LDACE, LPR, SPA, Composite, LDACEWithCCL


class SumFloor(torch.nn.Module):
    """The cheapest differentiable scalar of the logits: a lower bound for any loss's forward + backward."""

    def forward(self, logits, targets):
        return logits.sum()


class OnSigmoid(torch.nn.Module):
    """A regulariser alone, on σ(logits) (its own cost, as the base loss's predict_proba would feed it)."""

    def __init__(self, regulariser: torch.nn.Module):
        super().__init__()
        self.regulariser = regulariser

    def forward(self, logits, targets):
        return self.regulariser(torch.sigmoid(logits), targets)


COMPILED = ("BCE", "BCE + LPR", "LDACE")  # with --compile, also these under torch.compile (rows "… [c]")
_compile = False


def losses() -> dict[str, torch.nn.Module]:
    table = {
        "BCE": BCE(),
        "floor: sum": SumFloor(),
        "LPR (on σ)": OnSigmoid(LPR()),
        "BCE + LPR": Composite(BCE(), [(1.0, LPR())]),
        "SPA": SPA(),
        "SPA + LPR": Composite(SPA(), [(1.0, LPR())]),
        "ASL": ASL(),
        "LDACE": LDACE(),
        "LDACE + CCL": LDACEWithCCL(),
    }
    if _compile:
        table.update({f"{name} [c]": torch.compile(table[name]) for name in COMPILED})
    return table


def small_cnn(n_labels: int) -> torch.nn.Module:
    """A stand-in for the course's small_cnn (defined here so the benchmark depends on the losses only)."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(64 * 7 * 7, n_labels),
    )


def make_step(loss: torch.nn.Module, batch: int, n_labels: int, device: torch.device, with_model: bool):
    """A closure running one forward + backward pass (of the loss alone, or of the small CNN and the loss)."""
    generator = torch.Generator().manual_seed(0)
    logits = (2.0 * torch.randn(batch, n_labels, generator=generator)).to(device).requires_grad_(True)
    targets = (torch.rand(batch, n_labels, generator=generator) < 0.1).float().to(device)
    images = torch.randn(batch, 1, 28, 28, generator=generator).to(device)
    torch.manual_seed(0)
    model = small_cnn(n_labels).to(device)

    def step():
        if with_model:
            model.zero_grad(set_to_none=True)
            loss(model(images), targets).backward()
        else:
            logits.grad = None
            loss(logits, targets).backward()

    for _ in range(5):  # warm-up outside the timer as well
        step()
    return step


def clock(device: torch.device, threads: int):
    """CPU with one thread: the CPU time of this thread (``time.thread_time``), which does not count time when
    other processes on a shared machine hold the core; otherwise wall time (CUDA work is synchronised by the
    benchmark Timer)."""
    return time.thread_time if device.type == "cpu" and threads == 1 else time.perf_counter


def time_cells(device: torch.device, args) -> dict:
    """Median time of every (column, loss) cell; the cells are timed in ``args.rounds`` interleaved rounds and
    the smallest median is kept, which discounts bursts of load from other processes on a shared machine."""
    columns = [(t, with_model) for t in args.labels for with_model in (False, True)]
    steps = {
        (column, name): make_step(loss, args.batch, column[0], device, column[1])
        for column in columns
        for name, loss in losses().items()
    }
    best: dict = {}
    for _ in range(args.rounds):
        for key, step in steps.items():
            run_time = args.min_run_time * (2.0 if key[0][1] else 1.0)
            timer = benchmark.Timer(
                stmt="step()", globals={"step": step}, num_threads=args.threads, timer=clock(device, args.threads)
            )
            median = timer.blocked_autorange(min_run_time=run_time).median
            best[key] = min(best.get(key, float("inf")), median)
    return {column: {name: best[(column, name)] for name in losses()} for column in columns}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--labels", type=int, nargs="+", default=[14, 80])
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for torch (default 1)")
    parser.add_argument("--min-run-time", type=float, default=0.3, help="seconds of timing per cell and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the fastest median is kept")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--compile", action="store_true", help=f"add torch.compile rows for {', '.join(COMPILED)}")
    args = parser.parse_args()
    global _compile
    _compile = args.compile

    if args.device == "auto":
        devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    else:
        devices = [torch.device(args.device)]
    print(
        f"torch {torch.__version__}; batch {args.batch}; CPU threads {args.threads}; forward + backward; "
        f"'loss' = the loss alone, 'step' = small CNN + loss; fastest of {args.rounds} rounds' medians; "
        "CPU: thread CPU time; ×BCE = ratio to BCE"
    )
    names = list(losses())
    for device in devices:
        label = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
        times = time_cells(device, args)
        columns = list(times)
        header = f"{'loss':<14}" + "".join(
            f" | {('step' if m else 'loss') + ' T=' + str(t) + ' µs':>16} {'×BCE':>5}" for t, m in columns
        )
        print(f"\n{device.type} ({label})\n{header}\n{'-' * len(header)}")
        for name in names:
            row = f"{name:<14}"
            for column in columns:
                seconds, base = times[column][name], times[column]["BCE"]
                row += f" | {seconds * 1e6:>16.1f} {seconds / base:>5.2f}"
            print(row)


if __name__ == "__main__":
    main()

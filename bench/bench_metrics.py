"""Time helpers.metrics.ece / classwise_ece against torchmetrics on the same data, side by side in one run.

    .venv/bin/python bench/bench_metrics.py [--n 1000000] [--classes 7] [--repeats 7] [--device cpu] [--threads T]
                                            [--bootstrap]

Both sides get the same float32 probabilities (softmax of random logits) and int64 labels, both validate their
inputs (torchmetrics' default ``validate_args=True``; a row with ``validate_args=False`` is printed too). The
class-wise reference is the mean over classes of torchmetrics ``binary_calibration_error`` on (p_k, 1[y = k]),
the same quantity as the LS+ paper's SCE; its contiguous columns and targets are prepared outside the timing.
Each timing is the median of ``--repeats`` runs after one warm-up; the runs of the two sides are interleaved so
that background load affects both alike. Target: ratio <= 1.
``--bootstrap`` also times ``metrics.bootstrap`` (n = 1000 resamples, N = 2000) for every metric.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
import warnings
from collections.abc import Callable

import torch
from torchmetrics.functional.classification import binary_calibration_error, multiclass_calibration_error

from helpers import metrics


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_pair(
    ours: Callable[[], float], theirs: Callable[[], float], repeats: int, device: torch.device
) -> tuple[float, float, float, float]:
    """Median seconds of each callable (interleaved runs) and the two values it returned."""
    value_ours, value_theirs = float(ours()), float(theirs())  # warm-up, and the values to compare
    times_ours, times_theirs = [], []
    for _ in range(repeats):
        for fn, times in ((ours, times_ours), (theirs, times_theirs)):
            _synchronize(device)
            start = time.perf_counter()
            fn()
            _synchronize(device)
            times.append(time.perf_counter() - start)
    return statistics.median(times_ours), statistics.median(times_theirs), value_ours, value_theirs


def time_bootstraps(n_resamples: int = 1000, n_samples: int = 2000) -> None:
    """Seconds of metrics.bootstrap for every metric on N = 2000 (multi-class K = 7, multi-label T = 14)."""
    generator = torch.Generator().manual_seed(1)
    probs = torch.softmax(2.0 * torch.randn(n_samples, 7, generator=generator), dim=1)
    labels = torch.randint(7, (n_samples,), generator=generator)
    probs_ml = torch.rand(n_samples, 14, generator=generator) ** 3
    labels_ml = (torch.rand(n_samples, 14, generator=generator) < probs_ml).float()
    multiclass = [
        metrics.ece,
        metrics.adaptive_ece,
        metrics.average_calibration_error,
        metrics.mce,
        metrics.classwise_ece,
        metrics.brier,
        metrics.nll,
        metrics.accuracy,
        metrics.macro_f1,
        metrics.cohen_kappa,
        metrics.jaccard,
        metrics.auroc_ovr,
    ]
    multilabel = [
        metrics.multilabel_ece,
        metrics.multilabel_average_calibration_error,
        metrics.multilabel_mce,
        metrics.multilabel_brier,
        metrics.hamming_loss,
        metrics.macro_auroc,
        metrics.map_per_class,
        metrics.map_per_example,
    ]
    print(f"\nbootstrap, n = {n_resamples} resamples of N = {n_samples} (multi-class K = 7, multi-label T = 14)")
    print(f"{'metric':<40} {'seconds':>8} {'ms / resample':>14}")
    for metric_list, data in ((multiclass, (probs, labels)), (multilabel, (probs_ml, labels_ml))):
        for metric in metric_list:
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # rare labels missing from a resample: not the point here
                metrics.bootstrap(metric, *data, n=n_resamples)
            seconds = time.perf_counter() - start
            print(f"{metric.__name__:<40} {seconds:>8.2f} {1e3 * seconds / n_resamples:>14.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--classes", type=int, default=7)
    parser.add_argument("--bins", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--bootstrap", action="store_true", help="also time metrics.bootstrap for every metric")
    args = parser.parse_args()
    device = torch.device(args.device)
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    generator = torch.Generator().manual_seed(0)
    logits = 2.0 * torch.randn(args.n, args.classes, generator=generator)
    probs = torch.softmax(logits, dim=1).to(device)
    labels = torch.randint(args.classes, (args.n,), generator=generator).to(device)
    n_bins, k = args.bins, args.classes

    # the reference gets contiguous columns and one-vs-rest targets prepared outside the timed region
    columns = [probs[:, c].contiguous() for c in range(k)]
    targets = [(labels == c).long() for c in range(k)]

    def tm_classwise(validate: bool) -> float:
        return (
            sum(
                float(binary_calibration_error(column, target, n_bins=n_bins, validate_args=validate))
                for column, target in zip(columns, targets)
            )
            / k
        )

    cases = [
        (
            "ece",
            lambda: metrics.ece(probs, labels, n_bins),
            lambda: multiclass_calibration_error(probs, labels, k, n_bins=n_bins),
        ),
        (
            "ece (torchmetrics validate_args=False)",
            lambda: metrics.ece(probs, labels, n_bins),
            lambda: multiclass_calibration_error(probs, labels, k, n_bins=n_bins, validate_args=False),
        ),
        ("classwise_ece", lambda: metrics.classwise_ece(probs, labels, n_bins), lambda: tm_classwise(True)),
        (
            "classwise_ece (torchmetrics validate_args=False)",
            lambda: metrics.classwise_ece(probs, labels, n_bins),
            lambda: tm_classwise(False),
        ),
    ]
    print(
        f"N = {args.n:,} predictions, K = {k}, {n_bins} bins, float32, device {device}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.processor() or platform.machine()}"
    )
    print(f"median of {args.repeats} interleaved repeats\n")
    header = f"{'metric':<50} {'ours [ms]':>10} {'torchmetrics [ms]':>18} {'ours/theirs':>12} {'|difference|':>13}"
    print(header)
    print("-" * len(header))
    for name, ours, theirs in cases:
        t_ours, t_theirs, v_ours, v_theirs = time_pair(ours, theirs, args.repeats, device)
        print(
            f"{name:<50} {1e3 * t_ours:>10.1f} {1e3 * t_theirs:>18.1f} {t_ours / t_theirs:>12.2f} "
            f"{abs(v_ours - v_theirs):>13.2e}"
        )
    if args.bootstrap:
        time_bootstraps()


if __name__ == "__main__":
    main()

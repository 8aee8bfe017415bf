"""Time metrics.paired_bootstrap (3 + 3 training seeds) for every table metric, weighted (all resamples at once)
against the per-resample loop on the same resamples, side by side.

    .venv/bin/python bench/bench_paired_bootstrap.py [--n 1000] [--compare-n 50] [--threads 1] [--smooth]

Two sizes: DermaMNIST's test set (N = 2,005 images, K = 7 classes) and the synthetic chest set (N = 5,000 images,
T = 14 labels), float32 probabilities. For each metric: seconds of the weighted path at ``--n`` resamples, and both
paths at ``--compare-n`` resamples (the loop at --n would take minutes per metric) with their ratio and the largest
difference between their resample values (0 up to rounding). ``--smooth`` also times the smooth ECE (relplot,
no weighted form: always the loop) at ``--compare-n`` and extrapolates to ``--n``.
"""

from __future__ import annotations

import argparse
import functools
import platform
import time
import warnings

import torch

from helpers import metrics as M


def multiclass_data(seed: int, n: int = 2005, k: int = 7) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    probs = torch.softmax(2.5 * torch.randn(n, k, generator=generator), dim=1)
    return probs, torch.randint(k, (n,), generator=generator)


def multilabel_data(seed: int, n: int = 5000, t: int = 14) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    probs = torch.rand(n, t, generator=generator) ** 3
    return probs, (torch.rand(n, t, generator=generator) < probs).float()


def timed(metric, probs_a, probs_b, labels, n: int, vectorised: bool) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rare labels missing from a resample: not the point here
        result = M.paired_bootstrap(metric, probs_a, probs_b, labels, n=n, vectorised=vectorised)
    return time.perf_counter() - start, result.samples


def run(title: str, metrics: dict, probs_a, probs_b, labels, args: argparse.Namespace) -> None:
    print(f"\n{title}")
    header = (
        f"{'metric':<28} {f'weighted n={args.n} [s]':>22} {f'weighted n={args.compare_n} [s]':>21} "
        f"{f'loop n={args.compare_n} [s]':>17} {'loop/weighted':>14} {'max |diff|':>11}"
    )
    print(header)
    print("-" * len(header))
    total = 0.0
    for name, metric in metrics.items():
        seconds_full, _ = timed(metric, probs_a, probs_b, labels, args.n, True)
        seconds_fast, fast = timed(metric, probs_a, probs_b, labels, args.compare_n, True)
        seconds_loop, slow = timed(metric, probs_a, probs_b, labels, args.compare_n, False)
        difference = float((fast - slow).abs().nan_to_num(0.0).max())
        total += seconds_full
        print(
            f"{name:<28} {seconds_full:>22.2f} {seconds_fast:>21.3f} {seconds_loop:>17.2f} "
            f"{seconds_loop / seconds_fast:>14.1f} {difference:>11.1e}"
        )
    print(f"{'all of the above':<28} {total:>22.2f}")


def run_smooth(title: str, metric, probs_a, probs_b, labels, args: argparse.Namespace) -> None:
    seconds, _ = timed(metric, probs_a, probs_b, labels, args.compare_n, False)
    extrapolated = seconds * args.n / args.compare_n
    print(f"{title}: {seconds:.1f} s for n = {args.compare_n} (loop only), about {extrapolated:.0f} s for n = {args.n}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--compare-n", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--smooth", action="store_true", help="also time the smooth ECE (relplot, loop only)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"paired_bootstrap, 3 + 3 seeds, torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
        f"{platform.processor() or platform.machine()}"
    )

    labels = multiclass_data(0)[1]
    probs_a = [multiclass_data(1 + s)[0] for s in range(3)]
    probs_b = [multiclass_data(11 + s)[0] for s in range(3)]
    multiclass = {
        "accuracy": M.accuracy,
        "auroc_ovr": M.auroc_ovr,
        "macro_f1": M.macro_f1,
        "cohen_kappa": M.cohen_kappa,
        "melanoma_recall": functools.partial(M.class_recall, class_index=4),
        "ece": M.ece,
        "adaptive_ece": M.adaptive_ece,
        "classwise_ece": M.classwise_ece,
        "debiased_ece": M.debiased_ece,
        "nll": M.nll,
        "brier": M.brier,
    }
    run("multi-class: N = 2,005, K = 7", multiclass, probs_a, probs_b, labels, args)
    if args.smooth:
        run_smooth("smooth_ece (N = 2,005)", M.smooth_ece, probs_a, probs_b, labels, args)

    labels = multilabel_data(0)[1]
    posteriors = multilabel_data(99)[0]
    probs_a = [multilabel_data(1 + s)[0] for s in range(3)]
    probs_b = [multilabel_data(11 + s)[0] for s in range(3)]
    multilabel = {
        "macro_auroc": M.macro_auroc,
        "map_per_class": M.map_per_class,
        "map_per_example": M.map_per_example,
        "hamming_loss": M.hamming_loss,
        "multilabel_ece": M.multilabel_ece,
        "multilabel_ace_per_label": functools.partial(M.multilabel_average_calibration_error, per_label=True),
        "multilabel_brier": M.multilabel_brier,
        "multilabel_nll": M.multilabel_nll,
    }
    run("multi-label: N = 5,000, T = 14", multilabel, probs_a, probs_b, labels, args)
    run(
        "multi-label true RMS (labels = exact posteriors)", {"true_rms": M.true_rms}, probs_a, probs_b, posteriors, args
    )
    if args.smooth:
        run_smooth("multilabel_smooth_ece (N = 5,000 x 14)", M.multilabel_smooth_ece, probs_a, probs_b, labels, args)


if __name__ == "__main__":
    main()

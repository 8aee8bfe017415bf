"""Coverage of the primary tables' seed-aware interval with 3 and 5 training seeds, beside a t-interval over seeds.

    .venv/bin/python bench/bench_seed_interval_coverage.py [--sims 400] [--n 500] [--images 500]

Why. :mod:`helpers.metrics.seed_bootstrap` notes that with 3–5 seeds the seed stage of the two-way bootstrap is
coarse: resampling S values with replacement understates their variance by (S − 1)/S and a percentile interval uses
normal-like quantiles where S − 1 degrees of freedom call for Student's t (4.30 at S = 3, 2.78 at S = 5, against
1.96). This script measures what that costs, on a simulated crossed design (every seed scored on the same test
images) with a known difference of 0:

    d[s, i] = u_s + w_i + e_si,   u ~ N(0, σ_u²) seed effect, w ~ N(0, σ_w²) image effect, e ~ N(0, σ_e²) noise,

and reports, for one interval (no multiplicity adjustment), the share of simulations whose 95 % interval covers 0:

* **two-way bootstrap** -- :func:`helpers.metrics.two_stage_samples` on :func:`helpers.metrics.seed_counts` draws and
  shared image resamples, the percentile interval of :func:`helpers.metrics.stats.percentile_result` (the
  library's method);
* **seed t + images** -- mean ± t_{S−1, 0.975} · √(s²_seeds / S + v_images), with s²_seeds the sample variance of the
  per-seed mean differences and v_images the image-bootstrap variance of the seed-averaged difference (the image
  effect w is shared by every seed, so the per-seed spread cannot see it).

Scenarios: the seed effect dominates (the three-seed over-fitting runs of notebook 06, where seed sd is large), the
two are comparable, and the image effect dominates. Each line prints both coverages and their interval widths'
ratio (t / bootstrap).
"""

from __future__ import annotations

import argparse
import platform

import torch
from scipy import stats as scipy_stats

from helpers import metrics
from helpers.metrics import stats

SCENARIOS = {  # (σ_u seed, σ_w image, σ_e noise) of the per-image difference
    "seed effect dominates": (1.0, 2.0, 2.0),
    "comparable": (0.3, 5.0, 5.0),
    "image effect dominates": (0.05, 5.0, 5.0),
}


def one_simulation(n_seeds: int, n_images: int, n: int, sigmas, generator: torch.Generator, sim: int):
    sigma_u, sigma_w, sigma_e = sigmas
    u = sigma_u * torch.randn(n_seeds, 1, generator=generator, dtype=torch.float64)
    w = sigma_w * torch.randn(1, n_images, generator=generator, dtype=torch.float64)
    d = u + w + sigma_e * torch.randn(n_seeds, n_images, generator=generator, dtype=torch.float64)
    drawn = torch.randint(n_images, (n, n_images), generator=generator)
    image_counts = torch.zeros(n, n_images, dtype=torch.float64).scatter_add_(
        1, drawn, torch.ones(n, n_images, dtype=torch.float64)
    )
    per_seed = (d @ image_counts.T) / n_images  # (S, n): each seed's mean difference on each image resample
    samples = metrics.two_stage_samples(per_seed, torch.zeros_like(per_seed), metrics.seed_counts(n_seeds, n, sim))
    interval = stats.percentile_result(0.0, samples, 0.95, (n_seeds, n_seeds), "difference", ("a", "b"))
    low, high = interval.low, interval.high
    seed_means = d.mean(1)
    se = float((seed_means.var() / n_seeds + per_seed.mean(0).var()).sqrt())
    half = float(scipy_stats.t.ppf(0.975, n_seeds - 1)) * se
    estimate = float(seed_means.mean())
    return (low <= 0 <= high, high - low), (estimate - half <= 0 <= estimate + half, 2 * half)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=400)
    parser.add_argument("--n", type=int, default=500, help="bootstrap replicates per simulation")
    parser.add_argument("--images", type=int, default=500)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(
        f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {args.sims} simulations, "
        f"{args.n} replicates, {args.images} test images; nominal coverage 95 %"
    )
    print(f"{'scenario':<24} {'seeds':>5} {'two-way bootstrap':>18} {'seed t + images':>16} {'width ratio t/boot':>19}")
    for name, sigmas in SCENARIOS.items():
        for n_seeds in (3, 5):
            generator = torch.Generator().manual_seed(n_seeds)
            results = [one_simulation(n_seeds, args.images, args.n, sigmas, generator, sim) for sim in range(args.sims)]
            boot_cover = sum(r[0][0] for r in results) / args.sims
            t_cover = sum(r[1][0] for r in results) / args.sims
            ratio = sum(r[1][1] for r in results) / sum(r[0][1] for r in results)
            print(f"{name:<24} {n_seeds:>5} {100 * boot_cover:>17.1f}% {100 * t_cover:>15.1f}% {ratio:>19.2f}")


if __name__ == "__main__":
    main()

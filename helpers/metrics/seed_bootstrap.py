"""Intervals that cover the training seed: a two-way (seeds × test images) paired bootstrap of the difference
between two models, and simultaneous max-T intervals (with Holm-adjusted p-values) over the rows of a table.

Why. The paired bootstrap of :func:`helpers.metrics.paired_bootstrap` resamples test images and holds the trained
models fixed: it answers "are *these* trained models different on this test distribution?". A claim about a
*loss* ("LS is worse than CE + TS") is a claim about retraining, and a retrained model moves: its seed is a second
source of variation. Here every replicate draws

1. S training seeds with replacement out of the S seeds (the *same* seed indices for both models: seed s of a loss
   and seed s of the reference share their data order and initialisation conventions, so the comparison stays
   paired), and
2. N test images with replacement (the same images for every model and seed: image difficulty cancels),

and records the mean over the drawn seeds of metric(model, seed, images) − metric(reference, seed, images). Seeds
and images are *crossed* (every seed is evaluated on the same test images), so this is the pigeonhole bootstrap of
Owen (2007, "The pigeonhole bootstrap", Ann. Appl. Stat. 1(2), eq. 2.3–2.5: resample the two factors
independently), which Owen shows to be conservative for the variance of a mean over a crossed design: with seed
effects σ_u², image effects σ_w² and seed × image noise σ_e², the estimator's variance is σ_u²/S + σ_w²/N +
σ_e²/(SN) and the replicates' about (1 − 1/S)σ_u²/S + σ_w²/N + (3 − 2/S)σ_e²/(SN), so where the seed × image
noise dominates the interval is up to √(3 − 2/S) times too wide, √2.6 ≈ 1.6 with 5 seeds
(tests/test_seed_bootstrap.py measures the factor 3 − 2/S); for
nested data the same two-stage scheme is Davison & Hinkley (1997, §3.8) and Ren et al. (2010, "Nonparametric
bootstrapping for hierarchical data", J. Appl. Stat. 37(9)). Assumptions: the seeds are exchangeable draws of the
training randomness, the test images exchangeable draws of the test distribution. With 3–5 seeds the seed stage is
coarse (a bootstrap of the mean of 5 values has only 126 distinct seed multisets, and understates their spread by a
factor √((S − 1)/S)): the interval is a better statement than one that ignores seeds, not an exact one. Measured
(``bench/bench_seed_interval_coverage.py``, 1,000 simulated crossed designs, one interval): where the seed effect
dominates, a 95 % interval covers 75 % of the time with 3 seeds and 86 % with 5; where it does not, 96–98 %. A
t-interval over the seeds (with the image-bootstrap variance added) covers ≥ 96 % there, 1.6–2.7 times wider.

Multiplicity. A table of K intervals at 95 % each would show about 0.05·K "differences" by chance.
:func:`max_t_adjust` replaces each row's interval by a simultaneous one: with each row's bootstrap standard error
se_r, the critical value c is the ``level`` quantile over replicates of max_r abs(θ*_r − θ̄*_r) / se_r, and the
interval is θ̂_r ± c·se_r, so that all K intervals cover together with probability ≈ ``level`` (the max-T method of
Westfall & Young 1993, §2.6, applied to bootstrap replicates). :func:`holm_adjust` gives Holm's (1979) step-down
adjusted p-values for the same rows, from the bootstrap p-values of :func:`bootstrap_p_value`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from helpers.metrics import stats
from helpers.metrics.bootstrapping import PairedBootstrapResult

__all__ = [
    "TWO_STAGE",
    "seed_counts",
    "two_stage_samples",
    "two_stage_comparisons",
    "max_t_adjust",
    "bootstrap_p_value",
    "holm_adjust",
]

#: what the interval of :func:`two_stage_comparisons` resamples, in words (table headers and notes)
TWO_STAGE = "two-way bootstrap over training seeds and test images"


def seed_counts(n_seeds: int, n: int, seed: int = 0) -> torch.Tensor:
    """(n, S) how often each of the S training seeds is drawn in each of the n replicates (S draws with replacement;
    every row sums to S). Drawn from a generator of its own seeded by ``seed``, so every comparison made with the
    same ``seed`` and the same number of seeds draws the same seeds (the comparisons stay jointly resampled)."""
    if isinstance(n_seeds, bool) or not isinstance(n_seeds, int) or n_seeds < 2:
        raise ValueError(
            f"resampling training seeds needs at least 2 seeds per model, got {n_seeds!r}: with one seed there is "
            "no spread over seeds to resample; use helpers.metrics.paired_bootstrap (test images only)"
        )
    generator = torch.Generator().manual_seed(10_007 * seed + 1)
    drawn = torch.randint(n_seeds, (n, n_seeds), generator=generator)
    return torch.zeros(n, n_seeds, dtype=torch.float64).scatter_add_(
        1, drawn, torch.ones(n, n_seeds, dtype=torch.float64)
    )


def two_stage_samples(per_seed_a: torch.Tensor, per_seed_b: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """(n,) replicate differences: for replicate b, Σ_s counts[b, s]·(a[s, b] − b[s, b]) / S, where ``per_seed_a``
    and ``per_seed_b`` are (S, n) metric values of each seed on the n image resamples and ``counts`` (n, S) the seed
    draws (:func:`seed_counts`). NaN where a drawn seed's value is NaN (an undefined metric on that resample)."""
    if per_seed_a.shape != per_seed_b.shape or per_seed_a.ndim != 2:
        raise ValueError(
            f"the two models need the same (seeds, resamples) shape to be paired seed by seed, got "
            f"{tuple(per_seed_a.shape)} and {tuple(per_seed_b.shape)}"
        )
    n_seeds, n = per_seed_a.shape
    if tuple(counts.shape) != (n, n_seeds):
        raise ValueError(f"counts must be (n, S) = ({n}, {n_seeds}), got {tuple(counts.shape)}")
    difference = (per_seed_a - per_seed_b).T.to(torch.float64)  # (n, S)
    undefined = torch.isnan(difference) & (counts > 0)
    samples = (counts * torch.nan_to_num(difference)).sum(1) / n_seeds
    samples[undefined.any(1)] = math.nan
    return samples


def two_stage_comparisons(
    probs_by_model: Mapping[str, Sequence[Any]],
    labels: Any,
    metric_fns: Mapping[str, Callable[..., float]],
    pairs: Sequence[tuple[str, str]],
    n: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[tuple[str, str], dict[str, PairedBootstrapResult]]:
    """{(model, reference): {metric: two-way bootstrap of model − reference}} for every pair (module docstring).

    Each model's probabilities are a list with one (N, C) tensor per training seed; a model and its reference must
    have the same number of seeds, in the same order (seed i of one is paired with seed i of the other). The image
    resamples are those of :func:`helpers.metrics.paired_comparisons` with the same ``n`` and ``seed``, the seed
    draws :func:`seed_counts`'s, so every pair and metric shares one set of replicates (which
    :func:`max_t_adjust` needs). Estimate: the mean over seeds of the difference on the full test set (as there);
    interval: percentile (``level``). Metrics of :data:`helpers.metrics.POINT_ESTIMATE_ONLY` are refused."""
    needed = stats.models_of_pairs(probs_by_model, pairs, level)
    for model, reference in pairs:
        sizes = (len(probs_by_model[model]), len(probs_by_model[reference]))
        if sizes[0] != sizes[1]:
            raise ValueError(
                f"{model} has {sizes[0]} training seeds and {reference} {sizes[1]}: the two-way bootstrap pairs seed "
                "i of one with seed i of the other; give both the same seeds"
            )
    results: dict[tuple[str, str], dict[str, PairedBootstrapResult]] = {tuple(pair): {} for pair in pairs}
    for metric_name, fn in metric_fns.items():
        if stats.point_estimate_only(metric_name, fn):
            raise ValueError(f"{metric_name} is reported as a point estimate only; it has no bootstrap interval")
        values = {
            model: stats.resampled_metric_per_seed(fn, list(probs_by_model[model]), labels, n=n, seed=seed)
            for model in needed
        }
        for model, reference in pairs:
            (full_a, per_seed_a), (full_b, per_seed_b) = values[model], values[reference]
            results[(model, reference)][metric_name] = stats.percentile_result(
                float(np.mean(full_a) - np.mean(full_b)),
                two_stage_samples(per_seed_a, per_seed_b, seed_counts(len(full_a), n, seed)),
                level,
                (len(full_a), len(full_b)),
                metric_name,
                (model, reference),
            )
    return results


def max_t_adjust(
    results: Mapping[Hashable, PairedBootstrapResult], level: float = 0.95
) -> tuple[dict[Hashable, PairedBootstrapResult], float]:
    """Simultaneous intervals for every row of ``results`` (module docstring): ({row: result with low/high = θ̂ ±
    c·se}, c). Every result must come from the same replicates (one :func:`two_stage_comparisons` or
    :func:`helpers.metrics.paired_comparisons` call with one ``seed`` and ``n``); replicates where some row is NaN
    are left out of c. A row whose replicates do not vary (se = 0) keeps a zero-width interval at its estimate."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if not results:
        raise ValueError("max_t_adjust needs at least one row")
    keys = list(results)
    lengths = {int(results[key].samples.numel()) for key in keys}
    if len(lengths) != 1:
        raise ValueError(
            f"the rows have different numbers of replicates {sorted(lengths)}: max-T needs every row computed on the "
            "same bootstrap replicates (one call with one n and seed)"
        )
    samples = torch.stack([results[key].samples.to(torch.float64) for key in keys])  # (K, n)
    joint = samples[:, ~torch.isnan(samples).any(0)]
    if joint.shape[1] < 2:
        raise ValueError("fewer than 2 replicates are defined for every row: no simultaneous interval")
    se = joint.std(dim=1)
    centred = (joint - joint.mean(dim=1, keepdim=True)).abs()
    scaled = torch.where(se[:, None] > 0, centred / se[:, None].clamp_min(1e-300), torch.zeros_like(centred))
    critical = float(torch.quantile(scaled.max(dim=0).values, level))
    adjusted = {
        key: dataclasses.replace(
            results[key],
            low=results[key].estimate - critical * float(se[i]),
            high=results[key].estimate + critical * float(se[i]),
            level=level,
        )
        for i, key in enumerate(keys)
    }
    return adjusted, critical


def bootstrap_p_value(result: PairedBootstrapResult) -> float:
    """Two-sided bootstrap p-value of "the difference is 0": twice the smaller share of replicates on either side of
    0 (ties counted half), each share taken as (k + 1)/(B + 1) so that a finite number of replicates never gives
    p = 0 (Davison & Hinkley 1997, eq. 4.11), at most 1."""
    valid = result.samples[~torch.isnan(result.samples)]
    if valid.numel() == 0:
        raise ValueError("no defined replicate: no bootstrap p-value")
    below = float((valid < 0).sum() + 0.5 * (valid == 0).sum())
    smaller = min(below, valid.numel() - below)
    return min(1.0, 2.0 * (smaller + 1.0) / (valid.numel() + 1.0))


def holm_adjust(p_values: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Holm's (1979) step-down adjusted p-values: sort the K p-values ascending, multiply the i-th (from 0) by
    K − i, take the running maximum, cap at 1. A row is significant at α family-wise when its adjusted p ≤ α."""
    for key, value in p_values.items():
        if not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
            raise ValueError(f"p-value of {key!r} must be a number in [0, 1], got {value!r}")
    order = sorted(p_values, key=p_values.__getitem__)
    adjusted, running = {}, 0.0
    for i, key in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * p_values[key]))
        adjusted[key] = running
    return adjusted

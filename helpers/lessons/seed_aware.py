"""The primary tables' intervals: over training seeds and test images, simultaneous over the table's rows.

A primary table (06 §3, 11 §2, 12 §5) answers "does a loss beat the baseline?", a question about retraining the
loss, so its intervals resample the training seeds as well as the test images
(:func:`helpers.metrics.two_stage_comparisons`), and since the table shows K intervals at once, each is widened to a
simultaneous max-T interval (:func:`helpers.metrics.max_t_adjust`): all K cover together with probability ≈ 95 %,
so a "beats" or "worse" is not one of the ≈ 0.05·K that K unadjusted intervals would show by chance. The Holm-
adjusted bootstrap p-values of the same rows go into the results JSON beside them. The image-only intervals stay
in the notebooks' expert folds, which say what they judge (these trained models, not the loss).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from helpers import metrics
from helpers.metrics import PairedBootstrapResult

__all__ = ["SeedAwareDifferences", "seed_aware_differences", "METHOD"]

#: how the primary tables' intervals are made, in words (table notes and results JSONs)
METHOD = (
    f"{metrics.TWO_STAGE} (Owen 2007's pigeonhole bootstrap: seeds resampled paired across models, images shared), "
    "simultaneous max-T intervals over every interval of the table (Westfall & Young 1993)"
)

Pair = tuple[str, str]


@dataclass
class SeedAwareDifferences:
    """The adjusted results ({(model, reference): {metric: result}}, the shape of
    :func:`helpers.metrics.paired_comparisons`), the unadjusted two-way ones, the max-T critical value, and the
    Holm-adjusted bootstrap p-values per (pair, metric)."""

    results: dict[Pair, dict[str, PairedBootstrapResult]]
    unadjusted: dict[Pair, dict[str, PairedBootstrapResult]]
    critical: float
    n_resamples: int
    level: float
    seeds: dict[str, int] = field(default_factory=dict)
    holm_p: dict[tuple[Pair, str], float] = field(default_factory=dict)

    @property
    def n_intervals(self) -> int:
        return sum(len(by_metric) for by_metric in self.results.values())

    def note(self) -> str:
        """One paragraph for under the table: what the intervals cover and how they are adjusted."""
        seeds = sorted(set(self.seeds.values()))
        seed_text = " or ".join(map(str, seeds))
        resampled = (
            f"{metrics.TWO_STAGE} ({self.n_resamples} replicates, each drawing {seed_text} training seeds with "
            "replacement, the same for every model, and the test images)"
            if min(seeds) > 1
            else f"the test images only ({self.n_resamples} replicates; one training seed, so none to resample)"
        )
        return textwrap.fill(
            f"Intervals: {resampled}, simultaneous over the "
            f"{self.n_intervals} intervals of the table (max-T, critical value {self.critical:.2f} standard errors "
            f"where one interval alone would use 1.96): all cover together with probability ≈ "
            f"{100 * self.level:.0f} %. 'worse' / 'beats' where an interval excludes 0, else 'no difference "
            "detected'.",
            110,
        )

    def record(self) -> dict[str, Any]:
        """The method and its numbers for the results JSON (the rows themselves go into ``primary_question``)."""
        return {
            "method": METHOD,
            "level": self.level,
            "n_resamples": self.n_resamples,
            "n_intervals": self.n_intervals,
            "max_t_critical": self.critical,
            "seeds_per_model": self.seeds,
            "holm_adjusted_p": {
                f"{model} − {reference}: {metric}": value for ((model, reference), metric), value in self.holm_p.items()
            },
        }


def seed_aware_differences(
    probs_by_model: Mapping[str, Sequence[Any]],
    labels: Any,
    metric_fns: Mapping[str, Callable[..., float]],
    pairs: Sequence[Pair],
    n: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    targets: Mapping[str, Any] | None = None,
) -> SeedAwareDifferences:
    """Every (pair, metric) of a primary table by the two-way bootstrap, adjusted together (module docstring).
    ``targets`` replaces the labels for a metric (e.g. the exact posteriors for the RMS error of notebook 11).
    Where a model has a single training seed (the smoke profile) there is no seed to resample: the intervals
    resample the test images only (:func:`helpers.metrics.paired_comparisons`), still adjusted together, and
    :meth:`SeedAwareDifferences.note` says so."""
    unadjusted: dict[Pair, dict[str, PairedBootstrapResult]] = {tuple(pair): {} for pair in pairs}
    one_seed = any(len(probs_by_model[model]) < 2 for pair in pairs for model in pair)
    compare = metrics.paired_comparisons if one_seed else metrics.two_stage_comparisons
    for name, fn in metric_fns.items():
        target = (targets or {}).get(name, labels)
        found = compare(probs_by_model, target, {name: fn}, pairs, n=n, seed=seed, level=level)
        for pair, by_metric in found.items():
            unadjusted[pair][name] = by_metric[name]
    flat = {(pair, name): result for pair, by_metric in unadjusted.items() for name, result in by_metric.items()}
    adjusted, critical = metrics.max_t_adjust(flat, level=level)
    holm = metrics.holm_adjust({key: metrics.bootstrap_p_value(result) for key, result in flat.items()})
    results: dict[Pair, dict[str, PairedBootstrapResult]] = {tuple(pair): {} for pair in pairs}
    for (pair, name), result in adjusted.items():
        results[pair][name] = result
    seeds = {model: len(probs_by_model[model]) for pair in pairs for model in pair}
    return SeedAwareDifferences(results, unadjusted, critical, n, level, seeds, holm)

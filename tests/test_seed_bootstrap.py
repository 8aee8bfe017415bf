"""The two-way (seeds × images) paired bootstrap and the simultaneous intervals, against a crossed design whose
truth is known: per (seed, image) Brier scores built as population effect + seed effect + image effect + noise."""

import math

import numpy as np
import pytest
import torch

from helpers import metrics
from helpers.metrics import seed_bootstrap


def _probs_with_brier(scores: np.ndarray) -> torch.Tensor:
    """(N, 2) probabilities whose per-image Brier score against label 0 is ``scores`` (Brier = 2q² for p = (1−q, q))."""
    q = torch.as_tensor(np.sqrt(np.clip(scores, 1e-6, 1.9) / 2.0), dtype=torch.float64)
    return torch.stack([1.0 - q, q], dim=1)


def _crossed_design(rng, n_seeds, n_images, effect, seed_sd, image_sd=0.08, noise_sd=0.02, effect_by_image_sd=0.0):
    """A's and B's per-seed probabilities on the same images; the true mean difference of their Brier scores is
    ``effect`` (seed effects of A are drawn around it with sd ``seed_sd``; ``effect_by_image_sd``: an image-specific
    part of A's effect, the same in every seed, that pairing does not cancel; ``image_sd``: image difficulty shared
    by both models, which it does)."""
    image = rng.normal(0.0, image_sd, n_images)
    seed_effect = rng.normal(effect, seed_sd, n_seeds)
    image_effect = rng.normal(0.0, effect_by_image_sd, n_images)
    model_a, model_b = [], []
    for s in range(n_seeds):
        base = 0.4 + image + rng.normal(0, 0.02, n_images)  # this seed's shared training noise, on both models
        model_a.append(_probs_with_brier(base + seed_effect[s] + image_effect + rng.normal(0, noise_sd, n_images)))
        model_b.append(_probs_with_brier(base + rng.normal(0, noise_sd, n_images)))
    return {"a": model_a, "b": model_b}, torch.zeros(n_images, dtype=torch.long)


def _intervals(probs, labels, n=300, seed=0):
    two_way = seed_bootstrap.two_stage_comparisons(
        probs, labels, {"brier": metrics.brier}, [("a", "b")], n=n, seed=seed
    )
    images_only = metrics.paired_comparisons(probs, labels, {"brier": metrics.brier}, [("a", "b")], n=n, seed=seed)
    return two_way[("a", "b")]["brier"], images_only[("a", "b")]["brier"]


def _coverage(seed_sd, datasets=120, level=0.9, n_seeds=10, **design):
    rng = np.random.default_rng(1)
    covered = {"two-way": 0, "images": 0}
    widths = {"two-way": [], "images": []}
    for index in range(datasets):
        probs, labels = _crossed_design(rng, n_seeds, 200, effect=0.02, seed_sd=seed_sd, **design)
        two_way, images = (
            seed_bootstrap.two_stage_comparisons(
                probs, labels, {"brier": metrics.brier}, [("a", "b")], n=300, seed=index, level=level
            )[("a", "b")]["brier"],
            metrics.paired_comparisons(
                probs, labels, {"brier": metrics.brier}, [("a", "b")], n=300, seed=index, level=level
            )[("a", "b")]["brier"],
        )
        for name, result in (("two-way", two_way), ("images", images)):
            covered[name] += result.low <= 0.02 <= result.high
            widths[name].append(result.high - result.low)
    return {name: count / datasets for name, count in covered.items()}, {
        k: float(np.mean(v)) for k, v in widths.items()
    }


def test_with_seed_variance_the_two_way_interval_covers_and_the_image_only_interval_does_not():
    coverage, _ = _coverage(seed_sd=0.03)
    assert coverage["two-way"] >= 0.8, coverage  # nominal 0.9; 10 seeds understate their spread by √(9/10)
    assert coverage["images"] <= 0.5, coverage  # the seed-to-seed spread is invisible to it


def test_without_seed_variance_the_two_way_interval_is_about_as_wide_as_the_image_only_one():
    # an image-level effect, no seed effect and little seed × image noise (which the two-way bootstrap counts more
    # than once, Owen 2007: there it is conservative)
    coverage, widths = _coverage(seed_sd=0.0, datasets=40, effect_by_image_sd=0.05, noise_sd=0.002)
    assert coverage["images"] >= 0.75 and coverage["two-way"] >= 0.75, coverage
    assert 0.8 <= widths["two-way"] / widths["images"] <= 1.6, widths


def test_the_image_effect_shared_by_both_models_cancels_in_the_paired_difference():
    rng = np.random.default_rng(3)
    noisy, _ = _crossed_design(rng, 5, 400, effect=0.02, seed_sd=0.01, image_sd=0.3)
    rng = np.random.default_rng(3)
    calm, labels = _crossed_design(rng, 5, 400, effect=0.02, seed_sd=0.01, image_sd=0.0)
    wide, _ = _intervals(noisy, labels)
    narrow, _ = _intervals(calm, labels)
    assert (wide.high - wide.low) < 1.5 * (narrow.high - narrow.low)


def test_the_estimate_is_the_seed_mean_difference_and_replicates_are_shared_across_pairs_and_metrics():
    rng = np.random.default_rng(4)
    probs, labels = _crossed_design(rng, 3, 100, effect=0.05, seed_sd=0.01)
    probs["c"] = probs["b"]
    results = seed_bootstrap.two_stage_comparisons(
        probs, labels, {"brier": metrics.brier, "nll": metrics.nll}, [("a", "b"), ("c", "b")], n=50, seed=2
    )
    expected = np.mean([metrics.brier(p, labels) for p in probs["a"]]) - np.mean(
        [metrics.brier(p, labels) for p in probs["b"]]
    )
    assert results[("a", "b")]["brier"].estimate == pytest.approx(expected)
    assert torch.equal(results[("c", "b")]["brier"].samples, torch.zeros(50, dtype=torch.float64))
    again = seed_bootstrap.two_stage_comparisons(probs, labels, {"brier": metrics.brier}, [("a", "b")], n=50, seed=2)
    assert torch.equal(again[("a", "b")]["brier"].samples, results[("a", "b")]["brier"].samples)


def test_two_stage_samples_weight_each_seed_by_how_often_it_was_drawn():
    a = torch.tensor([[1.0, 1.0], [3.0, 3.0], [5.0, 5.0]])  # 3 seeds, 2 replicates
    b = torch.zeros(3, 2)
    counts = torch.tensor([[3.0, 0.0, 0.0], [0.0, 1.0, 2.0]])
    assert seed_bootstrap.two_stage_samples(a, b, counts).tolist() == [1.0, (3.0 + 10.0) / 3]
    a[2, 1] = math.nan
    assert math.isnan(seed_bootstrap.two_stage_samples(a, b, counts)[1])  # a drawn seed undefined: NaN
    a[2, 1], a[2, 0] = 5.0, math.nan
    assert seed_bootstrap.two_stage_samples(a, b, counts)[0] == 1.0  # an undrawn seed's NaN does not matter


def test_seed_counts_draw_every_seed_with_replacement_reproducibly():
    counts = seed_bootstrap.seed_counts(5, 2000, seed=7)
    assert counts.shape == (2000, 5) and torch.all(counts.sum(1) == 5)
    assert torch.equal(counts, seed_bootstrap.seed_counts(5, 2000, seed=7))
    assert counts.mean(0).tolist() == pytest.approx([1.0] * 5, abs=0.08)
    assert (counts == 5).any(1).sum() > 0  # one seed drawn five times happens


def test_max_t_intervals_cover_every_row_together_and_are_wider_than_unadjusted():
    rng = np.random.default_rng(5)
    rows, datasets, level, truth = 6, 60, 0.9, 0.0
    family_covered, unadjusted_covered, ratios = 0, 0, []
    for index in range(datasets):
        probs, labels = {}, None
        for r in range(rows):
            # images dominate here, where the bootstrap itself is accurate; max-T is what is tested
            pair, labels = _crossed_design(
                rng, 4, 150, effect=truth, seed_sd=0.0, effect_by_image_sd=0.05, noise_sd=0.002
            )
            probs[f"a{r}"], probs[f"b{r}"] = pair["a"], pair["b"]
        results = seed_bootstrap.two_stage_comparisons(
            probs,
            labels,
            {"brier": metrics.brier},
            [(f"a{r}", f"b{r}") for r in range(rows)],
            n=300,
            seed=index,
            level=level,
        )
        flat = {pair: by_metric["brier"] for pair, by_metric in results.items()}
        adjusted, critical = seed_bootstrap.max_t_adjust(flat, level=level)
        family_covered += all(r.low <= truth <= r.high for r in adjusted.values())
        unadjusted_covered += all(r.low <= truth <= r.high for r in flat.values())
        ratios += [(adjusted[k].high - adjusted[k].low) / (flat[k].high - flat[k].low) for k in flat]
        assert critical > 1.645  # above the one-row two-sided 90 % normal quantile
    assert family_covered / datasets >= 0.75, family_covered
    assert family_covered > unadjusted_covered
    assert np.mean(ratios) > 1.2


def test_max_t_of_one_row_is_about_the_symmetric_normal_interval():
    result = metrics.PairedBootstrapResult(
        0.0, -1.0, 1.0, 0.95, torch.randn(20000, generator=torch.Generator().manual_seed(0), dtype=torch.float64), 3, 3
    )
    adjusted, critical = seed_bootstrap.max_t_adjust({"row": result})
    assert critical == pytest.approx(1.96, abs=0.05)
    assert adjusted["row"].low == pytest.approx(-1.96, abs=0.06)


def test_holm_matches_a_hand_computation_and_bootstrap_p_values_read_the_replicates():
    adjusted = seed_bootstrap.holm_adjust({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.5})
    # sorted 0.01, 0.03, 0.04, 0.5 → ×4, ×3, ×2, ×1 = 0.04, 0.09, 0.08, 0.5 → running max 0.04, 0.09, 0.09, 0.5
    assert adjusted == pytest.approx({"a": 0.04, "c": 0.09, "b": 0.09, "d": 0.5})
    samples = torch.tensor([-1.0] * 3 + [1.0] * 96, dtype=torch.float64)
    result = metrics.PairedBootstrapResult(1.0, 0.5, 1.5, 0.95, samples, 3, 3)
    assert seed_bootstrap.bootstrap_p_value(result) == pytest.approx(2 * 4 / 100)
    never = metrics.PairedBootstrapResult(1.0, 0.5, 1.5, 0.95, torch.ones(99, dtype=torch.float64), 3, 3)
    assert seed_bootstrap.bootstrap_p_value(never) == pytest.approx(2 / 100)  # never 0 with finite replicates
    with pytest.raises(ValueError, match="p-value of 'x' must be a number in"):
        seed_bootstrap.holm_adjust({"x": 1.5})


def test_bad_inputs_are_named():
    rng = np.random.default_rng(6)
    probs, labels = _crossed_design(rng, 3, 50, effect=0.0, seed_sd=0.0)
    probs["short"] = probs["b"][:2]
    with pytest.raises(ValueError, match="has 3 training seeds and short 2"):
        seed_bootstrap.two_stage_comparisons(probs, labels, {"brier": metrics.brier}, [("a", "short")], n=20)
    probs["one"], probs["other"] = probs["a"][:1], probs["b"][:1]
    with pytest.raises(ValueError, match="at least 2 seeds"):
        seed_bootstrap.two_stage_comparisons(probs, labels, {"brier": metrics.brier}, [("one", "other")], n=20)
    with pytest.raises(ValueError, match="not in probs_by_model"):
        seed_bootstrap.two_stage_comparisons(probs, labels, {"brier": metrics.brier}, [("a", "nobody")], n=20)
    with pytest.raises(ValueError, match="point estimate only"):
        seed_bootstrap.two_stage_comparisons(probs, labels, {"debiased_ece": metrics.debiased_ece}, [("a", "b")])
    short = metrics.PairedBootstrapResult(0.0, 0.0, 0.0, 0.95, torch.zeros(5, dtype=torch.float64), 3, 3)
    long = metrics.PairedBootstrapResult(0.0, 0.0, 0.0, 0.95, torch.zeros(6, dtype=torch.float64), 3, 3)
    with pytest.raises(ValueError, match="same bootstrap replicates"):
        seed_bootstrap.max_t_adjust({"x": short, "y": long})


def test_the_primary_tables_differences_are_adjusted_together_and_recorded():
    from helpers.lessons import loss_comparison, seed_aware

    rng = np.random.default_rng(8)
    probs, labels = {}, None
    for recipe, n_seeds in (("r1", 5), ("r2", 3)):  # the over-fitting recipe keeps three seeds
        pair, labels = _crossed_design(rng, n_seeds, 120, effect=0.03, seed_sd=0.01)
        probs[f"{recipe}/loss"], probs[f"{recipe}/ref"] = pair["a"], pair["b"]
    pairs = [("r1/loss", "r1/ref"), ("r2/loss", "r2/ref")]
    found = seed_aware.seed_aware_differences(
        probs, labels, {"brier": metrics.brier, "nll": metrics.nll}, pairs, n=200, seed=0
    )
    assert found.n_intervals == 4 and found.critical > 1.96
    for pair in pairs:
        for name in ("brier", "nll"):
            adjusted, raw = found.results[pair][name], found.unadjusted[pair][name]
            assert adjusted.estimate == raw.estimate and adjusted.high - adjusted.low > raw.high - raw.low
    record = found.record()
    assert record["seeds_per_model"] == {"r1/loss": 5, "r1/ref": 5, "r2/loss": 3, "r2/ref": 3}
    assert len(record["holm_adjusted_p"]) == 4 and record["max_t_critical"] == found.critical
    assert "simultaneous over the 4 intervals" in " ".join(found.note().split())
    table = loss_comparison.primary_table(
        {("r1/loss", "r1/ref"): found.results[pairs[0]]}, ["r1"], ["loss"], "ref", ("nll",), "simultaneous 95 %"
    )
    assert table.columns[0] == ("r1", "Δ NLL [simultaneous 95 %]")


def test_the_shift_table_adjusts_every_test_set_model_and_metric_together():
    from helpers.calibration import shift

    rng = np.random.default_rng(9)
    probs, labels = {}, {}
    for name in ("in distribution", "shifted"):
        pair, labels[name] = _crossed_design(rng, 3, 100, effect=0.04, seed_sd=0.005)
        probs[name] = {"model": pair["a"], "reference": pair["b"]}
    probs["shifted"]["only here"] = probs["shifted"]["model"]
    found, critical, resampled = shift.seed_aware_shift_differences(
        probs, labels, {"brier": metrics.brier}, ["model", "only here"], "reference", n=200
    )
    assert set(found) == {"in distribution", "shifted"} and set(found["shifted"]) == {"model", "only here"}
    assert critical > 1.96  # three intervals together
    result = found["in distribution"]["model"]["brier"]
    assert result.low > 0  # a clear effect stays "worse" (higher Brier) after the adjustment
    assert resampled == metrics.TWO_STAGE
    table = shift.shift_difference_table(found, "reference", ["brier"], critical=critical, resampled=resampled)
    assert "simultaneous over the table's 3 intervals" in " ".join(table.note.split())


def test_with_one_training_seed_the_primary_intervals_resample_images_only_and_say_so():
    from helpers.lessons import seed_aware

    rng = np.random.default_rng(10)
    pair, labels = _crossed_design(rng, 1, 80, effect=0.03, seed_sd=0.0)
    found = seed_aware.seed_aware_differences(pair, labels, {"brier": metrics.brier}, [("a", "b")], n=100)
    images_only = metrics.paired_comparisons(pair, labels, {"brier": metrics.brier}, [("a", "b")], n=100)
    assert torch.equal(found.unadjusted[("a", "b")]["brier"].samples, images_only[("a", "b")]["brier"].samples)
    assert "the test images only" in " ".join(found.note().split())


def _variance_ratio(n_seeds, datasets, **design):
    """Var(two-way replicates) / Var(image-only replicates), each averaged over ``datasets`` crossed designs."""
    rng = np.random.default_rng(11)
    two_way, images = [], []
    for index in range(datasets):
        probs, labels = _crossed_design(rng, n_seeds, 200, effect=0.02, seed_sd=0.0, **design)
        both, fixed_seeds = _intervals(probs, labels, n=400, seed=index)
        two_way.append(float(both.samples.var()))
        images.append(float(fixed_seeds.samples.var()))
    return float(np.mean(two_way) / np.mean(images))


@pytest.mark.parametrize("n_seeds", [5, 10])
def test_the_pigeonhole_excess_is_the_seed_by_image_noise_counted_3_minus_2_over_s_times(n_seeds):
    # Only seed × image noise (no seed effect, the image effect shared by both models): the image-only bootstrap has
    # the right variance σ_e²/(SN), the two-way one E[c_s² m_i²] − 1 = (2 − 1/S)·2 − 1 = 3 − 2/S times it (c_s a
    # seed's multinomial count, m_i an image's): the over-count the module docstring states (Owen 2007). A nested
    # scheme (images drawn anew for each seed) would give about 2 − 1/S, no seed stage 1. With 3 seeds the ratio
    # varies too much between data sets (sd ≈ 40 % of it) to test it this fast.
    expected = 3.0 - 2.0 / n_seeds
    assert _variance_ratio(n_seeds, 40, noise_sd=0.05) == pytest.approx(expected, rel=0.15)
    # an image-level effect on the difference, the same in every seed, is counted once by both
    assert _variance_ratio(n_seeds, 10, noise_sd=0.002, effect_by_image_sd=0.05) == pytest.approx(1.0, abs=0.1)

"""helpers.calibration.shift: the prior-shift correction against exact posteriors, EM's prior estimate, the oracle
temperature
and the shift study's per-test-set summaries."""

import numpy as np
import pandas as pd
import pytest
import torch

from helpers import data
from helpers.calibration import TemperatureScaling, shift


def gaussian_posteriors(prior, n, seed=0):
    """Labels drawn from ``prior``, x | y ~ N(mu_y, 1) in 1-d; the exact posterior under ``prior`` and the
    posterior a model trained under a uniform prior would give (the likelihoods normalised)."""
    rng = np.random.default_rng(seed)
    mu = np.array([-2.0, 0.0, 2.0])
    y = rng.choice(3, size=n, p=prior)
    x = rng.normal(mu[y], 1.0)
    likelihood = np.exp(-0.5 * (x[:, None] - mu[None, :]) ** 2)
    exact = likelihood * np.asarray(prior)
    return (
        torch.from_numpy(y),
        torch.from_numpy(exact / exact.sum(1, keepdims=True)),
        torch.from_numpy(likelihood / likelihood.sum(1, keepdims=True)),
    )


def test_adjusting_a_uniform_prior_model_to_the_true_prior_gives_the_exact_posterior():
    prior = [0.7, 0.2, 0.1]
    _, exact, uniform_model = gaussian_posteriors(prior, 500)
    adjusted = shift.adjust_to_prior(uniform_model, [1, 1, 1], prior)
    assert torch.allclose(adjusted, exact, atol=1e-12)
    assert torch.allclose(shift.adjust_to_prior(exact, prior, prior), exact)


def test_em_recovers_the_shifted_prior_from_unlabelled_images():
    prior = np.array([0.6, 0.3, 0.1])
    labels, _, uniform_model = gaussian_posteriors(prior, 20_000, seed=1)
    estimate, iterations = shift.em_target_prior(uniform_model, [1 / 3] * 3)
    assert iterations > 1
    assert np.allclose(estimate.numpy(), prior, atol=0.02)
    assert not np.allclose(uniform_model.mean(0).numpy(), prior, atol=0.02)  # the plain average is biased


def test_priors_are_checked():
    with pytest.raises(ValueError, match="target_prior must be 3 finite positive"):
        shift.adjust_to_prior(torch.full((2, 3), 1 / 3), [1, 1, 1], [0.5, 0.5, 0.0])
    with pytest.raises(RuntimeError, match="did not converge"):
        shift.em_target_prior(torch.tensor([[0.9, 0.1], [0.2, 0.8]]), [0.5, 0.5], max_iter=1)


def test_the_oracle_temperature_is_fitted_without_the_image_it_scores():
    torch.manual_seed(0)
    labels = torch.randint(0, 4, (400,))
    logits = 3.0 * torch.nn.functional.one_hot(labels, 4).float() + torch.randn(400, 4)
    logits[:200] *= 4.0  # the two halves want different temperatures
    probs, temperatures = shift.crossfit_temperature(logits, labels, folds=2, seed=0)
    assert len(temperatures) == 2 and probs.shape == (400, 4)
    fold_of = torch.empty(400, dtype=torch.long)
    generator = torch.Generator().manual_seed(0)
    for k in torch.unique(labels):
        members = torch.nonzero(labels == k)[:, 0]
        members = members[torch.randperm(members.numel(), generator=generator)]
        fold_of[members] = torch.arange(members.numel()) % 2
    other = fold_of != 0
    expected = TemperatureScaling().fit(logits[other], labels[other]).transform(logits[~other]).double()
    assert torch.allclose(probs[~other], expected)
    with pytest.raises(ValueError, match="at least 2"):
        shift.crossfit_temperature(logits, labels, folds=1)


class FakeRun:
    def __init__(self, val_logits, test_logits):
        self.val_logits, self.test_logits = val_logits, test_logits
        self.test_probs = torch.softmax(test_logits, 1)


def tiny_shift_bundle(n=120, k=3):
    torch.manual_seed(0)
    split = lambda m: data.Split(torch.zeros(m, 3, 8, 8, dtype=torch.uint8), torch.arange(m) % k)  # noqa: E731
    meta = pd.DataFrame({"test_set": ["in_distribution"] * (n // 2) + ["isic2018_test"] * (n // 2)})
    return data.DatasetBundle(
        name="tiny",
        task="multi-class",
        class_names=["a", "b", "c"],
        train=split(n),
        val=split(n),
        test=split(n),
        source="memory",
        licence="none",
        image_size=8,
        metadata={"train": None, "val": None, "test": meta},
    )


def test_model_probabilities_cover_every_model_and_test_set():
    bundle = tiny_shift_bundle()
    runs = {
        (recipe, loss, seed): FakeRun(
            torch.randn(120, 3) + 2 * torch.nn.functional.one_hot(bundle.val.labels, 3), torch.randn(120, 3)
        )
        for recipe in ("well-regularised",)
        for loss in ("cross-entropy", "LS α=0.1")
        for seed in (0, 1)
    }
    probs, extra = shift.model_probabilities(runs, bundle, torch.arange(0, 120, 2), posthoc_max_iter=20)
    assert list(probs) == ["in_distribution", "isic2018_test"]
    models = probs["isic2018_test"]
    assert "well-regularised/LS α=0.1 + TS" in models and "well-regularised/cross-entropy + TS + prior (EM)" in models
    assert "well-regularised/LS α=0.1 + TS + prior (EM)" not in models
    assert "well-regularised/cross-entropy + vector scaling + prior (EM)" in models
    for suffix in (shift.PRIOR_MAP, shift.PRIOR_BBSE, shift.PRIOR_EM):  # issue 27: MAP-EM and BBSE beside EM
        assert f"well-regularised/cross-entropy{suffix}" in models
        vectors = extra["priors"][f"well-regularised/cross-entropy{suffix}"]["isic2018_test"]
        assert len(vectors) == 2 and all(abs(sum(v) - 1) < 1e-9 and len(v) == 3 for v in vectors)
    # issue 27 (1): π_s is the mean temperature-scaled forecast on the calibration half, a fixed point of EM there
    ce = runs["well-regularised", "cross-entropy", 0]
    cal = torch.arange(0, 120, 2)
    scaled_cal = TemperatureScaling().fit(ce.val_logits[cal], bundle.val.labels[cal]).transform(ce.val_logits[cal])
    pi_s = extra["mean_forecast_priors"]["well-regularised/cross-entropy + TS"][0]
    assert torch.allclose(torch.tensor(pi_s, dtype=torch.float64), scaled_cal.double().mean(0), atol=1e-6)
    assert shift.label_shift.em_fixed_point_gap(scaled_cal.double(), pi_s) < 1e-6
    gaps = extra["em_fixed_point_gaps"]["well-regularised/cross-entropy + TS"]
    assert len(gaps["mean forecast"]) == 2 and max(gaps["mean forecast"]) < 1e-6 < min(gaps["label frequencies"])
    em = torch.as_tensor(extra["priors"]["well-regularised/cross-entropy + TS + prior (EM)"]["isic2018_test"][0])
    index = data.test_sets(bundle)["isic2018_test"]
    expected = shift.adjust_to_prior(probs["isic2018_test"]["well-regularised/cross-entropy + TS"][0], pi_s, em)
    assert torch.allclose(models["well-regularised/cross-entropy + TS + prior (EM)"][0], expected)
    assert index.shape == (60,)
    assert all(len(seeds) == 2 and seeds[0].shape == (60, 3) for seeds in models.values())
    assert set(extra["temperatures"]["well-regularised/cross-entropy"]) == {
        "validation",
        "in_distribution",
        "isic2018_test",
    }
    labels = {name: bundle.test.labels[index] for name, index in data.test_sets(bundle).items()}
    from helpers import metrics

    summaries = shift.shift_summaries(probs, labels, {"accuracy": metrics.accuracy, "nll": metrics.nll})
    assert summaries["well-regularised/cross-entropy"]["isic2018_test"]["nll"]["per_seed"][1] == pytest.approx(
        metrics.nll(probs["isic2018_test"]["well-regularised/cross-entropy"][1], labels["isic2018_test"])
    )
    table = shift.shift_table(
        summaries,
        ["well-regularised/cross-entropy", "nobody"],
        [("accuracy", "in_distribution"), ("nll", "isic2018_test")],
        set_labels={"isic2018_test": "ISIC 2018 test"},
    )
    assert list(table.columns) == ["accuracy (%), in_distribution", "NLL, ISIC 2018 test"]
    assert table.iloc[1].tolist() == ["—", "—"]
    differences = shift.shift_differences(
        probs,
        labels,
        {"nll": metrics.nll},
        ["well-regularised/LS α=0.1 + TS"],
        "well-regularised/cross-entropy + TS",
        n=50,
    )
    result = shift.shift_difference_table(differences, "CE + TS", ["nll"])
    assert result.n_comparisons == 2 and result.table.shape == (1, 2)
    record = shift.results_block(differences, "CE + TS")
    assert set(record["isic2018_test"]["well-regularised/LS α=0.1 + TS − CE + TS"]["nll"]) >= {"estimate", "low"}


def test_the_across_test_sets_figure_draws_one_marker_per_model_and_test_set():
    import matplotlib

    matplotlib.use("Agg")
    from helpers.plots import shift_plots

    summary = lambda mean: {"ece": {"per_seed": [mean], "mean": mean, "sd": 0.01}}  # noqa: E731
    summaries = {"CE": {"a": summary(0.1), "b": summary(0.2)}, "CE + TS": {"a": summary(0.02)}}
    figure = shift_plots.metric_across_test_sets(
        summaries, ["CE", "CE + TS"], ["a", "b"], "ece", set_labels={"a": "in distribution"}
    )
    ax = figure.axes[0]
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == ["in distribution", "b"]
    points = [
        tuple(np.round(np.asarray(line.get_xdata(), float), 3)) for line in ax.lines if line.get_marker() in ("o", "s")
    ]
    assert points == [(10.0, 2.0), (20.0,)]  # test set "a": CE then CE + TS; "b": CE only
    assert ax.get_xlabel().startswith("ECE (%)")
    assert {t.get_text() for t in ax.get_yticklabels()} == {"CE", "CE + TS"}


def test_class_share_table_gives_percentages_and_sizes():
    table = shift.class_share_table({"a": torch.tensor([0, 0, 1, 2]), "b": torch.tensor([1])}, ["x", "y", "z"])
    assert table.loc["a"].tolist() == [50.0, 25.0, 25.0, 4]
    assert table.loc["b", "x"] == 0.0 and table.loc["b", "images"] == 1


def test_temperature_and_prior_tables_summarise_over_seeds():
    table = shift.temperature_table({"r/CE": {"validation": [1.5, 1.7], "b": [2.0, 2.0]}}, {"b": "ISIC"})
    assert table.loc["r/CE"].tolist() == ["1.60 ± 0.14", "2.00 ± 0.00"]
    assert list(table.columns) == ["validation (HAM10000)", "ISIC (oracle)"]
    vienna = shift.temperature_table({"r/CE": {"validation": [1.0]}}, validation_label="validation (Vienna)")
    assert list(vienna.columns) == ["validation (Vienna)"]
    priors = shift.prior_estimate_table(
        {"r/CE": {"b": [[0.2, 0.8], [0.3, 0.7]]}}, {"b": torch.tensor([0, 1, 1, 1])}, ["mel", "nv"], "mel", [0.1, 0.9]
    )
    assert priors.loc[("CE", "b")].tolist() == [10.0, 25.0, "25.0 ± 7.1"]
    forecasts = {"b": {"r/CE": [torch.tensor([[0.1, 0.9], [0.3, 0.7]]), torch.tensor([[0.2, 0.8], [0.2, 0.8]])]}}
    priors = shift.prior_estimate_table(
        {"r/CE": {"b": [[0.2, 0.8], [0.3, 0.7]]}},
        {"b": torch.tensor([0, 1, 1, 1])},
        ["mel", "nv"],
        "mel",
        [0.1, 0.9],
        probs=forecasts,
    )
    assert priors.loc[("CE", "b"), "mean forecast (%)"] == "20.0"


# ------------------------------------------------------------------------------------------------------------
# issue 29, item 4 (d): probabilities and labels are checked as the metrics check them

_GOOD = torch.tensor([[0.2, 0.5, 0.3], [0.6, 0.3, 0.1]], dtype=torch.float64)


@pytest.mark.parametrize(
    "probs, message",
    [
        (torch.tensor([[2.0, -1.0, 0.5], [0.3, 3.0, -2.0]]), r"must lie in \[0, 1\].*did you pass logits"),
        (torch.tensor([[-0.1, 0.6, 0.5], [0.2, 0.4, 0.4]]), r"must lie in \[0, 1\]"),
        (torch.tensor([[float("nan"), 0.5, 0.5], [0.2, 0.4, 0.4]]), r"NaN"),
        (torch.tensor([[float("inf"), 0.0, 0.0], [0.2, 0.4, 0.4]]), r"infinite"),
        (torch.tensor([[0.2, 0.2, 0.2], [0.2, 0.4, 0.4]]), r"must sum to 1.*row 0 sums to 0.6"),
        (torch.zeros(2, 3), r"must sum to 1.*sums to 0"),
        (torch.tensor([0.2, 0.5, 0.3]), r"shape \(N, C\)"),
        (torch.zeros(0, 3), r"empty"),
    ],
    ids=["logits", "negative", "NaN", "inf", "unnormalised", "all-zero rows", "one row as a vector", "empty"],
)
def test_em_and_the_prior_adjustment_refuse_what_is_not_probabilities(probs, message):
    """Issue 29 (d): em_target_prior returned a prior like [1e-12, 1, 1e-12] for logits, and adjust_to_prior
    "probabilities" like [-3, 1.5, 2.5]; NaN, infinite, unnormalised and all-zero rows went through too."""
    with pytest.raises(ValueError, match=message):
        shift.em_target_prior(probs, [1, 1, 1])
    with pytest.raises(ValueError, match=message):
        shift.adjust_to_prior(probs, [1, 1, 1], [0.5, 0.3, 0.2])
    prior, _ = shift.em_target_prior(_GOOD, [1, 1, 1])  # probabilities pass
    assert torch.isclose(prior.sum(), torch.tensor(1.0, dtype=torch.float64))
    assert torch.allclose(shift.adjust_to_prior(_GOOD, [1, 1, 1], [1, 1, 1]), _GOOD)


@pytest.mark.parametrize(
    "labels, message",
    [
        (torch.tensor([0, 1, 3]), r"labels must lie in \[0, 2\].*got range \[0, 3\]"),
        (torch.tensor([0, -1, 2]), r"labels must lie in \[0, 2\]"),
        (torch.tensor([0.0, 1.7, 2.0]), r"integer class indices, got dtype torch.float32"),
        (torch.tensor([], dtype=torch.long), r"no labels"),
        (torch.tensor([[0, 1], [2, 0]]), r"shape \(N,\)"),
    ],
    ids=["label >= n_classes", "negative label", "float labels", "empty", "a matrix"],
)
def test_class_prior_refuses_labels_outside_the_classes_float_labels_and_no_labels(labels, message):
    """Issue 29, medium: class_prior returned K + 1 frequencies for a label >= n_classes, truncated float labels
    and returned NaN for no labels."""
    with pytest.raises(ValueError, match=message):
        shift.class_prior(labels, 3)
    with pytest.raises(ValueError, match="n_classes"):
        shift.class_prior(torch.tensor([0, 1]), 0)
    assert shift.class_prior(torch.tensor([0, 0, 2, 1]), 4).tolist() == [0.5, 0.25, 0.25, 0.0]
    assert shift.class_prior(np.array([2, 2]), 3).tolist() == [0.0, 0.0, 1.0]


def test_prior_vector_table_shows_every_class_against_the_truth_and_the_distance():
    labels = {"b": torch.tensor([0, 0, 1, 2])}
    priors = {"r/CE + TS + prior (EM)": {"b": [[0.5, 0.25, 0.25], [0.7, 0.1, 0.2]]}}
    table = shift.prior_vector_table(priors, labels, ["x", "y", "z"], [[0.6, 0.3, 0.1]], {"b": "B"}, {})
    assert table.loc[("B", "truth"), "x"] == "50.0" and table.loc[("B", "truth"), "distance to truth (pp)"] == "0.0"
    assert table.loc[("B", "r/CE + TS + prior (EM)"), "x"] == "60.0 ± 14.1"
    assert table.loc[("B", "r/CE + TS + prior (EM)"), "distance to truth (pp)"] == "10.0 ± 14.1"  # 0 and 20 pp
    assert table.loc[("B", "π_s: mean calibrated forecast, source"), "z"] == "10.0"


def test_the_class_prior_bars_draw_one_bar_per_class_and_prior_at_the_seed_mean():
    import matplotlib

    matplotlib.use("Agg")
    from helpers.plots import shift_plots, style

    priors = {"truth": [[0.5, 0.3, 0.2]], "EM": [[0.6, 0.4, 0.0], [0.8, 0.2, 0.0]]}
    figure, ax = plt_subplots()
    assert shift_plots.class_prior_bars(priors, ["a", "b", "c"], ax=ax, title="set") is figure
    from matplotlib.container import BarContainer, ErrorbarContainer

    bars = [patch for c in ax.containers if isinstance(c, BarContainer) for patch in c.patches]
    heights = [round(bar.get_height(), 6) for bar in bars]
    assert heights == [50.0, 30.0, 20.0, 70.0, 30.0, 0.0]  # truth, then EM's seed mean, in percent
    centres = [round(bar.get_x() + bar.get_width() / 2, 6) for bar in bars]
    assert centres == [-0.2, 0.8, 1.8, 0.2, 1.2, 2.2]  # two bars per class group, side by side
    colours = style.figure_styles(["truth", "EM"])
    assert matplotlib.colors.to_hex(bars[0].get_facecolor()) == colours["truth"].color.lower()
    assert matplotlib.colors.to_hex(bars[3].get_facecolor()) == colours["EM"].color.lower()
    assert colours["truth"].color != colours["EM"].color
    errors = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(errors) == 1  # the error bar (sd over seeds) only on the prior with several seeds
    segments = errors[0].lines[2][0].get_segments()
    spread = 2 * 100 * np.std([0.6, 0.8], ddof=1)  # ± 1 sd: classes a and b vary over seeds, c does not
    assert np.allclose([seg[1][1] - seg[0][1] for seg in segments], [spread, spread, 0.0])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["truth", "EM"]
    assert ax.get_title() == "set"
    figure2, ax2 = plt_subplots()
    shift_plots.class_prior_bars(priors, ["a", "b", "c"], ax=ax2, legend=False)
    assert ax2.get_legend() is None
    figure3, ax3 = plt_subplots()
    shift_plots.class_prior_bars(priors, ["a", "b", "c"], ax=ax3, colors={"truth": "#01665E"})
    faces = [matplotlib.colors.to_hex(c.patches[0].get_facecolor()) for c in ax3.containers if hasattr(c, "patches")]
    assert faces[0] == "#01665e" and faces[1] not in ("#01665e",)  # given colour kept; the other a free fallback
    with pytest.raises(ValueError, match="not priors"):
        shift_plots.class_prior_bars(priors, ["a", "b", "c"], colors={"BBSE": "#000000"})
    with pytest.raises(ValueError, match="sum to 1"):
        shift_plots.class_prior_bars({"bad": [[0.5, 0.1, 0.1]]}, ["a", "b", "c"])
    with pytest.raises(ValueError, match="at least one"):
        shift_plots.class_prior_bars({}, ["a"])


def plt_subplots():
    import matplotlib.pyplot as plt

    return plt.subplots()


def test_the_across_test_sets_figure_can_colour_rows_by_their_loss_and_mark_test_sets_by_shape():
    import matplotlib

    matplotlib.use("Agg")
    from helpers.plots import shift_plots, style

    summary = lambda mean: {"ece": {"per_seed": [mean], "mean": mean, "sd": 0.01}}  # noqa: E731
    summaries = {
        "r/cross-entropy + TS": {"a": summary(0.1), "b": summary(0.2)},
        "r/LS α=0.1 + TS": {"a": summary(0.05), "b": summary(0.3)},
        "r/oracle thing": {"a": summary(0.02)},
    }
    models = list(summaries)
    figure = shift_plots.metric_across_test_sets(summaries, models, ["a", "b"], "ece", model_colors=True)
    ax = figure.axes[0]
    points = [line for line in ax.lines if line.get_marker() in ("o", "s")]
    found = {
        (round(float(line.get_xdata()[0]), 3), line.get_marker()): (
            matplotlib.colors.to_hex(line.get_color()),
            line.get_markerfacecolor()
            if line.get_markerfacecolor() == "none"
            else matplotlib.colors.to_hex(line.get_markerfacecolor()),
        )
        for line in points
    }
    ls_colour = style.model_style("LS").color.lower()
    assert found[(5.0, "o")] == (ls_colour, ls_colour)  # LS + TS in LS's colour, first test set filled
    assert found[(30.0, "s")][0] == ls_colour and found[(30.0, "s")][1] == "none"  # second test set hollow
    assert found[(10.0, "o")][0] == "#000000"  # cross-entropy's black
    assert found[(2.0, "o")][0] == "#000000"  # no loss named: black
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["a", "b"]
    model_colours = {s.color.lower() for s in style.MODEL_STYLES.values()}
    assert all(matplotlib.colors.to_hex(h.get_color()) not in model_colours for h in legend.legend_handles)

"""The fair contest (helpers.lessons.tuning and its suites): one budget per loss, the choice on the selection half of
validation only, and the paper-default grid point is the paper-default run itself."""

import dataclasses
import types

import pytest
import torch

from helpers.calibration import posthoc
from helpers.course import suites, suites_multiclass
from helpers.lessons import multilabel_analysis, tuning
from helpers.training import run_keys


def test_a_grid_must_hold_its_default():
    with pytest.raises(ValueError, match="must contain its default"):
        tuning.Grid("alpha", "α", (0.05, 0.2), 0.1)


def test_every_loss_gets_the_same_budget():
    sizes = {len(grid.values) for grid in [*tuning.MULTICLASS_GRIDS.values(), *tuning.MULTILABEL_GRIDS.values()]}
    assert sizes == {3}


def test_the_lowest_score_wins_and_the_default_wins_a_tie():
    assert tuning.choose({1.0: 0.5, 3.0: 0.4, 5.0: 0.6}, default=3.0) == 3.0
    assert tuning.choose({1.0: 0.3, 3.0: 0.4, 5.0: 0.6}, default=3.0) == 1.0
    assert tuning.choose({1.0: 0.3, 3.0: 0.3, 5.0: 0.6}, default=3.0) == 3.0
    assert tuning.choose({1.0: 0.3, 3.0: 0.4, 5.0: 0.3}, default=3.0) == 1.0  # a tie without the default: smaller


@pytest.mark.parametrize(
    "scores, message",
    [
        ({1.0: float("nan"), 3.0: 0.4, 5.0: 0.6}, r"NaN score.*1\.0"),
        ({1.0: 0.3, 3.0: float("nan"), 5.0: float("nan")}, r"NaN score.*3\.0, 5\.0"),
        ({}, "no scores"),
    ],
    ids=["NaN first", "NaN default", "empty grid"],
)
def test_a_nan_score_or_an_empty_grid_is_refused_not_chosen(scores, message):
    """Issue 29, medium: choose() returned the NaN-scored value (min() of a list that starts with NaN is NaN,
    and every comparison with NaN is false), and failed on an empty grid with a bare "min() arg is empty"."""
    with pytest.raises(ValueError, match=message):
        tuning.choose(scores, default=3.0)
    assert tuning.choose({1.0: float("inf"), 3.0: 0.4, 5.0: 0.6}, default=3.0) == 3.0  # an infinite NLL just loses


@pytest.mark.parametrize("multilabel", [False, True])
def test_the_choice_reads_the_selection_half_only(multilabel):
    generator = torch.Generator().manual_seed(0)
    n = 60
    if multilabel:
        labels = torch.randint(0, 2, (n, 4), generator=generator)
        probs = torch.rand(n, 4, generator=generator).clamp(0.05, 0.95)
        selection, calibration = posthoc.split_calibration(n, seed=0)
    else:
        labels = torch.arange(n) % 3
        probs = torch.softmax(torch.randn(n, 3, generator=generator), 1)
        selection, calibration = posthoc.split_calibration(n, seed=0, labels=labels)
    score = tuning.selection_nll(probs, labels, multilabel)
    changed = probs.clone()
    changed[calibration] = 1.0 / probs.shape[1] if not multilabel else 0.5
    assert tuning.selection_nll(changed, labels, multilabel) == pytest.approx(score, abs=0)
    changed[selection] = 1.0 / probs.shape[1] if not multilabel else 0.5
    assert tuning.selection_nll(changed, labels, multilabel) != pytest.approx(score)


def test_the_selection_half_is_the_notebooks_split_for_any_split_seed():
    labels = torch.arange(40) % 2
    probs = torch.softmax(torch.randn(40, 2, generator=torch.Generator().manual_seed(3)), 1)
    for split_seed in (0, 7):
        selection, _ = posthoc.split_calibration(40, seed=split_seed, labels=labels)
        expected = float(torch.nn.functional.nll_loss(probs[selection].log(), labels[selection]))
        assert tuning.selection_nll(probs, labels, False, split_seed) == pytest.approx(expected, rel=1e-6)
    assert tuning.selection_nll(probs, labels, False, 0) != tuning.selection_nll(probs, labels, False, 7)


def test_the_grid_table_marks_the_default_and_the_choice():
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2])
    sharp = torch.nn.functional.one_hot(labels, 3).double() * 0.9 + 0.1 / 3
    vague = torch.full((12, 3), 1 / 3, dtype=torch.float64)
    runs = {
        ("LS", 0.05): types.SimpleNamespace(val_probs=vague),
        ("LS", 0.1): types.SimpleNamespace(val_probs=vague),
        ("LS", 0.2): types.SimpleNamespace(val_probs=sharp),
    }
    table, choices = tuning.grid_table(runs, tuning.MULTICLASS_GRIDS, labels, lambda run: run.val_probs, False)
    assert choices == {"LS": 0.2}
    assert list(table["hyper-parameter"]) == ["α=0.05", "α=0.1", "α=0.2"]
    assert list(table["paper default"]) == ["", "yes", ""]
    assert list(table["chosen"]) == ["", "", "yes"]


def _fingerprint(loss):
    return run_keys._loss_fingerprint(loss)


@pytest.mark.parametrize("name", list(tuning.MULTILABEL_GRIDS))
def test_the_multilabel_default_grid_point_is_the_paper_default_loss(name):
    paper = multilabel_analysis.course_losses([name])[name]
    assert _fingerprint(tuning.multilabel_loss(name)) == _fingerprint(paper)
    other = next(v for v in tuning.MULTILABEL_GRIDS[name].values if v != tuning.MULTILABEL_GRIDS[name].default)
    assert _fingerprint(tuning.multilabel_loss(name, other)) != _fingerprint(paper)


def with_knob(cfg, knob, value):
    """The configuration a grid point trains with (as helpers.course.suites_multiclass._multiclass_points sets it)."""
    return dataclasses.replace(cfg, extra={**cfg.extra, knob: value})


@pytest.mark.parametrize("name", list(tuning.MULTICLASS_GRIDS))
def test_the_multiclass_default_grid_point_is_the_paper_default_run(name):
    """The notebook's paper-default loss and the grid's default point have one definition, hence one run key."""
    cfg = suites.reference_config("06_multiclass_comparison")
    grid = tuning.MULTICLASS_GRIDS[name]
    assert cfg.extra.get(grid.knob, grid.default) == grid.default  # the grid's default is the profile's value
    bundle = types.SimpleNamespace(n_channels=3, n_classes=7, image_size=28)
    accuracy = torch.linspace(0.2, 0.9, 7)
    make = suites_multiclass._make_multiclass_loss
    paper = make(name, cfg, bundle, "small_cnn", accuracy, 0)
    at_default = make(name, with_knob(cfg, grid.knob, grid.default), bundle, "small_cnn", accuracy, 0)
    assert _fingerprint(at_default) == _fingerprint(paper)
    other = next(v for v in grid.values if v != grid.default)
    moved = make(name, with_knob(cfg, grid.knob, other), bundle, "small_cnn", accuracy, 0)
    assert _fingerprint(moved) != _fingerprint(paper)

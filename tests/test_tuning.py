"""The fair contest (helpers.lessons.tuning and its suites): one budget per loss, a grid that holds the loss's
cross-entropy (BCE) point — the cross-entropy run itself — and its paper value, the choice on the selection half of
validation averaged over two seeds, and a main table of tuned losses raw and after TS."""

import dataclasses
import math
import types

import pytest
import torch
import torch.nn.functional as F

from helpers import course
from helpers.calibration import posthoc
from helpers.course import suites, suites_common, suites_multiclass
from helpers.data import DatasetBundle, Split
from helpers.lessons import loss_comparison, multilabel_analysis, seed_aware, tuning
from helpers.losses import (
    ASL,
    BCE,
    DCA,
    LPR,
    MDCA,
    SPA,
    AsymmetricFocal,
    CCLNetLoss,
    Composite,
    CrossEntropy,
    FocalLoss,
    LabelSmoothing,
    LSPlus,
    MbLS,
    phi_recovery,
)
from helpers.training import run_keys, run_store

LIMIT = tuning.LIMIT
R = tuning.TUNING_RECIPE


def a_grid(**overrides):
    settings = dict(knob="alpha", symbol="α", values=(0.05, 0.1, 0.2), default=0.1, reduction="α = 0 is CE")
    settings.update(limit="cross-entropy", limit_label="α=0")
    return tuning.Grid(**{**settings, **overrides})


# ------------------------------------------------------------------------------------------------ the grids
def test_a_grid_must_hold_its_default_and_state_its_reduction_to_cross_entropy():
    with pytest.raises(ValueError, match="must contain its default"):
        a_grid(values=(0.05, 0.2))
    with pytest.raises(ValueError, match="must state its reduction to cross-entropy"):
        a_grid(reduction=" ", limit=None)
    with pytest.raises(ValueError, match="names its limit run 'cross-entropy' but not its coordinates"):
        a_grid(limit_label="")
    with pytest.raises(ValueError, match="repeats a value"):
        a_grid(values=(0.1, 0.1, 0.2))
    assert a_grid().points == (LIMIT, 0.05, 0.1, 0.2)
    assert a_grid(limit=None, limit_label="").points == (0.05, 0.1, 0.2)


def test_every_loss_gets_three_values_of_its_own_and_its_cross_entropy_point_where_it_has_one():
    grids = {**tuning.MULTICLASS_GRIDS, **{f"ml {k}": g for k, g in tuning.MULTILABEL_GRIDS.items()}}
    assert {len(grid.values) for grid in grids.values()} == {3}
    assert {loss: grid.limit for loss, grid in tuning.MULTICLASS_GRIDS.items()} == {
        "LS": "cross-entropy",
        "focal": "cross-entropy",
        "MbLS": "cross-entropy",
        "LS+": "cross-entropy",
        "CCL-Net": None,  # eq. 3 has no weight to switch its KL term off
        "DCA": "cross-entropy",
        "MDCA": "cross-entropy",
    }
    assert {loss: grid.limit for loss, grid in tuning.MULTILABEL_GRIDS.items()} == {
        "focal": "BCE",
        "ASL": "BCE",
        "SPA": "BCE",
        "SPA+LPR": "SPA",  # λ = 0 is SPA at its paper values, not BCE
        "BCE+LPR": "BCE",
    }
    labels = {loss: tuning.point_label(grid, LIMIT) for loss, grid in grids.items() if grid.limit}
    assert labels["MbLS"] == "m=∞ (cross-entropy)" and labels["ml ASL"] == "γ⁻=0, m=0 (BCE)"
    assert labels["ml SPA"] == "(ζ⁻, k⁻, b⁻)=(1, 1, 0) (BCE)" and labels["LS"] == "α=0 (cross-entropy)"
    # where the reduction is not a value of the knob, the grid says so
    for loss in ("MbLS", "CCL-Net"):
        assert "no finite margin" in tuning.MULTICLASS_GRIDS[loss].reduction or "no point" in (
            tuning.MULTICLASS_GRIDS[loss].reduction
        )
    for loss in ("ASL", "SPA"):
        assert "not a value of" in tuning.MULTILABEL_GRIDS[loss].reduction
    with pytest.raises(ValueError, match="has no cross-entropy point"):
        tuning.point_label(tuning.MULTICLASS_GRIDS["CCL-Net"], LIMIT)


def _logits_and_targets(k=5, n=16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, k, generator=generator, dtype=torch.float64), torch.arange(n) % k


def test_each_stated_multiclass_reduction_is_cross_entropy_and_ccl_net_has_none():
    logits, target = _logits_and_targets()
    ce = CrossEntropy()(logits, target)
    accuracy = torch.linspace(0.3, 0.9, 5)
    at_limit = {
        "LS": LabelSmoothing(0.0),
        "focal": FocalLoss(0.0),
        "MbLS": MbLS(margin=1e9, lam=0.1),  # m → ∞: no logit distance reaches the margin
        "LS+": LSPlus(accuracy, alpha=0.0),
        "DCA": DCA(beta=0.0),
        "MDCA": MDCA(beta=0.0),
    }
    for loss, module in at_limit.items():
        assert module(logits, target) == pytest.approx(float(ce), rel=1e-12), loss
    assert MbLS(margin=10.0, lam=0.1)(logits * 20, target) > CrossEntropy()(logits * 20, target)  # a finite m bites
    # CCL-Net: CE + KL(p^SL ‖ q) with weight 1 at every b, and p^SL = softmax(−f_d) is never one-hot (f_d ≤ 4)
    for b in (*tuning.MULTICLASS_GRIDS["CCL-Net"].values, 100.0):
        torch.manual_seed(0)
        ccl = CCLNetLoss(feature_dim=4, num_classes=5, b=b)
        assert float(ccl(logits.float(), target)) > float(ce) + 1e-3, b


def test_each_stated_multilabel_reduction_is_bce_or_spa_and_the_fixed_knobs_keep_the_grid_off_it():
    generator = torch.Generator().manual_seed(1)
    logits = 3 * torch.randn(32, 4, generator=generator, dtype=torch.float64)
    targets = torch.randint(0, 2, (32, 4), generator=generator)
    bce = float(BCE()(logits, targets))
    assert float(AsymmetricFocal(gamma_pos=0.0, gamma_neg=0.0)(logits, targets)) == pytest.approx(bce, rel=1e-12)
    assert float(ASL(gamma_pos=0.0, gamma_neg=0.0, margin=0.0, eps=1e-8)(logits, targets)) == pytest.approx(bce)
    assert float(ASL(gamma_pos=0.0, gamma_neg=0.0, margin=0.05)(logits, targets)) != pytest.approx(bce)
    assert float(SPA(1.0, 1.0, 0.0, 1.0, 1.0, 0.0)(logits, targets)) == pytest.approx(bce, rel=1e-12)
    for zeta in tuning.MULTILABEL_GRIDS["SPA"].values:  # k⁻ = 3, b⁻ = 1: no ζ⁻ of the grid is BCE
        assert float(tuning.multilabel_loss("SPA", zeta)(logits, targets)) != pytest.approx(bce, rel=1e-3)
    assert float(Composite(BCE(), [(0.0, LPR())])(logits, targets)) == pytest.approx(bce, rel=1e-12)
    spa = float(multilabel_analysis.course_losses(["SPA"])["SPA"](logits, targets))
    assert float(Composite(SPA(1.0, 1.0, 0.0, 5.0, 3.0, 1.0), [(0.0, LPR())])(logits, targets)) == pytest.approx(spa)


# ------------------------------------------------------------------------------------------------ the choice
def test_the_lowest_score_wins_and_a_tie_goes_to_the_default_then_cross_entropy_then_the_smaller_value():
    grid = a_grid()
    assert tuning.choose({LIMIT: 0.7, 0.05: 0.5, 0.1: 0.4, 0.2: 0.6}, grid) == 0.1
    assert tuning.choose({LIMIT: 0.7, 0.05: 0.3, 0.1: 0.4, 0.2: 0.6}, grid) == 0.05
    assert tuning.choose({LIMIT: 0.2, 0.05: 0.3, 0.1: 0.4, 0.2: 0.6}, grid) is LIMIT
    assert tuning.choose({LIMIT: 0.3, 0.05: 0.3, 0.1: 0.3, 0.2: 0.6}, grid) == 0.1  # the default wins a tie
    assert tuning.choose({LIMIT: 0.3, 0.05: 0.3, 0.1: 0.4, 0.2: 0.6}, grid) is LIMIT  # then cross-entropy
    assert tuning.choose({LIMIT: 0.7, 0.05: 0.3, 0.1: 0.4, 0.2: 0.3}, grid) == 0.05  # then the smaller value


@pytest.mark.parametrize(
    "scores, message",
    [
        ({LIMIT: 0.5, 0.05: float("nan"), 0.1: 0.4, 0.2: 0.6}, r"NaN score.*0\.05"),
        ({LIMIT: 0.5, 0.05: 0.3, 0.1: float("nan"), 0.2: float("nan")}, r"NaN score.*0\.1, 0\.2"),
        ({}, "no scores"),
        ({LIMIT: 0.5, 0.05: 0.3, 0.2: 0.6}, r"lacks its paper default α=0\.1"),
        ({0.05: 0.3, 0.1: 0.4, 0.2: 0.6}, r"lacks its cross-entropy point α=0 \(cross-entropy\): α = 0 is CE"),
        ({LIMIT: 0.5, 0.1: 0.4, 0.3: 0.6}, r"point\(s\) \[0\.3\] are not in the grid"),
    ],
    ids=["NaN first", "NaN default", "empty grid", "no default", "no limit", "foreign point"],
)
def test_a_grid_without_its_default_or_limit_a_nan_score_or_an_empty_grid_is_refused(scores, message):
    """Issue 29, medium: choose() returned the NaN-scored value and failed on an empty grid with a bare "min() arg
    is empty"; issue 26: a grid must hold its cross-entropy point and its paper value to be chosen on."""
    with pytest.raises(ValueError, match=message):
        tuning.choose(scores, a_grid())
    assert tuning.choose({LIMIT: math.inf, 0.05: math.inf, 0.1: 0.4, 0.2: 0.6}, a_grid()) == 0.1  # inf just loses


def test_a_grid_without_a_cross_entropy_point_is_chosen_on_its_values_alone():
    grid = tuning.MULTICLASS_GRIDS["CCL-Net"]
    assert tuning.choose({2.0: 0.77, 3.0: 0.73, 4.0: 0.73}, grid) == 3.0  # b = 3 and 4 tie: the smaller
    with pytest.raises(ValueError, match="not in the grid"):
        tuning.choose({LIMIT: 0.1, 2.0: 0.77, 3.0: 0.73, 4.0: 0.73}, grid)


def test_a_point_scores_the_mean_of_its_two_seeds_which_can_overturn_a_one_seed_choice():
    """A hand-made score table (binary fractions, so that the ties are exact): at seed 0 alone α = 0.05 wins;
    over both seeds the paper value does."""
    by_seed = {
        (LIMIT, 0): 0.625,
        (LIMIT, 1): 0.6875,
        (0.05, 0): 0.5,
        (0.05, 1): 0.8125,
        (0.1, 0): 0.625,
        (0.1, 1): 0.625,
        (0.2, 0): 0.75,
        (0.2, 1): 0.875,
    }
    assert tuning.choose(tuning.mean_scores(by_seed, [0]), a_grid()) == 0.05
    means = tuning.mean_scores(by_seed, [0, 1])
    assert means == {LIMIT: 0.65625, 0.05: 0.65625, 0.1: 0.625, 0.2: 0.8125}
    assert tuning.choose(means, a_grid()) == 0.1
    tied = {**by_seed, (0.1, 0): 0.6875, (0.1, 1): 0.625}  # the default ties cross-entropy and α = 0.05
    assert tuning.choose(tuning.mean_scores(tied, [0, 1]), a_grid()) == 0.1
    no_default = {**by_seed, (0.1, 0): 0.75, (0.1, 1): 0.75}  # cross-entropy ties α = 0.05: cross-entropy
    assert tuning.choose(tuning.mean_scores(no_default, [0, 1]), a_grid()) is LIMIT
    with pytest.raises(ValueError, match=r"missing \(point, seed\) \[\(0\.2, 1\)\]"):
        tuning.mean_scores({key: v for key, v in by_seed.items() if key != (0.2, 1)}, [0, 1])
    with pytest.raises(ValueError, match="no selection seeds"):
        tuning.mean_scores(by_seed, [])


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


def _labelled_probs():
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2])
    sharp = torch.nn.functional.one_hot(labels, 3).double() * 0.9 + 0.1 / 3
    vague = torch.full((12, 3), 1 / 3, dtype=torch.float64)
    return labels, sharp, vague


def test_the_grid_table_averages_the_two_seeds_and_marks_the_default_the_limit_and_the_choice():
    labels, sharp, vague = _labelled_probs()
    probs = {(LIMIT, 0): vague, (LIMIT, 1): vague, (0.05, 0): vague, (0.05, 1): vague}
    probs.update({(0.1, 0): vague, (0.1, 1): sharp, (0.2, 0): sharp, (0.2, 1): sharp})
    runs = {("LS", point, seed): types.SimpleNamespace(val_probs=p) for (point, seed), p in probs.items()}
    table, choices = tuning.grid_table(runs, tuning.MULTICLASS_GRIDS, labels, lambda run: run.val_probs, False, [0, 1])
    assert choices == {"LS": 0.2}
    assert list(table["hyper-parameter"]) == ["α=0 (cross-entropy)", "α=0.05", "α=0.1", "α=0.2"]
    assert list(table["paper default"]) == ["", "", "yes", ""]
    assert list(table["chosen"]) == ["", "", "", "yes"]
    mean = (table["selection NLL, seed 0"] + table["selection NLL, seed 1"]) / 2
    assert list(table["selection NLL"]) == pytest.approx(list(mean))
    with pytest.raises(ValueError, match=r"missing \(point, seed\)"):  # a grid at one seed only
        tuning.grid_table(runs, tuning.MULTICLASS_GRIDS, labels, lambda run: run.val_probs, False, [0, 1, 2])


# ------------------------------------------------------------------------------------------------ run keys
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


def tiny_split(n=48, multilabel=False):
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 2, (n, 3), generator=generator) if multilabel else torch.randint(0, 3, (n,))
    images = torch.randint(0, 255, (n, 1, 8, 8), generator=generator, dtype=torch.uint8)
    return Split(images, labels)


def tiny_bundle(multilabel=False):
    split = tiny_split(multilabel=multilabel)
    return DatasetBundle(
        name="tiny-ml" if multilabel else "tiny",
        task="multi-label" if multilabel else "multi-class",
        class_names=["a", "b", "c"],
        train=split,
        val=split,
        test=split,
        source="generated in the test",
        licence="none",
        image_size=8,
    )


def tiny_config(notebook="06_multiclass_comparison", seeds=(0, 1, 2)):
    extra = dict(overfit_epochs=1, seeds=list(seeds), alpha=0.1, gamma=3.0, margin=10.0, mbls_lambda=0.1)
    extra.update(lsplus_alpha=0.5, dca_beta=1.0, mdca_beta=1.0, lr_ccl=5e-4, ccl_optimizer="sgd")
    return course.RunConfig(
        notebook=notebook,
        profile="reference",
        dataset="tiny",
        image_size=8,
        model="small_cnn",
        epochs=1,
        batch_size=16,
        lr=0.05,
        seed=0,
        device="cpu",
        data_dir=None,
        max_train=None,
        results_path="unused.json",
        extra=extra,
    )


def test_the_selection_seeds_are_the_first_two_or_the_only_one():
    assert suites.selection_seeds(tiny_config(seeds=(0, 1, 2, 3, 4))) == [0, 1]
    assert suites.selection_seeds(tiny_config(seeds=(3,))) == [3]


def test_the_multiclass_cross_entropy_point_is_the_cross_entropy_run_and_the_grid_is_declared_at_two_seeds(
    tmp_path, monkeypatch
):
    """The limit point maps onto the cross-entropy run of its seed (the same key: loaded, not a LabelSmoothing(0)
    retrained); the declared grid is every loss's three values at the two selection seeds, nothing at seed 2
    until the grids are complete (LS+ waits for its cross-entropy run)."""
    monkeypatch.setattr(run_store, "STORED_RUNS_DIR", tmp_path)
    cfg, bundle = tiny_config(), tiny_bundle()
    with run_store.planning() as plan:
        grid_runs = suites.multiclass_grid_runs(cfg, bundle)
        ce = suites.multiclass_runs(cfg, bundle, ("cross-entropy",), (R,))
    for loss, grid in tuning.MULTICLASS_GRIDS.items():
        for seed in (0, 1):
            if grid.limit is not None:
                assert grid_runs[(loss, LIMIT, seed)].key == ce[(R, "cross-entropy", seed)].key, loss
    assert _fingerprint(LabelSmoothing(0.0)) != _fingerprint(CrossEntropy())  # a new run would have had a new key
    planned = {(p.name.split(",")[0].split(" ")[0], p.config.seed, p.key) for p in plan}
    counts = {}
    for loss, seed, _ in planned:
        counts.setdefault(loss, {}).setdefault(seed, 0)
        counts[loss][seed] += 1
    assert counts == {
        "cross-entropy": {0: 1, 1: 1, 2: 1},  # seed 2: the suite's own cross-entropy call above
        **{loss: {0: 3, 1: 3} for loss in ("LS", "focal", "MbLS", "CCL-Net", "DCA", "MDCA")},
    }  # LS+ is declared once its cross-entropy runs exist


def test_the_chosen_points_are_declared_at_every_seed_and_cross_entropy_is_the_cross_entropy_run(tmp_path, monkeypatch):
    monkeypatch.setattr(run_store, "STORED_RUNS_DIR", tmp_path)
    cfg, bundle = tiny_config(), tiny_bundle()
    with run_store.planning() as plan:
        tuned = suites.tuned_multiclass_runs(cfg, bundle, {"LS": LIMIT, "focal": 1.0, "DCA": 1.0})
        ce = suites.multiclass_runs(cfg, bundle, ("cross-entropy", "DCA"), (R,))
    assert sorted(tuned) == sorted(
        (R, name, seed)
        for name in ("LS α=0 (cross-entropy) (tuned)", "focal γ=1 (tuned)", "DCA β=1 (tuned)")
        for seed in (0, 1, 2)
    )
    for seed in (0, 1, 2):
        assert tuned[(R, "LS α=0 (cross-entropy) (tuned)", seed)].key == ce[(R, "cross-entropy", seed)].key
        assert tuned[(R, "DCA β=1 (tuned)", seed)].key == ce[(R, "DCA β=1", seed)].key  # the paper run
    assert sorted(p.name for p in plan if p.name.startswith("focal")) == [
        f"focal γ=1, {R}, seed {seed}" for seed in (0, 1, 2)
    ]


def test_the_multilabel_bce_point_is_the_bce_run_spa_lpr_s_the_spa_run_the_default_the_paper_run(tmp_path, monkeypatch):
    monkeypatch.setattr(run_store, "STORED_RUNS_DIR", tmp_path)
    cfg, bundle = tiny_config("13_multilabel_xrays_and_contest"), tiny_bundle(multilabel=True)
    with run_store.planning() as plan:
        grid_runs = suites.multilabel_grid_runs(cfg, bundle)
        primary = suites.multilabel_runs(cfg, bundle, ["BCE", *tuning.MULTILABEL_GRIDS])
    for loss, grid in tuning.MULTILABEL_GRIDS.items():
        for seed in (0, 1):
            assert grid_runs[(loss, LIMIT, seed)].key == primary[(grid.limit, seed)].key, loss
            assert grid_runs[(loss, grid.default, seed)].key == primary[(loss, seed)].key  # the paper run
    assert {seed for (_, _, seed) in grid_runs} == {0, 1}
    # per seed: the BCE and SPA runs and three values per loss, SPA's ζ⁻ = 5 being the SPA run itself
    assert len({run.key for run in grid_runs.values()}) == 2 * (2 + 3 * len(tuning.MULTILABEL_GRIDS) - 1)
    assert {p.key for p in plan} >= {run.key for run in grid_runs.values()}


# ------------------------------------------------------------------------------------------------ the contest
def fake_grid_runs(scores_by_loss, seeds=(0, 1), source="stored"):
    """(loss, point, seed) → a run whose selection NLL is about ``scores[(point, seed)]`` (3 classes, 12 images)."""
    labels, _, _ = _labelled_probs()
    runs = {}
    for loss, scores in scores_by_loss.items():
        for (point, seed), target in scores.items():
            if seed in seeds:
                p_true = math.exp(-target)  # NLL = −log p_true on every image
                probs = torch.full((12, 3), (1 - p_true) / 2, dtype=torch.float64)
                probs[torch.arange(12), labels] = p_true
                runs[(loss, point, seed)] = types.SimpleNamespace(val_probs=probs, source=source)
    return labels, runs


def test_run_contest_chooses_on_the_two_seed_mean_and_names_a_tuned_row_for_every_loss():
    scores = {
        "LS": {(LIMIT, 0): 0.625, (LIMIT, 1): 0.625, (0.05, 0): 0.5, (0.05, 1): 0.8125}
        | {(0.1, 0): 0.75, (0.1, 1): 0.75, (0.2, 0): 0.875, (0.2, 1): 0.875},
        "DCA": {(LIMIT, 0): 0.625, (LIMIT, 1): 0.625, (1.0, 0): 0.5, (1.0, 1): 0.625}
        | {(5.0, 0): 0.75, (5.0, 1): 0.75, (10.0, 0): 0.875, (10.0, 1): 0.875},
    }
    labels, runs = fake_grid_runs(scores)
    grids = {loss: tuning.MULTICLASS_GRIDS[loss] for loss in scores}
    asked = []
    contest = suites_common.run_contest(
        grids, runs, labels, False, lambda c: asked.append(dict(c)) or {}, lambda loss: f"{loss} paper", 0, [0, 1]
    )
    assert contest.choices == {"LS": LIMIT, "DCA": 1.0}  # α = 0.05 would win at seed 0 alone
    assert asked == [contest.choices]
    assert contest.rows == [("LS paper", "LS α=0 (cross-entropy) (tuned)"), ("DCA paper", "DCA β=1 (tuned)")]
    assert contest.moved == [("LS paper", "LS α=0 (cross-entropy) (tuned)")]
    assert contest.choice_text("LS") == "LS moved to α=0 (cross-entropy)"
    assert contest.choice_text("DCA") == "DCA kept the paper value (β=1)"
    assert contest.table_rows(" + TS") == [
        "LS α=0 (cross-entropy) (tuned)",
        "LS α=0 (cross-entropy) (tuned) + TS",
        "DCA β=1 (tuned)",
        "DCA β=1 (tuned) + TS",
    ]
    assert contest.seeds_text == "seeds 0 and 1" and dataclasses.replace(contest, seeds=[3]).seeds_text == "seed 3"
    record = contest.record()
    assert record["choices"] == {"LS": "α=0 (cross-entropy)", "DCA": "β=1"} and record["selection_seeds"] == [0, 1]
    # a grid with a point missing at the second seed is not chosen on (its runs are only planned)
    labels, partial = fake_grid_runs(scores)
    partial[("DCA", 5.0, 1)] = types.SimpleNamespace(val_probs=None, source="planned")
    contest = suites_common.run_contest(grids, partial, labels, False, lambda c: {}, str, 0, [0, 1])
    assert contest.choices == {"LS": LIMIT}


def test_the_contest_table_shows_every_tuned_loss_raw_and_after_ts_against_ce_plus_ts():
    """The main table reuses the primary table's functions (seed-aware intervals, one verdict per row)."""
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 3, (200,), generator=generator)
    contest = tuning.Contest(
        tuning.MULTICLASS_GRIDS, None, {"LS": 0.05, "focal": LIMIT}, {}, [("LS α=0.1", "LS α=0.05 (tuned)"),
        ("focal γ=3", "focal γ=0 (cross-entropy) (tuned)")], {}, [0, 1]
    )  # fmt: skip

    def probs():
        return [torch.softmax(torch.randn(200, 3, generator=generator) + 2 * F.one_hot(labels, 3), 1) for _ in range(3)]

    table_probs = {f"{R}/{row}": probs() for row in contest.table_rows(" + TS")}
    table_probs[f"{R}/cross-entropy + TS"] = probs()
    pairs = contest.pairs("cross-entropy + TS", " + TS", prefix=f"{R}/")
    metric_fns = {m: loss_comparison.metric_functions(["a", "b", "c"])[m] for m in ("nll", "ece")}
    found = seed_aware.seed_aware_differences(table_probs, labels, metric_fns, pairs, n=50, seed=0)
    table = loss_comparison.primary_table(found.results, [R], contest.table_rows(" + TS"), "cross-entropy + TS")
    assert list(table.index) == [
        "LS α=0.05 (tuned)",
        "LS α=0.05 (tuned) + TS",
        "focal γ=0 (cross-entropy) (tuned)",
        "focal γ=0 (cross-entropy) (tuned) + TS",
    ]
    assert table.index.name == "loss − (cross-entropy + TS)"
    assert (R, "verdict") in table.columns and table[(R, "verdict")].str.len().gt(0).all()


# ------------------------------------------------------------------------------- focal and ASL chosen through φ
def _phi_grid_runs():
    """Focal's and ASL's grids at seeds 0 and 1 on 2,000 × 3 multi-label images whose labels are drawn from
    η = φ(z; γ⁻ = 4): the focal γ⁻ = 4 run outputs z itself (its φ read-out is the posterior), every other focal
    and ASL point the same z, and the BCE point a noisy logit of η (a probability, but a poor one)."""
    generator = torch.Generator().manual_seed(0)
    z = 0.05 + 0.9 * torch.rand(2000, 3, generator=generator, dtype=torch.float64)
    eta = phi_recovery(z, 0.0, 4.0)
    labels = torch.bernoulli(eta, generator=generator)
    bce_logits = torch.logit(eta) + 1.5 * torch.randn(2000, 3, generator=generator, dtype=torch.float64)
    runs = {}
    for loss in ("focal", "ASL"):
        for point in tuning.MULTILABEL_GRIDS[loss].points:
            for seed in (0, 1):
                if point is LIMIT:
                    run = types.SimpleNamespace(loss=BCE(), val_logits=bce_logits, source="stored")
                else:
                    run = types.SimpleNamespace(
                        loss=tuning.multilabel_loss(loss, point), val_logits=torch.logit(z), source="stored"
                    )
                run.val_probs = run.loss.predict_proba(run.val_logits)
                runs[(loss, point, seed)] = run
    return labels, runs


def test_the_phi_readout_is_phi_for_focal_and_asl_and_the_sigmoid_for_bce():
    logits = torch.linspace(-4.0, 4.0, 9, dtype=torch.float64).reshape(3, 3)
    focal, asl = tuning.multilabel_loss("focal", 2.0), tuning.multilabel_loss("ASL", 6.0)
    assert torch.allclose(tuning.phi_readout(focal, logits), phi_recovery(torch.sigmoid(logits), 0.0, 2.0).float())
    assert torch.allclose(tuning.phi_readout(asl, logits), phi_recovery(torch.sigmoid(logits), 0.0, 6.0, 0.05).float())
    assert torch.allclose(tuning.phi_readout(BCE(), logits), torch.sigmoid(logits).float())
    with pytest.raises(ValueError, match="φ"):  # SPA has its own inverse link, no φ
        tuning.phi_readout(tuning.multilabel_loss("SPA", 1.0), logits)


def test_focal_and_asl_chosen_by_the_phi_readout_nll_can_leave_the_bce_point_the_sigmoid_nll_picks():
    labels, runs = _phi_grid_runs()
    _, by_sigmoid = tuning.grid_table(runs, tuning.MULTILABEL_GRIDS, labels, lambda run: run.val_probs, True, [0, 1])
    assert by_sigmoid == {"focal": LIMIT, "ASL": LIMIT}  # the sigmoid read-out of γ⁻ > 0 is biased by design
    table, by_phi = tuning.phi_grid_table(runs, tuning.MULTILABEL_GRIDS, labels, [0, 1])
    assert by_phi["focal"] == 4.0  # its φ read-out is the posterior itself
    assert list(table["loss"].unique()) == ["focal", "ASL"]
    focal = table[table["loss"] == "focal"].set_index("hyper-parameter")["selection NLL"]
    assert focal["γ⁻=4"] == focal.min() and focal["γ⁻=4"] < focal["γ⁻=0 (BCE)"]
    bce_nll = tuning.selection_nll(torch.sigmoid(runs[("focal", LIMIT, 0)].val_logits), labels, True)
    assert focal["γ⁻=0 (BCE)"] == pytest.approx(bce_nll)  # the BCE point is read through its sigmoid


def test_the_phi_grid_skips_other_losses_and_grids_with_a_planned_run():
    labels, runs = _phi_grid_runs()
    runs[("SPA", 1.0, 0)] = types.SimpleNamespace(loss=tuning.multilabel_loss("SPA", 1.0), source="stored")
    runs[("ASL", 2.0, 1)] = types.SimpleNamespace(loss=None, val_logits=None, source="planned")
    table, by_phi = tuning.phi_grid_table(runs, tuning.MULTILABEL_GRIDS, labels, [0, 1])
    assert set(by_phi) == {"focal"} and set(table["loss"]) == {"focal"}

"""A fair contest: every loss's hyper-parameter tuned with one budget on the same validation data.

Temperature scaling fits its one parameter on validation data; a training loss compared with it at its paper's
default value is handicapped. Here every loss gets the same budget:

1. **Grid** — three values of the loss's own hyper-parameter for every loss (:data:`MULTICLASS_GRIDS`,
   :data:`MULTILABEL_GRIDS`), the paper's default among them, **plus the point where the loss is plain
   cross-entropy (BCE)**, so that the grid brackets the optimum from the cross-entropy side too: label smoothing at
   α = 0, focal loss at γ = 0, … Each grid states its reduction (:attr:`Grid.reduction`); where the reduction is
   not a value of the tuned knob (MbLS: m → ∞; ASL: γ⁻ = 0 *and* margin 0; SPA: (ζ⁻, k⁻, b⁻) = (1, 1, 0)) it says
   so, and CCL-Net has no such point at all (its eq. 3 has no weight to switch off). The limit point (:data:`LIMIT`)
   *is* the cross-entropy (BCE) run of that seed — the same run key, loaded, not a new run of
   ``LabelSmoothing(0)`` (SPA + LPR's limit, λ = 0, is the SPA run). Every point is trained with the
   configuration's first two seeds (:func:`helpers.course.selection_seeds`; one in a one-seed configuration).
2. **Choice** — the point with the lowest NLL on the *selection half* of validation
   (:func:`helpers.calibration.split_calibration`, the half that post-hoc calibrators are not fitted on),
   **averaged over the two seeds** (:func:`mean_scores`): a choice made at one seed rested on differences of
   0.001 nats, the size of the seed-to-seed spread. NLL is a proper score: it rewards calibration and
   discrimination together, so a value cannot win by flattening every prediction. Ties go to the paper's default,
   then to the cross-entropy point, then to the smallest value (:func:`choose`). The test split is never read.
   (Every run keeps the epoch of best NLL on the *whole* validation split, so both halves took part in choosing
   checkpoints; only the test split is untouched.)
3. **Evaluation** — the chosen point trained with every seed (:func:`helpers.course.tuned_multiclass_runs`,
   :func:`helpers.course.tuned_multilabel_runs`), read raw and after temperature scaling, against cross-entropy +
   TS (06) or BCE + per-label TS (13): the deployable question is "tuned loss + TS against CE + TS".

The grid run at the default value and a selection seed *is* the paper-default run of that seed (same definition,
same key), the limit point the cross-entropy run, so both are loaded, not retrained; the chosen value's grid runs
are two of its evaluation runs. The multi-class contest runs in the well-regularised recipe only: one over-fitting
run is the wide CNN for 100 epochs, about 15 minutes on a 2-core CPU.

The runs are declared for notebooks 06 and 13 (:data:`helpers.course.DECLARED_RUNS`), so
``python -m helpers.course.train_runs train [--engine ray]`` trains them like every other run, in two rounds: the grids,
then the chosen values once every grid point of a loss exists at both selection seeds (as LS+ waits for its
cross-entropy run).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import torch
from torch import nn

from helpers import metrics
from helpers.calibration import posthoc
from helpers.losses import ASL, BCE, LPR, SPA, AsymmetricFocal, Composite

#: the grid point where a loss is plain cross-entropy (BCE): its run is the cross-entropy (BCE) run of the seed
LIMIT = None

#: a grid point: a value of the loss's knob, or :data:`LIMIT`
Point = float | None


@dataclasses.dataclass(frozen=True)
class Grid:
    """One loss's hyper-parameter: its name (for a multi-class loss the configuration knob that sets it; a
    multi-label value goes to :func:`multilabel_loss`), its symbol, the values tried, the paper's default, and the
    loss's reduction to cross-entropy (BCE): ``reduction`` states it in words (paper and equation), ``limit`` names
    the run that is that point ("cross-entropy", "BCE"; "SPA" for SPA + LPR at λ = 0) and ``limit_label`` its
    coordinates ("α=0", "m=∞"). ``limit=None`` where no point of the loss's family is cross-entropy; ``reduction``
    must then say why."""

    knob: str
    symbol: str
    values: tuple[float, ...]
    default: float
    reduction: str
    limit: str | None = None
    limit_label: str = ""

    def __post_init__(self) -> None:
        if self.default not in self.values:
            raise ValueError(f"the grid of {self.knob} must contain its default {self.default}, got {self.values}")
        if len(set(self.values)) != len(self.values):
            raise ValueError(f"the grid of {self.knob} repeats a value: {self.values}")
        if not self.reduction.strip():
            raise ValueError(
                f"the grid of {self.knob} must state its reduction to cross-entropy (BCE): the point where the loss "
                "is plain cross-entropy (limit=<its run>, limit_label=...), or why no point of its family is"
            )
        if self.limit is not None and not self.limit_label:
            raise ValueError(f"the grid of {self.knob} names its limit run {self.limit!r} but not its coordinates")

    @property
    def points(self) -> tuple[Point, ...]:
        """The grid's points: :data:`LIMIT` first where the loss has one, then its values."""
        return ((LIMIT,) if self.limit is not None else ()) + self.values


def _knob_reduction(symbol: str, value: str, run: str, source: str) -> str:
    return f"{symbol} = {value} is {run} ({source}): the limit point is the {run} run of the seed"


#: the multi-class contest's recipe (an over-fitting run is ~15 minutes on a 2-core CPU; see the module docstring)
TUNING_RECIPE = "well-regularised"

CE = "cross-entropy"

#: notebook 06: the multi-class losses, the three values each is tuned over (paper default among them), and the
#: cross-entropy point
MULTICLASS_GRIDS: dict[str, Grid] = {
    "LS": Grid(
        "alpha", "α", (0.05, 0.1, 0.2), 0.1,
        _knob_reduction("α", "0", CE, "Szegedy et al. 2016; LS+ paper eq. 1 at α = 0"), CE, "α=0",
    ),
    "focal": Grid(
        "gamma", "γ", (1.0, 3.0, 5.0), 3.0,
        _knob_reduction("γ", "0", CE, "Lin et al. 2017: −(1 − p_t)^γ log p_t at γ = 0"), CE, "γ=0",
    ),
    "MbLS": Grid(
        "margin", "m", (2.0, 5.0, 10.0), 10.0,
        "no finite margin gives cross-entropy: the penalty λ·ReLU(max_j z_j − z_k − m) of Liu et al. 2022 vanishes "
        "only as m → ∞ (or at λ = 0, a knob not tuned here); the point m = ∞ is the cross-entropy run of the seed",
        CE, "m=∞",
    ),
    "LS+": Grid(
        "lsplus_alpha", "α", (0.25, 0.5, 0.75), 0.5,
        _knob_reduction("α", "0", CE, "Sambyal et al. 2024, Algorithm 1 line 7: (1 − α)·CE + α·KL(v^k ‖ p̂)"),
        CE, "α=0",
    ),
    "CCL-Net": Grid(
        "ccl_b", "b", (2.0, 3.0, 4.0), 2.0,
        "no point of CCL-Net is cross-entropy, so its grid has none: eq. (3) of Wei et al. 2020 adds "
        "KL(p^SL ‖ q) with weight 1, and the soft labels p^SL = softmax(−f_d) (eq. 2, f_d ≤ 4) are never one-hot; "
        "b ≥ 4 switches the hinge of eq. (1) off (f_d ≤ 4), the end of the family nearest cross-entropy",
    ),
    "DCA": Grid(
        "dca_beta", "β", (1.0, 5.0, 10.0), 1.0,
        _knob_reduction("β", "0", CE, "Liang et al. 2020: CE + β·|mean confidence − accuracy|"), CE, "β=0",
    ),
    "MDCA": Grid(
        "mdca_beta", "β", (1.0, 5.0, 10.0), 1.0,
        _knob_reduction("β", "0", CE, "Hebbalaguppe et al. 2022: CE + β·MDCA"), CE, "β=0",
    ),
}  # fmt: skip

#: notebook 13 (section 2): the multi-label losses, their values (ASL's γ⁻ with margin m fixed at 0.05, SPA's ζ⁻ with
#: k⁻ = 3, b⁻ = 1, LPR's λ) and the BCE point (eq. numbers of Cheng & Vasconcelos 2024)
MULTILABEL_GRIDS: dict[str, Grid] = {
    "focal": Grid(
        "focal_gamma_neg", "γ⁻", (2.0, 4.0, 6.0), 4.0,
        _knob_reduction("γ⁻", "0 (γ⁺ = 0 throughout)", "BCE", "eq. 7 is eq. 6"), "BCE", "γ⁻=0",
    ),
    "ASL": Grid(
        "asl_gamma_neg", "γ⁻", (2.0, 4.0, 6.0), 4.0,
        "ASL is BCE only at γ⁻ = 0 and margin m = 0 (eq. 8; up to the reference code's clamp of log p below "
        "v ≈ −18.4): the grid's margin is fixed at 0.05, so its BCE point is not a value of γ⁻ alone; it is the "
        "BCE run of the seed",
        "BCE", "γ⁻=0, m=0",
    ),
    "SPA": Grid(
        "spa_zeta_neg", "ζ⁻", (1.0, 3.0, 5.0), 5.0,
        "SPA is BCE at (ζ⁻, k⁻, b⁻) = (1, 1, 0) (eq. 16 with (ζ⁺, k⁺, b⁺) = (1, 1, 0)); the grid's ζ⁻ runs with "
        "k⁻ = 3, b⁻ = 1, so BCE is not a value of ζ⁻ (ζ⁻ = 0 is not allowed: ℓ₋ = softplus(·)/ζ⁻ divides by it); "
        "the BCE point is the BCE run of the seed",
        "BCE", "(ζ⁻, k⁻, b⁻)=(1, 1, 0)",
    ),
    "SPA+LPR": Grid(
        "lpr_weight", "λ", (0.3, 1.0, 3.0), 1.0,
        "λ = 0 is SPA at its paper values (eq. 21 without its LPR term), not BCE: the limit point is the SPA run "
        "of the seed",
        "SPA", "λ=0",
    ),
    "BCE+LPR": Grid(
        "lpr_weight", "λ", (0.3, 1.0, 3.0), 1.0,
        _knob_reduction("λ", "0", "BCE", "eq. 21 without its LPR term"), "BCE", "λ=0",
    ),
}  # fmt: skip


def point_label(grid: Grid, point: Point) -> str:
    """``"α=0.05"``; the limit point with the run it is: ``"α=0 (cross-entropy)"``."""
    if point is LIMIT:
        if grid.limit is None:
            raise ValueError(f"the grid of {grid.knob} has no cross-entropy point: {grid.reduction}")
        return f"{grid.limit_label} ({grid.limit})"
    return f"{grid.symbol}={point:g}"


def value_label(loss: str, grid: Grid, point: Point) -> str:
    """``"focal γ=1"``: a loss at one point of its grid."""
    return f"{loss} {point_label(grid, point)}"


def tuned_label(loss: str, grid: Grid, point: Point) -> str:
    """``"focal γ=1 (tuned)"``: the row of a loss trained with every seed at its chosen point."""
    return f"{value_label(loss, grid, point)} (tuned)"


def selection_nll(probs: torch.Tensor, labels: torch.Tensor, multilabel: bool, split_seed: int = 0) -> float:
    """NLL on the selection half of validation: :func:`helpers.calibration.split_calibration` with ``split_seed``, the
    split the notebook fits its calibrators with (stratified by class for multi-class labels, as there)."""
    stratify = None if multilabel else labels
    selection, _ = posthoc.split_calibration(len(labels), seed=split_seed, labels=stratify)
    score = metrics.multilabel_nll if multilabel else metrics.nll
    return float(score(probs[selection], labels[selection]))


def mean_scores(by_seed: Mapping[tuple[Point, int], float], seeds: Sequence[int]) -> dict[Point, float]:
    """A grid point's score: the mean of its selection NLLs over ``seeds`` (``by_seed[(point, seed)]``). A point
    that lacks one of the seeds is refused (its mean would not be comparable with the others')."""
    if not seeds:
        raise ValueError("no selection seeds: a score is the mean over at least one seed")
    points = list(dict.fromkeys(point for point, _ in by_seed))
    missing = [(point, seed) for point in points for seed in seeds if (point, seed) not in by_seed]
    if missing:
        raise ValueError(
            f"grid point(s) without a selection NLL at every seed {list(seeds)}: missing (point, seed) {missing}; "
            "train them (python -m helpers.course.train_runs train) before choosing"
        )
    return {point: sum(by_seed[(point, seed)] for seed in seeds) / len(seeds) for point in points}


def choose(scores: Mapping[Point, float], grid: Grid) -> Point:
    """The point with the lowest score; a tie goes to the paper default, then to the cross-entropy point, then to
    the smallest value. A grid without its default or (where it has one) its cross-entropy point, a point that is
    not in the grid, a NaN score (a run whose selection NLL could not be computed) and an empty grid are refused
    with a ValueError; an infinite score just loses."""
    if not scores:
        raise ValueError("no scores to choose from: the grid is empty; train at least one of its values")
    foreign = [point for point in scores if point not in grid.points]
    if foreign:
        raise ValueError(f"point(s) {foreign} are not in the grid of {grid.knob} {grid.points}")
    if grid.default not in scores:
        raise ValueError(f"the grid of {grid.knob} lacks its paper default {point_label(grid, grid.default)}")
    if grid.limit is not None and LIMIT not in scores:
        raise ValueError(
            f"the grid of {grid.knob} lacks its cross-entropy point {point_label(grid, LIMIT)}: {grid.reduction}"
        )
    undefined = [point for point, score in scores.items() if math.isnan(score)]
    if undefined:
        raise ValueError(
            f"NaN score for the point(s) {', '.join(map(str, undefined))}: a NaN is no selection NLL to compare; "
            "check those runs' validation probabilities (or train them again) before choosing"
        )
    best = min(scores.values())
    tied = [point for point, score in scores.items() if score == best]
    if grid.default in tied:
        return grid.default
    return LIMIT if LIMIT in tied else min(tied)


# ---------------------------------------------------------------------------------------------------- losses
#: the multi-label losses whose sigmoid output is biased by design (focusing weight, margin) and that φ maps back to
#: a posterior (notebook 07; Cheng & Vasconcelos 2024, eqs. 13–15)
PHI_LOSSES = ("focal", "ASL")


def phi_readout(loss: nn.Module, logits: torch.Tensor) -> torch.Tensor:
    """A grid run's probabilities read through φ: ``loss.recovered_proba`` (eqs. 13–15) for focal and ASL, the
    sigmoid for BCE (φ at γ⁻ = γ⁺ = 0, m = 0 is the identity: the BCE point of their grids). Another loss (SPA has
    its own inverse link, eq. 17) is refused."""
    base = loss.base if isinstance(loss, Composite) else loss
    with torch.no_grad():
        if isinstance(base, ASL):
            return base.recovered_proba(logits).float()
        if isinstance(base, BCE):
            return base.predict_proba(logits).float()
    raise ValueError(f"no φ read-out for {type(base).__name__}: φ inverts focal and ASL (the sigmoid for BCE)")


def multilabel_loss(name: str, value: float | None = None) -> nn.Module:
    """A multi-label course loss with its grid's hyper-parameter at ``value`` (the paper default when ``value`` is
    None); the other parameters as :func:`helpers.lessons.course_losses`. The grid's BCE point is not built here:
    it is the BCE (or SPA) run itself."""
    grid = MULTILABEL_GRIDS[name]
    value = grid.default if value is None else value
    factories: dict[str, Callable[[], nn.Module]] = {
        "focal": lambda: AsymmetricFocal(gamma_pos=0.0, gamma_neg=value),
        "ASL": lambda: ASL(gamma_pos=0.0, gamma_neg=value, margin=0.05, eps=1e-8),
        "SPA": lambda: SPA(1.0, 1.0, 0.0, value, 3.0, 1.0),
        "SPA+LPR": lambda: Composite(SPA(1.0, 1.0, 0.0, 5.0, 3.0, 1.0), [(value, LPR())]),
        "BCE+LPR": lambda: Composite(BCE(), [(value, LPR())]),
    }
    return factories[name]()


# ---------------------------------------------------------------------------------------------------- the choice
@dataclasses.dataclass
class Contest:
    """A fair contest's outcome: the grids, the grid table (:func:`grid_table`), the chosen point per loss, the
    runs at the chosen points (every seed, keyed by the tuned row's name), the rows (paper-default row, tuned row)
    per loss, the grid's runs ((loss, point, seed) → run) and the selection seeds."""

    grids: Mapping[str, Grid]
    grid: pd.DataFrame
    choices: dict[str, Point]
    runs: dict[Any, Any]
    rows: list[tuple[str, str]]
    grid_runs: dict[tuple[str, Point, int], Any]
    seeds: list[int]

    @property
    def row_names(self) -> list[str]:
        """Every loss's tuned row (its chosen point: the paper value, another value or cross-entropy)."""
        return [tuned for _, tuned in self.rows]

    @property
    def moved(self) -> list[tuple[str, str]]:
        """(paper row, tuned row) of the losses whose choice left the paper value."""
        return [
            pair
            for (loss, point), pair in zip(self.choices.items(), self.rows)
            if point is LIMIT or point != self.grids[loss].default
        ]

    @property
    def seeds_text(self) -> str:
        """``"seeds 0 and 1"`` (``"seed 0"`` where the configuration has one seed)."""
        return f"seed{'s' if len(self.seeds) > 1 else ''} {' and '.join(map(str, self.seeds))}"

    def table_rows(self, ts_suffix: str) -> list[str]:
        """The main table's rows: every loss's tuned row, raw and after temperature scaling (``ts_suffix``:
        " + TS" in 06, " + TS/label" in 13)."""
        return [f"{tuned}{suffix}" for tuned in self.row_names for suffix in ("", ts_suffix)]

    def pairs(self, reference: str, ts_suffix: str, prefix: str = "") -> list[tuple[str, str]]:
        """(row, reference) for every row of :meth:`table_rows`, each name after ``prefix`` (06: "<recipe>/")."""
        return [(f"{prefix}{row}", f"{prefix}{reference}") for row in self.table_rows(ts_suffix)]

    def choice_text(self, loss: str) -> str:
        """``"LS kept the paper value (α=0.1)"`` / ``"LS moved to α=0.05"`` / ``"LS moved to α=0 (cross-entropy)"``."""
        grid, point = self.grids[loss], self.choices[loss]
        if point is not LIMIT and point == grid.default:
            return f"{loss} kept the paper value ({point_label(grid, point)})"
        return f"{loss} moved to {point_label(grid, point)}"

    def record(self) -> dict[str, Any]:
        """The contest as JSON: per loss its grid (knob, values, paper default, cross-entropy point and reduction)
        and choice, the grid table, and the selection seeds."""
        return {
            "selection_seeds": list(self.seeds),
            "criterion": "NLL on the selection half of validation, mean over the selection seeds; ties to the "
            "paper default, then the cross-entropy point, then the smallest value",
            "grids": {
                loss: {
                    "knob": grid.knob,
                    "values": list(grid.values),
                    "paper_default": grid.default,
                    "limit": None if grid.limit is None else point_label(grid, LIMIT),
                    "reduction": grid.reduction,
                }
                for loss, grid in self.grids.items()
            },
            "grid": self.grid.to_dict(orient="records"),
            "choices": {loss: point_label(self.grids[loss], point) for loss, point in self.choices.items()},
            "rows": {paper: tuned for paper, tuned in self.rows},
        }


def grid_table(
    grid_runs: Mapping[tuple[str, Point, int], Any],
    grids: Mapping[str, Grid],
    labels: torch.Tensor,
    probabilities: Callable[[Any], torch.Tensor],
    multilabel: bool,
    seeds: Sequence[int],
    split_seed: int = 0,
) -> tuple[pd.DataFrame, dict[str, Point]]:
    """One row per (loss, point): its selection-half NLL at each seed and their mean, whether it is the paper
    default or the cross-entropy point and whether it was chosen; and the choice per loss (:func:`choose` on
    :func:`mean_scores`). ``probabilities(run)`` gives a run's validation probabilities."""
    by_seed: dict[str, dict[tuple[Point, int], float]] = {}
    for (loss, point, seed), run in grid_runs.items():
        if seed in seeds:
            nll = selection_nll(probabilities(run), labels, multilabel, split_seed)
            by_seed.setdefault(loss, {})[(point, seed)] = nll
    scores = {loss: mean_scores(values, seeds) for loss, values in by_seed.items()}
    choices = {loss: choose(by_point, grids[loss]) for loss, by_point in scores.items()}
    rows = [
        {
            "loss": loss,
            "hyper-parameter": point_label(grids[loss], point),
            **{f"selection NLL, seed {seed}": by_seed[loss][(point, seed)] for seed in seeds},
            "selection NLL": scores[loss][point],
            "paper default": "yes" if point is not LIMIT and point == grids[loss].default else "",
            "chosen": "yes" if point == choices[loss] else "",
        }
        for loss in scores
        for point in grids[loss].points
        if point in scores[loss]
    ]
    return pd.DataFrame(rows), choices


def phi_grid_table(
    grid_runs: Mapping[tuple[str, Point, int], Any],
    grids: Mapping[str, Grid],
    labels: torch.Tensor,
    seeds: Sequence[int],
    split_seed: int = 0,
) -> tuple[pd.DataFrame, dict[str, Point]]:
    """:func:`grid_table` for focal and ASL (:data:`PHI_LOSSES`) with every run read through φ
    (:func:`phi_readout`) instead of its sigmoid. The sigmoid read-out of γ⁻ > 0 is biased by design, so its NLL
    favours the BCE point by construction; φ's read-out is the one notebooks 07 and 13 (section 1) score these losses
    by. The course's addition, not a paper's protocol: a post-hoc choice on the grid runs' validation logits, which
    every run keeps, so it needs no new training. A loss whose grid lacks a run at a seed, or holds a run that is
    only planned, is skipped."""
    ready = {key: run for key, run in grid_runs.items() if getattr(run, "source", "") != "planned"}
    complete = [
        loss
        for loss in PHI_LOSSES
        if loss in grids and all((loss, point, seed) in ready for point in grids[loss].points for seed in seeds)
    ]
    runs = {key: run for key, run in ready.items() if key[0] in complete}
    if not runs:
        return pd.DataFrame(), {}
    return grid_table(runs, grids, labels, lambda run: phi_readout(run.loss, run.val_logits), True, seeds, split_seed)

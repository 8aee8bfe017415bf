"""A fair contest: every loss's hyper-parameter tuned with one budget on the same validation data.

Temperature scaling fits its one parameter on validation data; a training loss compared with it at its paper's
default value is handicapped. Here every loss gets the same budget:

1. **Grid** — the same number of values for every loss (:data:`MULTICLASS_GRIDS`, :data:`MULTILABEL_GRIDS`: three,
   the paper's default among them), one training seed (the configuration's first).
2. **Choice** — the value with the lowest NLL on the *selection half* of validation
   (:func:`helpers.calibration.split_calibration`, the half that post-hoc calibrators are not fitted on). NLL is
   a proper score: it rewards calibration and discrimination together, so a value cannot win by flattening every
   prediction. Ties go to the paper's default. The test split is never read. (Every run keeps the epoch of best
   NLL on the *whole* validation split, so both halves took part in choosing checkpoints; only the test split is
   untouched.)
3. **Evaluation** — the chosen value trained with every seed (:func:`helpers.course.tuned_multiclass_runs`,
   :func:`helpers.course.tuned_multilabel_runs`); the notebooks put these rows beside the paper-default rows.

The grid run at the default value and the tuning seed *is* the paper-default run of that seed (same definition,
same key), so it is loaded, not retrained, and the chosen value's tuning run is one of its evaluation runs. The
multi-class contest runs in the well-regularised recipe only: one over-fitting run is the wide CNN for 100 epochs,
about 15 minutes on a 2-core CPU.

The runs are declared for notebooks 06 and 11 (:data:`helpers.course.DECLARED_RUNS`), so
``python -m helpers.course.train_runs train [--engine ray]`` trains them like every other run, in two rounds: the grids,
then the chosen values once every grid point of a loss exists (as LS+ waits for its cross-entropy run).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
import torch
from torch import nn

from helpers import metrics
from helpers.calibration import posthoc
from helpers.losses import ASL, BCE, LPR, SPA, AsymmetricFocal, Composite


@dataclasses.dataclass(frozen=True)
class Grid:
    """One loss's hyper-parameter: its name (for a multi-class loss the configuration knob that sets it; a
    multi-label value goes to :func:`multilabel_loss`), its symbol, the values tried, and the paper's default."""

    knob: str
    symbol: str
    values: tuple[float, ...]
    default: float

    def __post_init__(self) -> None:
        if self.default not in self.values:
            raise ValueError(f"the grid of {self.knob} must contain its default {self.default}, got {self.values}")


#: the multi-class contest's recipe (an over-fitting run is ~15 minutes on a 2-core CPU; see the module docstring)
TUNING_RECIPE = "well-regularised"

#: notebook 06: the multi-class losses and the values each is tuned over (3 each; the paper default marked)
MULTICLASS_GRIDS: dict[str, Grid] = {
    "LS": Grid("alpha", "α", (0.05, 0.1, 0.2), 0.1),
    "focal": Grid("gamma", "γ", (1.0, 3.0, 5.0), 3.0),
    "MbLS": Grid("margin", "m", (2.0, 5.0, 10.0), 10.0),
    "LS+": Grid("lsplus_alpha", "α", (0.25, 0.5, 0.75), 0.5),
    "CCL-Net": Grid("ccl_b", "b", (2.0, 3.0, 4.0), 2.0),
    "DCA": Grid("dca_beta", "β", (1.0, 5.0, 10.0), 1.0),
    "MDCA": Grid("mdca_beta", "β", (1.0, 5.0, 10.0), 1.0),
}

#: notebook 11: the multi-label losses and their values (ASL's γ⁻ with margin m fixed at 0.05, SPA's ζ⁻, LPR's λ)
MULTILABEL_GRIDS: dict[str, Grid] = {
    "focal": Grid("focal_gamma_neg", "γ⁻", (2.0, 4.0, 6.0), 4.0),
    "ASL": Grid("asl_gamma_neg", "γ⁻", (2.0, 4.0, 6.0), 4.0),
    "SPA": Grid("spa_zeta_neg", "ζ⁻", (1.0, 3.0, 5.0), 5.0),
    "SPA+LPR": Grid("lpr_weight", "λ", (0.3, 1.0, 3.0), 1.0),
    "BCE+LPR": Grid("lpr_weight", "λ", (0.3, 1.0, 3.0), 1.0),
}


def value_label(loss: str, grid: Grid, value: float) -> str:
    """``"focal γ=1"``: a loss at one value of its grid."""
    return f"{loss} {grid.symbol}={value:g}"


def tuned_label(loss: str, grid: Grid, value: float) -> str:
    """``"focal γ=1 (tuned)"``: the row of a loss trained with every seed at its chosen value."""
    return f"{value_label(loss, grid, value)} (tuned)"


def selection_nll(probs: torch.Tensor, labels: torch.Tensor, multilabel: bool, split_seed: int = 0) -> float:
    """NLL on the selection half of validation: :func:`helpers.calibration.split_calibration` with ``split_seed``, the
    split the notebook fits its calibrators with (stratified by class for multi-class labels, as there)."""
    stratify = None if multilabel else labels
    selection, _ = posthoc.split_calibration(len(labels), seed=split_seed, labels=stratify)
    score = metrics.multilabel_nll if multilabel else metrics.nll
    return float(score(probs[selection], labels[selection]))


def choose(scores: Mapping[float, float], default: float) -> float:
    """The value with the lowest score; the default wins a tie. A NaN score (a run whose selection NLL could not be
    computed) and an empty grid are refused with a ValueError; an infinite score just loses."""
    if not scores:
        raise ValueError("no scores to choose from: the grid is empty; train at least one of its values")
    undefined = [value for value, score in scores.items() if math.isnan(score)]
    if undefined:
        raise ValueError(
            f"NaN score for the value(s) {', '.join(map(str, undefined))}: a NaN is no selection NLL to compare; "
            "check those runs' validation probabilities (or train them again) before choosing"
        )
    best = min(scores.values())
    return default if scores.get(default) == best else min(scores, key=lambda value: (scores[value], value))


# ---------------------------------------------------------------------------------------------------- losses
def multilabel_loss(name: str, value: float | None = None) -> nn.Module:
    """A multi-label course loss with its grid's hyper-parameter at ``value`` (the paper default when ``value`` is
    None); the other parameters as :func:`helpers.lessons.course_losses`."""
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
    """A fair contest's outcome: the grid table (:func:`grid_table`), the chosen value per loss, the runs at the
    chosen values (every seed), the table rows, (paper-default row, tuned row) per loss — tuned row ``None`` where
    the choice kept the paper value (the same runs) — and the grid's runs ((loss, value) → run at the tuning seed)."""

    grid: pd.DataFrame
    choices: dict[str, float]
    runs: dict[Any, Any]
    rows: list[tuple[str, str | None]]
    grid_runs: dict[tuple[str, float], Any]

    @property
    def row_names(self) -> list[str]:
        """Every loss's paper-default row followed by its tuned row where the choice moved."""
        return [name for pair in self.rows for name in pair if name is not None]


def grid_table(
    grid_runs: Mapping[tuple[str, float], Any],
    grids: Mapping[str, Grid],
    labels: torch.Tensor,
    probabilities: Callable[[Any], torch.Tensor],
    multilabel: bool,
    split_seed: int = 0,
) -> tuple[pd.DataFrame, dict[str, float]]:
    """One row per (loss, value): its selection-half NLL, whether it is the default and whether it was chosen;
    and the choice per loss. ``probabilities(run)`` gives a run's validation probabilities."""
    scores: dict[str, dict[float, float]] = {}
    for (loss, value), run in grid_runs.items():
        scores.setdefault(loss, {})[value] = selection_nll(probabilities(run), labels, multilabel, split_seed)
    choices = {loss: choose(by_value, grids[loss].default) for loss, by_value in scores.items()}
    rows = [
        {
            "loss": loss,
            "hyper-parameter": value_label("", grids[loss], value).strip(),
            "selection NLL": by_value[value],
            "paper default": "yes" if value == grids[loss].default else "",
            "chosen": "yes" if value == choices[loss] else "",
        }
        for loss, by_value in scores.items()
        for value in grids[loss].values
        if value in by_value
    ]
    return pd.DataFrame(rows), choices

"""Shared pieces of the multi-label notebooks 07–11: the course's set of losses, their training configuration,
probability read-outs (with φ), the computed Table 1 of the SPA paper, label-dependency statistics and
bootstrap tables.

Notebooks 08–11 build their losses and configurations here, so the run cache (``helpers.training.run_store``) sees the
same loss and the same configuration in every notebook and trains each model once. Equation numbers refer to
Cheng & Vasconcelos, "Towards Calibrated Multi-label Deep Neural Networks", CVPR 2024.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from helpers import metrics
from helpers.losses import ASL, BCE, LDACE, LPR, SPA, AsymmetricFocal, Composite, LDACEWithCCL, properness
from helpers.metrics import stats
from helpers.training import recipes

__all__ = [
    "LOSS_NAMES",
    "course_losses",
    "multilabel_train_config",
    "probability_readouts",
    "risk_minimiser_curves",
    "loss_properties",
    "label_correlation",
    "bootstrap_table",
    "format_interval_table",
    "binned_calibration_with_counts",
    "ideal_output",
]

#: the trained multi-label losses of notebooks 08–11, in the order the tables list them
LOSS_NAMES = ("BCE", "focal", "ASL", "SPA", "SPA+LPR", "BCE+LPR", "LDACE", "LDACE+CCL")


def course_losses(names: tuple[str, ...] | list[str] = LOSS_NAMES, lpr_weight: float = 1.0) -> dict[str, nn.Module]:
    """Fresh loss objects by name, with the hyper-parameters every notebook uses.

    focal: asymmetric focal (eq. 7) with (γ⁺, γ⁻) = (0, 4); ASL: eq. (8) with the reference defaults
    (γ⁺, γ⁻, m) = (0, 4, 0.05); SPA: eq. (16) with the paper's (1, 1, 0, 5, 3, 1); LPR: eq. (20) with weight
    ``lpr_weight`` (λ of eq. 21; the paper's value is not in our copy, 1 is the course's choice); LDACE (+CCL):
    the reference reading, probability p².

    Also available, but in no notebook's list (so no declared run or key changes): "ASL (detached)", the same ASL
    with the focusing weight detached as Ridnik et al.'s code does by default (``detach_focusing_weight=True``;
    a new run key). A profile that lists it trains it; its recovery read-out is ψ, not φ
    (:func:`probability_readouts`).
    """
    factories: dict[str, Callable[[], nn.Module]] = {
        "BCE": BCE,
        "focal": lambda: AsymmetricFocal(gamma_pos=0.0, gamma_neg=4.0),
        "ASL": lambda: ASL(gamma_pos=0.0, gamma_neg=4.0, margin=0.05, eps=1e-8),
        "ASL (detached)": lambda: ASL(gamma_pos=0.0, gamma_neg=4.0, margin=0.05, eps=1e-8, detach_focusing_weight=True),
        "SPA": lambda: SPA(1.0, 1.0, 0.0, 5.0, 3.0, 1.0),
        "SPA+LPR": lambda: Composite(SPA(1.0, 1.0, 0.0, 5.0, 3.0, 1.0), [(lpr_weight, LPR())]),
        "BCE+LPR": lambda: Composite(BCE(), [(lpr_weight, LPR())]),
        "LDACE": lambda: LDACE(diagonal="p_squared"),
        "LDACE+CCL": lambda: LDACEWithCCL(diagonal="p_squared", ccl_weight=1.0, n_bins=1),
    }
    unknown = [n for n in names if n not in factories]
    if unknown:
        raise ValueError(f"unknown loss name(s) {unknown}; choose from {list(factories)}")
    return {name: factories[name]() for name in names}


def multilabel_train_config(epochs: int, lr: float, batch_size: int, seed: int = 0, device: str = "auto"):
    """The ``well-regularised`` recipe of :mod:`helpers.training.recipes` WITHOUT augmentation.

    The synthetic ChestMNIST-like posterior is a function of the stored pixels at fixed anatomical positions
    (the heart is off-centre, hernia and edema have one position each): a flipped, shifted or rotated image has a
    different exact posterior than the label it carries, so augmenting would corrupt the known ground truth.
    """
    return recipes.recipe_config(
        "well-regularised", epochs=epochs, lr=lr, batch_size=batch_size, seed=seed, device=device, augment=False
    )


def probability_readouts(name: str, loss: nn.Module, logits: torch.Tensor) -> dict[str, torch.Tensor]:
    """``{name: loss.predict_proba(logits)}``, plus ``{name+"+φ": φ(σ(logits))}`` for focal / ASL (eqs. 13–15):
    the same trained model read through the recovery map, as "Focal+φ" / "ASY+φ" in Table 3. A loss trained with
    a detached focusing weight gets ``name+"+ψ"`` instead, its own map (:func:`helpers.losses.detached_recovery`)."""
    with torch.no_grad():
        readouts = {name: loss.predict_proba(logits).float()}
        base = loss.base if isinstance(loss, Composite) else loss
        if isinstance(base, ASL):
            symbol = "ψ" if base.detach_focusing_weight else "φ"
            readouts[f"{name}+{symbol}"] = base.recovered_proba(logits).float()
    return readouts


def risk_minimiser_curves(
    losses: Mapping[str, nn.Module], eta: torch.Tensor, logit_range: tuple[float, float] = (-40.0, 40.0)
) -> dict[str, properness.RiskMinimum]:
    """:func:`helpers.losses.conditional_risk_minimiser` (eq. 11) for several per-label losses at once."""
    return {
        name: properness.conditional_risk_minimiser(loss, eta, logit_range=logit_range) for name, loss in losses.items()
    }


def loss_properties(
    loss: nn.Module,
    recover: Callable[[torch.Tensor], torch.Tensor] | None = None,
    tolerance: float = 1e-4,
    grid: int = 199,
) -> dict[str, Any]:
    """The three columns of the SPA paper's Table 1, measured instead of asserted.

    * asymmetric: ℓ₊(v) ≠ ℓ₋(−v) for some v (BCE is symmetric: ℓ₊(η̂) = ℓ₋(1 − η̂));
    * strictly proper: the loss's own estimate at the conditional-risk minimiser returns η (max error <
      ``tolerance`` over η ∈ [0.005, 0.995]) and no minimiser sits at the end of the logit range;
    * recover η: the map η ↦ minimiser is injective (minimising logits strictly increasing, none at the range
      end), so some map recovers η; if ``recover`` (e.g. φ of eq. 14 applied to σ(v*)) is given, it must also
      return η to ``tolerance`` on the η where the minimiser is interior.

    Returns the three booleans plus the measured maximum errors.
    """
    eta = torch.linspace(0.005, 0.995, grid, dtype=torch.float64)
    v = torch.linspace(-8.0, 8.0, 161, dtype=torch.float64).reshape(-1, 1)
    with torch.no_grad():
        loss_pos, loss_neg = properness.partial_losses(loss, v)
        mirrored_neg = properness.partial_losses(loss, -v)[1]
    asymmetric = bool((loss_pos - mirrored_neg).abs().max() > 1e-9)
    minimum = properness.conditional_risk_minimiser(loss, eta)
    interior = ~minimum.at_boundary
    own_error = float((minimum.proba - eta).abs().max())
    injective = bool(interior.all()) and bool((minimum.logits.diff() > 0).all())
    recover_error = None
    if recover is not None and bool(interior.any()):
        recovered = recover(torch.sigmoid(minimum.logits[interior]))
        recover_error = float((recovered.double() - eta[interior]).abs().max())
    recovers = injective and (recover_error is None or recover_error < tolerance)
    return {
        "asymmetric": asymmetric,
        "strictly_proper": own_error < tolerance and bool(interior.all()),
        "recover_eta": recovers,
        "max_error_own_estimate": own_error,
        "max_error_recovered": recover_error,
        "n_eta_at_boundary": int((~interior).sum()),
    }


def label_correlation(labels: torch.Tensor) -> torch.Tensor:
    """Pearson (φ) correlation between the binary label columns (T, T), from (N, T) labels in {0, 1}.

    Equals ``numpy.corrcoef(labels.T)``; a column that never varies gives NaN in its row and column.
    """
    if labels.ndim != 2:
        raise ValueError(f"labels must be (N, T), got shape {tuple(labels.shape)}")
    y = labels.to(torch.float64)
    centred = y - y.mean(0)
    covariance = centred.T @ centred / y.shape[0]
    scale = covariance.diagonal().sqrt()
    return covariance / (scale[:, None] * scale[None, :])


def bootstrap_table(
    probs_by_model: Mapping[str, torch.Tensor],
    labels: torch.Tensor,
    metric_fns: Mapping[str, Callable[..., float]],
    n: int = 1000,
    seed: int = 0,
    targets: Mapping[str, torch.Tensor] | None = None,
) -> dict[str, dict[str, metrics.BootstrapResult]]:
    """``{model: {metric: metrics.bootstrap(fn, probs, labels, n, seed)}}``; the same ``seed`` gives every model
    the same resamples (paired comparison). ``targets`` overrides ``labels`` for named metrics (e.g. the true
    posteriors for a true-calibration-error metric: its rows are resampled together with the predictions)."""
    targets = targets or {}
    # Each resample is a small tensor job: torch's intra-op threads cost more than they save there (measured 10–40x
    # faster with one thread on 2 shared CPU cores), so the table runs single-threaded and restores the setting.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {
            model: {
                name: metrics.bootstrap(fn, probs, targets.get(name, labels), n=n, seed=seed)
                for name, fn in metric_fns.items()
            }
            for model, probs in probs_by_model.items()
        }
    finally:
        torch.set_num_threads(threads)


def format_interval_table(
    table: Mapping[str, Mapping[str, metrics.BootstrapResult]], scale: float = 100.0, digits: int = 1
) -> str:
    """A plain-text table "estimate [low, high]" (values multiplied by ``scale``, e.g. percent)."""
    columns = list(next(iter(table.values())))
    width = max(len(c) for c in columns) + 2
    width = max(width, 7 + 2 * (digits + 4))
    name_width = max(len(m) for m in table) + 2
    lines = [" " * name_width + "".join(f"{c:>{width}s}" for c in columns)]
    for model, row in table.items():
        cells = [
            f"{scale * r.estimate:.{digits}f} [{scale * r.low:.{digits}f},{scale * r.high:.{digits}f}]"
            for r in row.values()
        ]
        lines.append(f"{model:{name_width}s}" + "".join(f"{c:>{width}s}" for c in cells))
    return "\n".join(lines)


def binned_calibration_with_counts(
    probs: torch.Tensor, labels: torch.Tensor, n_bins: int = metrics.DEFAULT_N_BINS
) -> dict[str, float]:
    """The SPA / LDACE papers' binned calibration errors of one model, with the bin counts that say how noisy
    they are (equal-width bins, :mod:`helpers.metrics.multilabel`).

    ``ace`` / ``mce``: pooled over every (image, label) forecast (the ACE weighs every non-empty bin equally, so a
    bin holding a handful of forecasts counts as much as one holding thousands); ``ace_per_label``: the ACE of each
    label's N forecasts, averaged over labels. Counts: ``pooled_nonempty_bins``, ``pooled_smallest_bin`` (forecasts
    in the least-filled non-empty pooled bin) and ``nonempty_bins_per_label`` (mean over labels).
    """
    pooled = metrics.reliability_bins(probs, labels, n_bins=n_bins, multilabel=True)
    per_label = [
        metrics.reliability_bins(probs[:, t : t + 1], labels[:, t : t + 1], n_bins=n_bins, multilabel=True)
        for t in range(probs.shape[1])
    ]
    return {
        "ace": pooled.average_calibration_error,
        "mce": pooled.mce,
        "ace_per_label": metrics.multilabel_average_calibration_error(probs, labels, n_bins, per_label=True),
        "pooled_nonempty_bins": int(pooled.nonempty.sum()),
        "pooled_smallest_bin": int(pooled.counts[pooled.nonempty].min()),
        "nonempty_bins_per_label": float(sum(int(b.nonempty.sum()) for b in per_label) / len(per_label)),
    }


def ideal_output(loss: nn.Module, eta, n_grid: int = 801) -> torch.Tensor:
    """η̂*(η): what a per-label loss outputs at its population optimum, ``loss.predict_proba(v*(η))`` with v* the
    minimiser of the conditional risk (eq. 11), for every entry of ``eta`` (any shape, values in (0, 1)).

    Applied to a synthetic set's exact posteriors it gives the loss's ideal model (07's maps): the same per-label
    ranking as η wherever v* is strictly increasing, and the distortion the loss itself causes, free of training
    error. v* is computed by :func:`helpers.losses.conditional_risk_minimiser` on ``n_grid`` logits
    logit(η) spanning the entries' range and interpolated linearly in logit(η) (v* is monotone and smooth in it).
    Where v* runs to the end of the searched logit range (ASL with γ⁺ = 0 for η ≥ 0.9637: the infimum is at +∞)
    the output is σ(40), which rounds to 1.
    """
    eta = torch.as_tensor(eta, dtype=torch.float64)
    if eta.numel() == 0 or not bool(((eta > 0) & (eta < 1)).all()):
        raise ValueError("eta must be probabilities strictly inside (0, 1) (exact posteriors of a synthetic set)")
    if n_grid < 2:
        raise ValueError(f"n_grid must be at least 2, got {n_grid}")
    scores = torch.special.logit(eta).reshape(-1)
    grid = torch.linspace(float(scores.min()), float(scores.max()), n_grid, dtype=torch.float64)
    minimum = properness.conditional_risk_minimiser(loss, torch.sigmoid(grid))
    logits = np.interp(scores.numpy(), grid.numpy(), minimum.logits.numpy())
    with torch.no_grad():
        return loss.predict_proba(torch.from_numpy(logits).reshape(eta.shape)).double()


__all__ += ["equal_mass_reliability"]


def equal_mass_reliability(probs: Any, labels: Any, n_bins: int = 15) -> dict[str, np.ndarray]:
    """Pooled multi-label reliability in equal-mass bins: every (image, finding) forecast sorted by its predicted
    probability and cut into ``n_bins`` bins of (nearly) equal count. With ~5 % positives, 15 equal-width bins put
    ~85 % of the forecasts into the first bin; equal-mass bins put the bins where the forecasts are. Returns numpy
    arrays per bin: ``mean_predicted``, ``frequency`` (share of "present"), ``counts``."""
    p = torch.as_tensor(probs, dtype=torch.float64).reshape(-1)
    y = torch.as_tensor(labels, dtype=torch.float64).reshape(-1)
    if p.shape != y.shape:
        raise ValueError(f"probs and labels must have the same number of entries, got {p.numel()} and {y.numel()}")
    if n_bins < 1 or n_bins > p.numel():
        raise ValueError(f"n_bins must be between 1 and the number of forecasts ({p.numel()}), got {n_bins}")
    order = torch.argsort(p, stable=True)
    chunks = torch.tensor_split(order, n_bins)
    return {
        "mean_predicted": np.array([float(p[c].mean()) for c in chunks]),
        "frequency": np.array([float(y[c].mean()) for c in chunks]),
        "counts": np.array([len(c) for c in chunks]),
    }


# ----------------------------------------------------------------------------------------------------------------
# notebook 08: every read-out of the stored runs against BCE, over seeds (the tables' plumbing, out of the notebook)
# ----------------------------------------------------------------------------------------------------------------
__all__ += ["readouts_by_model", "evaluate_against_bce", "evaluation_tables"]

#: metrics of the seed summaries (mean ± sd) and of the paired differences against BCE
SUMMARY_METRICS: dict[str, Callable[..., float]] = {
    "macro_auroc": metrics.macro_auroc,
    "map_per_class": metrics.map_per_class,
    "map_per_example": metrics.map_per_example,
    "multilabel_brier": metrics.multilabel_brier,
    "multilabel_nll": metrics.multilabel_nll,
    "true_rms": metrics.true_rms,
    "multilabel_ece": metrics.multilabel_ece,
    "multilabel_average_calibration_error": metrics.multilabel_average_calibration_error,
}
DIFFERENCE_METRICS = ("macro_auroc", "map_per_class", "multilabel_brier", "multilabel_nll", "true_rms",
                      "multilabel_average_calibration_error")  # fmt: skip
RANKING_METRICS = ("macro_auroc", "map_per_class")
#: column headers in words (the course's METRIC_LABELS, with the names the multi-label tables use)
TABLE_LABELS = {
    "macro_auroc": "AUROC",
    "map_per_class": "mAP@y",
    "map_per_example": "mAP@x",
    "multilabel_brier": "Brier",
    "multilabel_nll": "NLL",
    "true_rms": "RMS error vs exact posteriors",
    "multilabel_ece": "ECE",
    "multilabel_average_calibration_error": "ACE",
    "multilabel_smooth_ece": "smooth ECE",
    "non-empty bins": "non-empty bins",
    "smallest bin": "smallest bin",
}


def readouts_by_model(runs: Mapping[tuple[str, int], Any], bundle: Any) -> dict[str, list[torch.Tensor]]:
    """{row name: [test probabilities per seed]} for stored runs ``{(loss name, seed): run}`` (each with ``loss``
    and ``test_logits``): every read-out of :func:`probability_readouts` (e.g. "ASL" and "ASL+φ"), then the
    constant-prevalence predictor (each finding's training prevalence) and the Bayes model (exact posteriors)."""
    by_model: dict[str, list[torch.Tensor]] = {}
    for (name, _seed), run in runs.items():
        for readout, probs in probability_readouts(name, run.loss, run.test_logits).items():
            by_model.setdefault(readout, []).append(probs)
    truth = bundle.true_posteriors["test"].float()
    by_model["constant prevalence"] = [bundle.train.labels.float().mean(0).expand_as(truth).clone()]
    by_model["Bayes"] = [truth]
    return by_model


def evaluate_against_bce(
    probs: Mapping[str, list[torch.Tensor]],
    labels: torch.Tensor,
    truth: torch.Tensor,
    compared: tuple[str, ...] = ("ASL", "SPA", "SPA+LPR", "BCE+LPR"),
    n: int = 1000,
    seed: int = 0,
) -> tuple[dict, dict]:
    """(summaries, differences): mean ± sd over seeds of :data:`SUMMARY_METRICS` for every row, plus the binning
    diagnostics of the first seed (non-empty bins, smallest bin, pooled smooth ECE); and the paired bootstrap
    differences against BCE of :data:`DIFFERENCE_METRICS` for the ``compared`` rows present (ASL: no ranking
    metrics, its ranking is compared through focal/ASL + φ elsewhere)."""
    summaries = stats.seed_summaries(probs, labels, SUMMARY_METRICS, targets={"true_rms": truth})
    for model, seeds_probs in probs.items():
        bins = metrics.reliability_bins(seeds_probs[0], labels, multilabel=True)
        summaries[model]["non-empty bins"] = [int(bins.nonempty.sum())]
        summaries[model]["smallest bin"] = [int(bins.counts[bins.nonempty].min())]
        summaries[model]["multilabel_smooth_ece"] = [metrics.multilabel_smooth_ece(seeds_probs[0], labels)]
    differences = {}
    for model in (m for m in compared if m in probs):
        fns = {k: SUMMARY_METRICS[k] for k in DIFFERENCE_METRICS if not (model == "ASL" and k in RANKING_METRICS)}
        differences[model] = stats.paired_differences(
            {model: probs[model], "BCE": probs["BCE"]}, labels, fns, reference="BCE", n=n, seed=seed,
            targets={"true_rms": truth},
        )[model]  # fmt: skip
    return summaries, differences


def evaluation_tables(summaries: Mapping, differences: Mapping) -> list[tuple[pd.DataFrame, str | None]]:
    """The tables of notebook 08's section 6, headers in words: (table, note printed under it or None) for the
    ranking, the proper scores, the binned calibration diagnostics, and the paired differences against BCE of the
    ranking metrics (rows with every metric) and of the proper scores and ACE."""
    digits = {"multilabel_brier": 4, "multilabel_nll": 4, "true_rms": 2}
    tables: list[tuple[pd.DataFrame, str | None]] = [
        (stats.summary_table(summaries, list(RANKING_METRICS) + ["map_per_example"], labels=TABLE_LABELS), None),
        (
            stats.summary_table(
                summaries, ["multilabel_brier", "multilabel_nll", "true_rms"], digits=digits, labels=TABLE_LABELS
            ),
            None,
        ),  # fmt: skip
        (
            stats.summary_table(
                summaries,
                [
                    "multilabel_ece",
                    "multilabel_average_calibration_error",
                    "non-empty bins",
                    "smallest bin",
                    "multilabel_smooth_ece",
                ],
                scale={"non-empty bins": 1, "smallest bin": 1},
                digits={"non-empty bins": 0, "smallest bin": 0, "multilabel_ece": 2, "multilabel_smooth_ece": 2},
                labels=TABLE_LABELS,
            ),
            None,
        ),  # fmt: skip
    ]
    full = {m: r for m, r in differences.items() if set(r) == set(DIFFERENCE_METRICS)}
    for rows, columns in [
        (full, list(RANKING_METRICS)),
        (differences, ["multilabel_brier", "multilabel_nll", "true_rms", "multilabel_average_calibration_error"]),
    ]:
        table = stats.difference_table(rows, "BCE", columns, digits=digits, labels=TABLE_LABELS)
        tables.append((table.table, table.note))
    return tables


def term_distortion_ablation(eta, distorted, labels, queries, chunk: int = 500) -> dict[str, torch.Tensor]:
    """AP of every query (eq. 23 scores, Cheng & Vasconcelos, CVPR 2024, sec. 5.3) when a per-label distortion
    η → η̂ is applied to the query's wanted terms only, to its unwanted terms only, to both, or to neither.

    ``eta`` and ``distorted`` are (N, T) probabilities of the same images (e.g. the exact posteriors and a loss's
    :func:`ideal_output` of them), ``labels`` (N, T) the database labels, ``queries`` (Q, T) signed label rows.
    The mixed scores are sums of eq. (23)'s log terms: log ŝ(g, all) − log ŝ(g, wanted) + log ŝ(η, wanted)
    swaps the wanted terms back to η, so a saturated unwanted output (η̂ = 1, term −∞) stays −∞ as in "both".
    Returns {"exact", "wanted terms only", "unwanted terms only", "both"}: (Q,) AP, NaN without a relevant image.
    """
    eta, distorted = torch.as_tensor(eta, dtype=torch.float64), torch.as_tensor(distorted, dtype=torch.float64)
    if eta.shape != distorted.shape:
        raise ValueError(
            f"eta and distorted must have the same shape, got {tuple(eta.shape)}, {tuple(distorted.shape)}"
        )
    if chunk < 1:
        raise ValueError(f"chunk must be a positive number of queries, got {chunk}")
    queries = torch.as_tensor(queries)
    out: dict[str, list[torch.Tensor]] = {"exact": [], "wanted terms only": [], "unwanted terms only": [], "both": []}
    for start in range(0, queries.shape[0], chunk):
        block = queries[start : start + chunk]
        wanted = block.clamp(min=0)  # the same queries without their unwanted labels
        true_all, true_wanted = metrics.query_log_scores(eta, block), metrics.query_log_scores(eta, wanted)
        g_all, g_wanted = metrics.query_log_scores(distorted, block), metrics.query_log_scores(distorted, wanted)
        relevant = metrics.query_relevance(torch.as_tensor(labels), block)
        scores = {
            "exact": true_all,
            "wanted terms only": true_all - true_wanted + g_wanted,
            "unwanted terms only": g_all - g_wanted + true_wanted,
            "both": g_all,
        }
        for name, s in scores.items():
            out[name].append(metrics.average_precision(s, relevant))
    return {name: torch.cat(parts) if parts else torch.empty(0) for name, parts in out.items()}


def ablation_table(aps: Mapping[str, torch.Tensor], queries) -> pd.DataFrame:
    """Mean change of AP against the exact scores (points) by query length, for each distortion of
    :func:`term_distortion_ablation`, plus the "both" row over the queries without an unwanted label."""
    queries = torch.as_tensor(queries)
    lengths, no_unwanted = (queries != 0).sum(dim=1), ~(queries == -1).any(dim=1)
    exact = aps["exact"]
    valid = ~torch.isnan(exact)
    rows: dict[str, dict[str, float]] = {}
    selections = [(name, name, torch.ones_like(valid)) for name in ("wanted terms only", "unwanted terms only", "both")]
    selections.append(("both, queries with no unwanted label", "both", no_unwanted))
    for row, key, mask in selections:
        rows[row] = {}
        for length in sorted(int(v) for v in lengths.unique()):
            keep = valid & mask & (lengths == length)
            rows[row][f"L={length}"] = (
                float(100 * (aps[key][keep] - exact[keep]).mean()) if keep.any() else float("nan")
            )
    return pd.DataFrame(rows).T

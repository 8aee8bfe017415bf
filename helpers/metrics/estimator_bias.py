"""How far calibration-error estimates fall from the truth, on a synthetic set whose exact posteriors are known.

Notebook 01's estimator-bias study. A test set of size n is drawn from the population "an image of the synthetic
pool, with a label from its exact posterior": n image indices uniformly with replacement, and for each a fresh
label y ~ p*(· | x) (:func:`draw_test_sets`). Fresh labels make every draw a sample of the generator's own
distribution; resampling one fixed labelling of the pool would add that labelling's noise to every draw. Every
estimator sees the same draws of every model (:func:`estimator_study`) and is summarised by its mean and standard
deviation over the draws, to be compared with the exact value.

Exact values (:func:`exact_top_label_errors`). The over-confident model p̂ = (1 − λ) p* + λ e_ŷ with
ŷ = argmax_k p*_k (:func:`sharpened`) has confidence ĉ = (1 − λ) c* + λ, an increasing function of c* = max_k p*_k,
so P(Y = ŷ | ĉ) = c* exactly and its top-label calibration errors are

    CE_1 = E|ĉ − c*| = λ E[1 − c*]   (the L1 error binned and smooth ECE estimate),
    CE_2 = (E[(ĉ − c*)²])^½ = λ (E[(1 − c*)²])^½   (the L2 error the debiased ECE of Kumar et al. 2019 estimates),

with expectations over the pool's images. λ = 0 is the Bayes model p̂ = p*, perfectly calibrated: CE_1 = CE_2 = 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from helpers.metrics import bootstrapping

__all__ = ["sharpened", "exact_top_label_errors", "draw_test_sets", "estimator_study", "study_table"]


def _posteriors(posteriors: Any) -> torch.Tensor:
    p = torch.as_tensor(posteriors).to(torch.float64)
    if p.ndim != 2 or p.shape[0] == 0 or p.shape[1] < 2:
        raise ValueError(f"posteriors must be a non-empty (N, K) matrix with K >= 2, got shape {tuple(p.shape)}")
    if not bool(torch.isfinite(p).all()) or bool((p < 0).any()) or float((p.sum(1) - 1).abs().max()) > 1e-6:
        raise ValueError(
            "posteriors must be finite, non-negative rows summing to 1 (exact P(y | x) of a synthetic "
            "multi-class set, e.g. bundle.true_posteriors['test'])"
        )
    return p


def _check_lam(lam: float) -> float:
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam (the weight moved onto the predicted class) must be a number in [0, 1], got {lam!r}")
    return float(lam)


def sharpened(posteriors: Any, lam: float) -> torch.Tensor:
    """(1 − λ) p* + λ e_ŷ with ŷ = argmax p*: the same predictions, over-confident by a known amount (float64)."""
    p = _posteriors(posteriors)
    lam = _check_lam(lam)
    one_hot = torch.nn.functional.one_hot(p.argmax(1), p.shape[1]).to(torch.float64)
    return (1.0 - lam) * p + lam * one_hot


def exact_top_label_errors(posteriors: Any, lam: float) -> tuple[float, float]:
    """(CE_1, CE_2) of :func:`sharpened` ``(posteriors, lam)`` over the images of ``posteriors`` (module doc)."""
    p = _posteriors(posteriors)
    lam = _check_lam(lam)
    shortfall = 1.0 - p.max(1).values
    return lam * float(shortfall.mean()), lam * float(shortfall.pow(2).mean().sqrt())


def draw_test_sets(
    posteriors: Any, n: int, repeats: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``repeats`` test sets of ``n`` (image, label) pairs: image indices (repeats, n) drawn uniformly with
    replacement and labels (repeats, n) drawn from each image's exact posterior."""
    p = _posteriors(posteriors)
    for name, value in (("n", n), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    indices = torch.randint(p.shape[0], (repeats, n), generator=generator)
    labels = torch.multinomial(p[indices.reshape(-1)], 1, generator=generator).reshape(repeats, n)
    return indices, labels


def estimator_study(
    models: Mapping[str, Any],
    posteriors: Any,
    estimators: Mapping[str, Callable[..., float]],
    sample_sizes: Sequence[int],
    repeats: int,
    repeats_by_estimator: Mapping[str, int] | None = None,
    seed: int = 0,
) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """{model: {estimator: (means, sds)}}, one entry per sample size, over ``repeats`` test sets per size.

    ``models`` maps a name to its (N, K) probabilities on the pool's N images (the rows of ``posteriors``);
    ``estimators`` maps a name to a metric ``f(probs, labels) -> float`` (e.g. ``metrics.ece``). For each size the
    test sets are :func:`draw_test_sets` with one generator seeded by ``seed`` (sizes in order), shared by every
    model and estimator; an estimator listed in ``repeats_by_estimator`` (a slow one such as relplot's smooth ECE)
    uses only the first that many of them. sd is the standard deviation over draws (ddof = 0). The metrics run with
    one CPU thread: on their small tensors that is several times faster than two (as for the paired bootstrap).
    """
    p = _posteriors(posteriors)
    probs = {name: torch.as_tensor(q).to(torch.float64) for name, q in models.items()}
    wrong = {name: tuple(q.shape) for name, q in probs.items() if q.shape != p.shape}
    if wrong:
        raise ValueError(
            f"every model needs probabilities of shape {tuple(p.shape)} (one row per pool image), got {wrong}"
        )
    counts = {name: (repeats_by_estimator or {}).get(name, repeats) for name in estimators}
    bad = {name: count for name, count in counts.items() if not 1 <= count <= repeats}
    if bad:
        raise ValueError(f"repeats_by_estimator must lie in [1, repeats={repeats}], got {bad}")
    generator = torch.Generator().manual_seed(seed)
    values = {model: {name: [] for name in estimators} for model in probs}
    with bootstrapping.one_cpu_thread():
        for n in sample_sizes:
            indices, labels = draw_test_sets(p, n, repeats, generator)
            for model, q in probs.items():
                for name, estimator in estimators.items():
                    estimates = [estimator(q[indices[r]], labels[r]) for r in range(counts[name])]
                    values[model][name].append((float(np.mean(estimates)), float(np.std(estimates))))
    return {
        model: {name: tuple(np.array(column) for column in zip(*rows)) for name, rows in by_name.items()}
        for model, by_name in values.items()
    }


def study_table(
    study: Mapping[str, Mapping[str, tuple[Any, Any]]],
    sample_sizes: Sequence[int],
    columns: Mapping[str, tuple[str, int]],
    digits: int = 2,
) -> pd.DataFrame:
    """The study of :func:`estimator_study` as a table: one row per estimator, one column per ``columns`` entry
    {header: (model, sample size)}, cells "mean ± sd" in % (``digits`` decimals)."""
    sizes = list(sample_sizes)
    missing = sorted({n for _, n in columns.values()} - set(sizes))
    if missing:
        raise ValueError(f"sample sizes {missing} are not in the study's {sizes}")
    unknown = sorted({model for model, _ in columns.values()} - set(study))
    if unknown:
        raise ValueError(f"models {unknown} are not in the study ({sorted(study)})")
    estimators = list(next(iter(study.values())))
    table = {}
    for header, (model, n) in columns.items():
        i = sizes.index(n)
        table[header] = [
            f"{100 * study[model][name][0][i]:.{digits}f} ± {100 * study[model][name][1][i]:.{digits}f}"
            for name in estimators
        ]
    return pd.DataFrame(table, index=pd.Index(estimators, name="estimate (%)"))

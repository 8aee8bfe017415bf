"""Issue 10: metric inputs at the edges (one column or row, non-contiguous layouts, bf16, degenerate bootstrap
resamples, explicit task) and a seeded fuzz test of the input checks against a plain reference."""

import warnings

import numpy as np
import pytest
import torch
from sklearn import metrics as sk

from helpers import metrics as M


# ------------------------------------------------------------------------------------------------------------
# defect 2: average precision with a single column or a single row
# ------------------------------------------------------------------------------------------------------------
def test_map_per_example_with_one_label_column_equals_sklearn():
    probs = torch.tensor([[0.9], [0.2], [0.7]])
    labels = torch.tensor([[1.0], [1.0], [0.0]])
    # one label per sample: each sample with a positive ranks its single label first, AP = 1
    assert M.map_per_example(probs, labels) == pytest.approx(1.0)
    expected = sk.label_ranking_average_precision_score(labels.numpy()[:2], probs.numpy()[:2])
    assert M.map_per_example(probs, labels) == pytest.approx(expected)


def test_map_per_class_with_one_sample_row_equals_sklearn():
    probs = torch.tensor([[0.9, 0.4]])
    labels = torch.tensor([[1.0, 1.0]])
    expected = np.mean([sk.average_precision_score(labels[:, t].numpy(), probs[:, t].numpy()) for t in range(2)])
    assert expected == pytest.approx(1.0)
    assert M.map_per_class(probs, labels) == pytest.approx(expected)


def test_average_precision_of_one_column_matrices_equals_sklearn():
    generator = torch.Generator().manual_seed(0)
    probs = torch.rand(40, 1, generator=generator, dtype=torch.float64)
    labels = (torch.rand(40, 1, generator=generator, dtype=torch.float64) < 0.4).double()
    expected = sk.average_precision_score(labels[:, 0].numpy(), probs[:, 0].numpy())
    assert M.map_per_class(probs, labels) == pytest.approx(expected, abs=1e-12)
    assert M.macro_auroc(probs, labels) == pytest.approx(sk.roc_auc_score(labels[:, 0], probs[:, 0]), abs=1e-12)


# ------------------------------------------------------------------------------------------------------------
# defect 8: non-contiguous inputs (transposed views, Fortran-ordered numpy arrays)
# ------------------------------------------------------------------------------------------------------------
def test_non_contiguous_multiclass_inputs_give_the_contiguous_result():
    generator = torch.Generator().manual_seed(1)
    probs = torch.softmax(torch.randn(4, 100, generator=generator), 0).T  # (100, 4), column-major view
    labels = torch.randint(4, (100,), generator=generator)
    assert not probs.is_contiguous()
    dense = probs.contiguous()
    assert M.classwise_ece(probs, labels) == M.classwise_ece(dense, labels)
    assert M.ece(probs, labels) == M.ece(dense, labels)
    assert M.multiclass_report(probs, labels) == M.multiclass_report(dense, labels)
    fortran = torch.from_numpy(np.asfortranarray(dense.numpy()))
    assert not fortran.is_contiguous()
    assert M.classwise_ece(fortran, labels) == M.classwise_ece(dense, labels)


def test_non_contiguous_multilabel_inputs_give_the_contiguous_result():
    generator = torch.Generator().manual_seed(2)
    probs = torch.rand(5, 80, generator=generator).T
    labels = (torch.rand(5, 80, generator=generator) < 0.3).float().T
    dense_probs, dense_labels = probs.contiguous(), labels.contiguous()
    assert M.multilabel_ece(probs, labels, per_label=True) == M.multilabel_ece(
        dense_probs, dense_labels, per_label=True
    )
    report, dense_report = M.multilabel_report(probs, labels), M.multilabel_report(dense_probs, dense_labels)
    assert report == dense_report


# ------------------------------------------------------------------------------------------------------------
# defect 9: resamples on which a metric is undefined are left out and counted, not fatal
# ------------------------------------------------------------------------------------------------------------
def _one_class(labels):
    return labels.unique().numel() < 2


def _every_label_one_class(labels):
    positives = labels.sum(0)
    return bool(((positives == 0) | (positives == labels.shape[0])).all())


def _no_positive(labels):
    return bool(labels.sum() == 0)


@pytest.mark.parametrize(
    "metric, probs, labels, undefined_on",
    [
        (M.auroc_ovr, torch.tensor([[0.8, 0.2], [0.3, 0.7]] * 3), torch.tensor([0, 1] * 3), _one_class),
        (
            M.macro_auroc,
            torch.tensor([[0.8, 0.3], [0.3, 0.6]] * 3),
            torch.tensor([[1.0, 0.0], [0.0, 1.0]] * 3),
            _every_label_one_class,
        ),
        (
            M.map_per_class,
            torch.tensor([[0.8, 0.3], [0.3, 0.6]] * 3),
            torch.tensor([[1.0, 0.0], [0.0, 0.0]] * 3),
            _no_positive,
        ),
    ],
)
def test_bootstrap_leaves_out_undefined_resamples_and_says_how_many(metric, probs, labels, undefined_on):
    n = 200
    # the documented index sets: one torch.randint call with a generator seeded by seed (0)
    indices = torch.randint(probs.shape[0], (n, probs.shape[0]), generator=torch.Generator().manual_seed(0))
    degenerate = torch.tensor([undefined_on(labels[i]) for i in indices])
    assert 0 < int(degenerate.sum()) < n
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the per-resample "skipped label" warnings are summarised separately
        with pytest.warns(RuntimeWarning, match=rf"{int(degenerate.sum())} of {n} resamples"):
            result = M.bootstrap(metric, probs, labels, n=n)
    assert torch.equal(torch.isnan(result.samples), degenerate)
    assert result.n_valid == n - int(degenerate.sum())
    valid = result.samples[~degenerate]
    assert (result.low, result.high) == pytest.approx(np.quantile(valid.numpy(), [0.025, 0.975]).tolist())


# ------------------------------------------------------------------------------------------------------------
# defect 10: the row-sum tolerance follows the input dtype (bf16 resolution is 2^-7)
# ------------------------------------------------------------------------------------------------------------
def reference_top_label_ece(probs, labels, n_bins=15):
    """Plain float64 numpy ECE with (lo, hi] bins and 0 in the first bin (the module's documented binning)."""
    p = np.asarray(probs, dtype=np.float64)
    confidence, correct = p.max(1), (p.argmax(1) == np.asarray(labels)).astype(np.float64)
    edges = np.linspace(0, 1, n_bins + 1)
    index = np.clip(np.searchsorted(edges[1:-1], confidence, side="left"), 0, n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        members = index == b
        total += abs(correct[members].sum() - confidence[members].sum())
    return total / len(p)


@pytest.mark.parametrize("k", [3, 7, 50])
def test_bfloat16_probabilities_are_accepted_and_scored_as_their_values(k):
    generator = torch.Generator().manual_seed(k)
    logits = 3 * torch.randn(2000, k, generator=generator)
    labels = torch.randint(k, (2000,), generator=generator)
    probs = torch.softmax(logits, 1).bfloat16()
    assert float((probs.float().sum(1) - 1).abs().max()) > M.ROW_SUM_TOLERANCE  # what the fixed 1e-3 rejected
    expected = reference_top_label_ece(probs.float().numpy(), labels.numpy())
    assert M.ece(probs, labels) == pytest.approx(expected, abs=1e-9)


def test_bfloat16_logits_and_clearly_unnormalised_rows_are_still_rejected():
    logits = torch.tensor([[0.5, 0.2, 0.1], [0.3, 0.3, 0.3]]).bfloat16()  # in [0, 1] but rows sum to 0.8, 0.9
    with pytest.raises(ValueError, match="must sum to 1"):
        M.ece(logits, torch.tensor([0, 1]))
    off_by_two_percent = torch.tensor([[0.52, 0.5]]).bfloat16()
    with pytest.raises(ValueError, match="must sum to 1"):
        M.ece(off_by_two_percent, torch.tensor([0]))
    with pytest.raises(ValueError, match="must sum to 1"):  # float32 keeps the tight check
        M.ece(torch.tensor([[0.502, 0.5]]), torch.tensor([0]))


# ------------------------------------------------------------------------------------------------------------
# defect 14 (metrics part): true_calibration_error takes the task, it does not guess it from the values
# ------------------------------------------------------------------------------------------------------------
def test_true_calibration_error_takes_the_task_explicitly():
    # T = 2 multi-label posteriors whose rows happen to sum to 1, and predictions whose rows do not
    truth = torch.tensor([[0.3, 0.7], [0.6, 0.4], [0.5, 0.5]], dtype=torch.float64)
    predicted = torch.tensor([[0.2, 0.9], [0.6, 0.1], [0.5, 0.6]], dtype=torch.float64)
    result = M.true_calibration_error(predicted, truth, multilabel=True)
    assert result.top_label is None
    assert result.mean_abs == pytest.approx(float((predicted - truth).abs().mean()))
    with pytest.raises(ValueError, match="multilabel=True"):  # no silent switch to the other task
        M.true_calibration_error(predicted, truth)
    with pytest.raises(TypeError, match="multilabel must be True or False"):
        M.true_calibration_error(predicted, truth, multilabel=None)
    # the default is the multi-class task: predicted class argmax of [.7, .3], [.4, .6], [.5, .5] (first max)
    multiclass = M.true_calibration_error(truth.flip(1), truth)
    assert multiclass.top_label == pytest.approx((0.4 + 0.2 + 0.0) / 3)


# ------------------------------------------------------------------------------------------------------------
# fuzz: random shapes, dtypes, layouts and edge values through the input checks, against a plain reference
# ------------------------------------------------------------------------------------------------------------
PROB_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]
LABEL_DTYPES = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.float32]
EDGE_VALUES = [0.0, 1.0, 0.2, 0.4, 0.5, 1 / 3]  # exact ends and equal-width bin edges for 5, 10, 15 bins


def _row_tolerance(dtype):
    return max(M.ROW_SUM_TOLERANCE, torch.finfo(dtype).eps) if dtype.is_floating_point else M.ROW_SUM_TOLERANCE


def _random_probs(rng, n, k, multilabel):
    """float64 (n, k) probabilities: softmax rows (multi-class) or uniform entries, with some entries and rows
    replaced by edge values (exact 0 / 1, bin edges, one-hot rows)."""
    if multilabel:
        p = rng.random((n, k))
        mask = rng.random((n, k)) < 0.3
        p[mask] = rng.choice(EDGE_VALUES, size=int(mask.sum()))
        return p
    p = np.exp(rng.normal(scale=rng.choice([0.5, 3.0, 30.0]), size=(n, k)))
    p /= p.sum(1, keepdims=True)
    for row in np.flatnonzero(rng.random(n) < 0.2):
        p[row] = np.eye(k)[rng.integers(k)]  # one-hot row: confidence exactly 1
    if k == 2:
        for row in np.flatnonzero(rng.random(n) < 0.2):
            edge = rng.choice(EDGE_VALUES)
            p[row] = (edge, 1 - edge)
    return p


def _corrupt(rng, p, multilabel):
    """Maybe make the probabilities invalid in one way; returns (p, what was done or None)."""
    if rng.random() > 0.35:
        return p, None
    p = p.copy()
    i, j = rng.integers(p.shape[0]), rng.integers(p.shape[1])
    kind = rng.choice(["nan", "inf", "negative", "above one"] + ([] if multilabel else ["unnormalised"]))
    if kind == "unnormalised":
        p[i] *= rng.choice([0.9, 1.05])
    else:
        p[i, j] = {"nan": np.nan, "inf": np.inf, "negative": -0.1, "above one": 1.2}[kind]
    return p, kind


def _layout(rng, values, dtype):
    """The same values as a contiguous tensor, a transposed view, a numpy array (C or Fortran order), a
    Fortran-ordered tensor from torch.from_numpy, or a list."""
    tensor = torch.as_tensor(values).to(dtype)
    choices = ["tensor", "transposed view"]
    if dtype not in (torch.bfloat16,):
        choices += ["numpy", "fortran numpy", "from_numpy fortran"]
    if dtype == torch.float64:
        choices.append("list")
    layout = rng.choice(choices)
    if layout == "tensor" or tensor.ndim != 2:
        return tensor, "tensor"
    if layout == "transposed view":
        return tensor.T.contiguous().T, layout
    array = tensor.numpy()
    if layout == "numpy":
        return array, layout
    if layout == "fortran numpy":
        return np.asfortranarray(array), layout
    if layout == "list":
        return array.tolist(), layout
    return torch.from_numpy(np.asfortranarray(array)), layout


def _reference_multiclass_verdict(p_values, p_dtype, shape_ok, labels, n, k):
    """None if a plain reading of the documented rules accepts the inputs, else the argument at fault."""
    if not shape_ok or p_dtype == torch.bool or k < 2:
        return "probs"
    if not np.isfinite(p_values).all() or p_values.min() < 0 or p_values.max() > 1:
        return "probs"
    if np.abs(p_values.sum(1) - 1).max() > _row_tolerance(p_dtype):
        return "probs"
    if labels.ndim != 1 or labels.dtype in (torch.bool, torch.float32) or labels.shape[0] != n:
        return "labels"
    if int(labels.min()) < 0 or int(labels.max()) >= k:
        return "labels"
    return None


def _multiclass_case(rng):
    n, k = int(rng.integers(1, 40)), int(rng.choice([1, 2, 2, 3, 5, 7]))
    p_dtype = PROB_DTYPES[rng.integers(len(PROB_DTYPES))]
    values = _random_probs(rng, n, k, multilabel=False)
    if p_dtype in (torch.int64, torch.bool):
        values = np.eye(k)[rng.integers(k, size=n)]  # integer probabilities: one-hot rows only
    values, corruption = _corrupt(rng, values, multilabel=False)
    shape_ok = rng.random() > 0.05
    raw = values if shape_ok else values.reshape(-1)
    label_dtype = LABEL_DTYPES[rng.integers(len(LABEL_DTYPES))]
    labels = torch.as_tensor(rng.integers(0, k, size=n))
    if rng.random() < 0.1:
        labels[rng.integers(n)] = k  # out of range
    if rng.random() < 0.05:
        labels = labels[:-1] if n > 1 else labels.repeat(2)
    if rng.random() < 0.05:
        labels = labels[:, None]
    labels = labels.to(label_dtype) if label_dtype != torch.bool else labels.clamp(max=1).bool()
    probs, layout = _layout(rng, raw, p_dtype)
    exact = torch.as_tensor(np.asarray(raw)).to(p_dtype).to(torch.float64).numpy()  # the values after the cast
    description = (
        f"n={n} k={k} probs {p_dtype} {layout} corruption={corruption} shape_ok={shape_ok} "
        f"labels {labels.dtype} {tuple(labels.shape)}"
    )
    if not shape_ok:
        return probs, labels, "probs", None, description
    return probs, labels, _reference_multiclass_verdict(exact, p_dtype, shape_ok, labels, n, k), exact, description


def _multilabel_case(rng):
    n, t = int(rng.integers(1, 40)), int(rng.integers(1, 6))
    p_dtype = PROB_DTYPES[rng.integers(4)]  # floating dtypes
    values, corruption = _corrupt(rng, _random_probs(rng, n, t, multilabel=True), multilabel=True)
    labels = (rng.random((n, t)) < 0.4).astype(np.float64)
    label_problem = rng.choice([None] * 8 + ["soft", "nan", "shape"])
    if label_problem == "soft":
        labels[rng.integers(n), rng.integers(t)] = 0.5
    elif label_problem == "nan":
        labels[rng.integers(n), rng.integers(t)] = np.nan
    elif label_problem == "shape":
        labels = labels[:, :-1] if t > 1 else labels[:, [0, 0]]
    label_dtype = rng.choice(["float32", "float64", "bool", "int64"]) if label_problem is None else "float64"
    probs, layout = _layout(rng, values, p_dtype)
    label_tensor, _ = _layout(rng, labels, getattr(torch, label_dtype))
    exact = torch.as_tensor(values).to(p_dtype).to(torch.float64).numpy()
    if not np.isfinite(exact).all() or exact.min() < 0 or exact.max() > 1:
        verdict = "probs"
    elif label_problem is not None:
        verdict = "labels"
    else:
        verdict = None
    description = (
        f"n={n} t={t} probs {p_dtype} {layout} corruption={corruption} labels {label_dtype} problem={label_problem}"
    )
    return probs, label_tensor, verdict, (exact, labels), description


def reference_pooled_multilabel_ece(p, y, n_bins=15):
    return reference_binary_ece(p.reshape(-1), y.reshape(-1), n_bins)


def reference_binary_ece(confidence, outcome, n_bins=15):
    edges = np.linspace(0, 1, n_bins + 1)
    index = np.clip(np.searchsorted(edges[1:-1], confidence, side="left"), 0, n_bins - 1)
    gaps = [abs(outcome[index == b].sum() - confidence[index == b].sum()) for b in range(n_bins)]
    return sum(gaps) / len(confidence)


def test_fuzz_multiclass_input_checks_and_values_against_a_plain_reference():
    rng = np.random.default_rng(20240610)
    verdicts = {"probs": 0, "labels": 0, None: 0}
    for case in range(600):
        probs, labels, verdict, exact, description = _multiclass_case(rng)
        verdicts[verdict] += 1
        if verdict is not None:
            with pytest.raises((ValueError, TypeError)) as error:
                M.ece(probs, labels)
            assert verdict in str(error.value), f"case {case} ({description}): {error.value}"
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = M.ece(probs, labels)
            accuracy = M.accuracy(probs, labels)
        y = labels.long().numpy()
        assert value == pytest.approx(reference_top_label_ece(exact, y), abs=1e-9), f"case {case} ({description})"
        assert accuracy == pytest.approx(float((exact.argmax(1) == y).mean())), f"case {case} ({description})"
    assert min(verdicts.values()) >= 50, verdicts  # every branch was exercised


def test_fuzz_multilabel_input_checks_and_values_against_a_plain_reference():
    rng = np.random.default_rng(20240611)
    verdicts = {"probs": 0, "labels": 0, None: 0}
    for case in range(400):
        probs, labels, verdict, exact, description = _multilabel_case(rng)
        verdicts[verdict] += 1
        if verdict is not None:
            with pytest.raises((ValueError, TypeError)) as error:
                M.multilabel_ece(probs, labels)
            assert verdict in str(error.value), f"case {case} ({description}): {error.value}"
            continue
        p, y = exact
        expected = reference_pooled_multilabel_ece(p, y)
        assert M.multilabel_ece(probs, labels) == pytest.approx(expected, abs=1e-9), f"case {case} ({description})"
        per_label = np.mean([reference_binary_ece(p[:, t], y[:, t]) for t in range(p.shape[1])])
        assert M.multilabel_ece(probs, labels, per_label=True) == pytest.approx(per_label, abs=1e-9), (
            f"case {case} ({description})"
        )
    assert min(verdicts.values()) >= 30, verdicts

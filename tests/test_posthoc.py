"""Post-hoc calibrators: agreement with scikit-learn (logistic regression, isotonic regression,
CalibratedClassifierCV) and with an independent scipy minimiser, known reductions (vector scaling on class-symmetric
data is temperature scaling; per-label temperatures are per-column temperature scaling), recovery of a known
affine miscalibration, and the calibration split."""

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.optimize import minimize
from scipy.special import log_softmax as np_log_softmax
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from helpers.calibration import (
    DirichletCalibration,
    IsotonicCalibration,
    MatrixScaling,
    PerLabelIsotonic,
    PerLabelPlatt,
    PerLabelTemperatureScaling,
    RankingReversedWarning,
    TemperatureScaling,
    VectorScaling,
    split_calibration,
)


def affine_miscalibrated(n, k=4, seed=0):
    """Logits z and labels drawn from softmax(A z + c) for a fixed A (with cross-class terms) and c."""
    generator = torch.Generator().manual_seed(seed)
    z = 2.0 * torch.randn(n, k, generator=generator, dtype=torch.float64)
    fixed = torch.Generator().manual_seed(1234)
    a = 0.6 * torch.eye(k, dtype=torch.float64) + 0.15 * torch.randn(k, k, generator=fixed, dtype=torch.float64)
    c = 0.5 * torch.randn(k, generator=fixed, dtype=torch.float64)
    true_probs = torch.softmax(z @ a.T + c, 1)
    labels = torch.multinomial(true_probs, 1, generator=generator)[:, 0]
    return z, labels, true_probs


def nll(probs, labels):
    return float(-probs.gather(1, labels[:, None]).log().mean())


# ------------------------------------------------------------------------------------------------------------
# vector scaling
# ------------------------------------------------------------------------------------------------------------
def test_vector_scaling_on_class_symmetric_data_is_temperature_scaling():
    z, labels, _ = affine_miscalibrated(600, k=4, seed=1)
    # every cyclic relabelling of every sample: the optimum must treat the classes alike (equal weights)
    z_sym = torch.cat([z.roll(s, 1) for s in range(4)])
    y_sym = torch.cat([(labels + s) % 4 for s in range(4)])
    vector = VectorScaling().fit(z_sym, y_sym)
    temperature = TemperatureScaling().fit(z_sym, y_sym)
    torch.testing.assert_close(
        vector.weight, torch.full((4,), 1 / temperature.temperature, dtype=torch.float64), rtol=1e-5, atol=0
    )
    torch.testing.assert_close(vector.transform(z), temperature.transform(z).double(), rtol=0, atol=1e-6)


def test_vector_scaling_matches_an_independent_scipy_fit_and_beats_one_temperature():
    z, labels, _ = affine_miscalibrated(2000, k=5, seed=2)
    zn, yn = z.numpy(), labels.numpy()

    def objective(theta):
        w, b = theta[:5], theta[5:]
        scores = zn * w + b
        log_q = np_log_softmax(scores, axis=1)
        q = np.exp(log_q)
        onehot = np.eye(5)[yn]
        grad_scores = (q - onehot) / len(yn)
        return -log_q[np.arange(len(yn)), yn].mean(), np.concatenate([(grad_scores * zn).sum(0), grad_scores.sum(0)])

    reference = minimize(
        objective, np.concatenate([np.ones(5), np.zeros(5)]), jac=True, method="BFGS", options={"gtol": 1e-10}
    )
    vector = VectorScaling().fit(z, labels)
    assert nll(vector.transform(z), labels) == pytest.approx(reference.fun, abs=1e-9)
    reference_probs = torch.softmax(torch.from_numpy(zn * reference.x[:5] + reference.x[5:]), 1)
    torch.testing.assert_close(vector.transform(z), reference_probs, rtol=0, atol=1e-5)
    assert nll(vector.transform(z), labels) < nll(TemperatureScaling().fit(z, labels).transform(z).double(), labels)


# ------------------------------------------------------------------------------------------------------------
# matrix scaling, ODIR, Dirichlet calibration
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "calibrator, features", [(MatrixScaling, lambda z: z), (DirichletCalibration, lambda z: torch.log_softmax(z, 1))]
)
def test_unpenalised_matrix_scaling_is_multinomial_logistic_regression(calibrator, features):
    z, labels, _ = affine_miscalibrated(3000, k=4, seed=3)
    ours = calibrator(off_diagonal_penalty=0.0, bias_penalty=0.0).fit(z, labels)
    sklearn = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10000).fit(features(z).numpy(), labels.numpy())
    expected = torch.from_numpy(sklearn.predict_proba(features(z).numpy()))
    torch.testing.assert_close(ours.transform(z), expected, rtol=0, atol=1e-5)


def test_matrix_scaling_recovers_a_known_affine_miscalibration():
    z, labels, _ = affine_miscalibrated(20000, seed=4)
    z_test, labels_test, true_test = affine_miscalibrated(20000, seed=5)
    fitted = MatrixScaling(off_diagonal_penalty=0.0, bias_penalty=0.0).fit(z, labels)
    bayes = nll(true_test, labels_test)
    assert nll(torch.softmax(z_test, 1), labels_test) - bayes > 0.1  # the raw logits are badly miscalibrated
    assert nll(fitted.transform(z_test), labels_test) - bayes < 0.005
    # vector scaling cannot express the cross-class terms of A
    assert nll(VectorScaling().fit(z, labels).transform(z_test), labels_test) - bayes > 0.01


def test_odir_fit_is_the_minimum_of_the_documented_objective():
    z, labels, _ = affine_miscalibrated(800, k=4, seed=6)
    lam, mu, k = 0.3, 0.2, 4
    zn, yn = z.numpy(), labels.numpy()
    onehot = np.eye(k)[yn]
    off = 1.0 - np.eye(k)

    def objective(theta):  # mean NLL + λ/(K(K−1)) Σ_{i≠j} W_ij² + μ/K Σ b_j², written independently in numpy
        w, b = theta[: k * k].reshape(k, k), theta[k * k :]
        log_q = np_log_softmax(zn @ w.T + b, axis=1)
        value = -(log_q * onehot).sum(1).mean() + lam / (k * (k - 1)) * ((w * off) ** 2).sum() + mu / k * (b**2).sum()
        grad_scores = (np.exp(log_q) - onehot) / len(yn)
        grad_w = grad_scores.T @ zn + 2 * lam / (k * (k - 1)) * w * off
        grad_b = grad_scores.sum(0) + 2 * mu / k * b
        return value, np.concatenate([grad_w.ravel(), grad_b])

    reference = minimize(
        objective, np.concatenate([np.eye(k).ravel(), np.zeros(k)]), jac=True, method="BFGS", options={"gtol": 1e-10}
    )
    ours = MatrixScaling(lam, mu).fit(z, labels)
    value = float(ours.objective(z, labels, ours.weight, ours.bias))
    assert value == pytest.approx(reference.fun, abs=1e-9)
    torch.testing.assert_close(ours.weight, torch.from_numpy(reference.x[: k * k].reshape(k, k)), rtol=0, atol=1e-4)


def test_a_large_off_diagonal_penalty_reduces_matrix_scaling_to_vector_scaling():
    z, labels, _ = affine_miscalibrated(3000, k=4, seed=7)
    matrix = MatrixScaling(off_diagonal_penalty=1e7, bias_penalty=0.0).fit(z, labels)
    off_diagonal = matrix.weight - torch.diag(matrix.weight.diagonal())
    assert float(off_diagonal.abs().max()) < 1e-4
    torch.testing.assert_close(matrix.transform(z), VectorScaling().fit(z, labels).transform(z), rtol=0, atol=1e-4)


def test_dirichlet_calibration_starts_from_the_identity_map():
    z, labels, _ = affine_miscalibrated(100, k=3, seed=8)
    identity = DirichletCalibration()
    identity.weight, identity.bias = torch.eye(3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    identity.n_columns, identity.fitted = 3, True
    torch.testing.assert_close(identity.transform(z), torch.softmax(z, 1), rtol=0, atol=1e-12)


def test_cross_validation_picks_the_pair_with_the_lowest_held_out_nll():
    z, labels, _ = affine_miscalibrated(300, k=3, seed=9)
    chosen = MatrixScaling.cross_validated(z, labels, grid=(1.0, 1e-3), folds=3)
    assert len(chosen.cv_nll) == 4
    best = min(chosen.cv_nll, key=chosen.cv_nll.get)
    assert (chosen.off_diagonal_penalty, chosen.bias_penalty) == best and chosen.fitted
    with pytest.raises(ValueError, match="folds"):
        MatrixScaling.cross_validated(z, labels, folds=1)


# ------------------------------------------------------------------------------------------------------------
# isotonic regression
# ------------------------------------------------------------------------------------------------------------
class _ProbabilitiesAsFeatures(ClassifierMixin, BaseEstimator):
    """A 'classifier' whose predict_proba returns its input: lets CalibratedClassifierCV calibrate given
    probabilities."""

    def fit(self, x, y):
        self.classes_ = np.unique(y)
        return self

    def predict_proba(self, x):
        return np.asarray(x)

    def predict(self, x):
        return self.classes_[np.asarray(x).argmax(1)]


def test_isotonic_calibration_equals_sklearn_calibrated_classifier_one_vs_rest():
    z, labels, _ = affine_miscalibrated(1500, k=4, seed=10)
    z_test = affine_miscalibrated(500, k=4, seed=11)[0]
    ours = IsotonicCalibration().fit(z, labels)
    frozen = FrozenEstimator(_ProbabilitiesAsFeatures().fit(None, labels.numpy()))
    sklearn = CalibratedClassifierCV(frozen, method="isotonic").fit(torch.softmax(z, 1).numpy(), labels.numpy())
    for logits in (z, z_test):
        expected = torch.from_numpy(sklearn.predict_proba(torch.softmax(logits, 1).numpy()))
        torch.testing.assert_close(ours.transform(logits), expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(ours.transform(z_test).sum(1), torch.ones(500, dtype=torch.float64))


def test_isotonic_calibration_rejects_unfitted_use_and_wrong_width():
    with pytest.raises(RuntimeError, match="not fitted"):
        IsotonicCalibration().transform(torch.zeros(3, 4))
    z, labels, _ = affine_miscalibrated(200, k=4, seed=12)
    with pytest.raises(ValueError, match="fitted on 4"):
        IsotonicCalibration().fit(z, labels).transform(z[:, :3])


# ------------------------------------------------------------------------------------------------------------
# multi-label: per-label temperature and Platt scaling
# ------------------------------------------------------------------------------------------------------------
def multilabel_problem(n=4000, t=5, seed=13):
    generator = torch.Generator().manual_seed(seed)
    z = 3.0 * torch.randn(n, t, generator=generator, dtype=torch.float64)
    temperatures = torch.linspace(0.5, 3.0, t, dtype=torch.float64)
    labels = torch.bernoulli(torch.sigmoid(z / temperatures - 0.5), generator=generator)
    return z, labels


def test_per_label_temperatures_are_each_columns_own_temperature_scaling():
    z, labels = multilabel_problem()
    joint = PerLabelTemperatureScaling().fit(z, labels)
    for t in range(z.shape[1]):
        alone = TemperatureScaling(task="multi-label").fit(z[:, t : t + 1], labels[:, t : t + 1]).temperature
        assert float(joint.temperatures[t]) == pytest.approx(alone, rel=1e-5)
    torch.testing.assert_close(joint.transform(z), torch.sigmoid(z / joint.temperatures))


def test_per_label_platt_equals_sklearn_logistic_regression_per_column():
    z, labels = multilabel_problem(seed=14)
    platt = PerLabelPlatt().fit(z, labels)
    for t in range(z.shape[1]):
        reference = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10000).fit(
            z[:, t : t + 1].numpy(), labels[:, t].numpy()
        )
        assert float(platt.slope[t]) == pytest.approx(reference.coef_[0, 0], rel=1e-5)
        assert float(platt.intercept[t]) == pytest.approx(reference.intercept_[0], rel=1e-5, abs=1e-6)
    shared = TemperatureScaling(task="multi-label").fit(z, labels).transform(z).double()
    per_label = PerLabelTemperatureScaling().fit(z, labels).transform(z)
    bce = lambda p: float(F.binary_cross_entropy(p, labels))  # noqa: E731
    # nested families on the fitting data: Platt (a, b per label) <= T per label <= one shared T
    assert bce(platt.transform(z)) <= bce(per_label) <= bce(shared)


def test_per_label_isotonic_is_sklearns_isotonic_regression_per_column_clipped():
    z, labels = multilabel_problem(n=600, seed=15)
    isotonic = PerLabelIsotonic().fit(z, labels)
    epsilon = 1.0 / (2 * (600 + 1))
    assert isotonic.epsilon == pytest.approx(epsilon)
    out = isotonic.transform(z)
    assert out.shape == z.shape and out.dtype == torch.float64
    for t in range(z.shape[1]):
        reference = IsotonicRegression(out_of_bounds="clip").fit(z[:, t].numpy(), labels[:, t].numpy())
        expected = np.clip(reference.predict(z[:, t].numpy()), epsilon, 1 - epsilon)
        np.testing.assert_allclose(out[:, t].numpy(), expected, atol=1e-12)
        order = torch.argsort(z[:, t])
        assert bool((out[order, t].diff() >= -1e-12).all())  # non-decreasing in the logit
    assert float(out.min()) >= epsilon and float(out.max()) <= 1 - epsilon  # a finite NLL on any test set
    assert torch.isfinite(F.binary_cross_entropy(isotonic.transform(-z), labels.double()))


def test_per_label_isotonic_recalibrates_a_miscalibrated_label_and_checks_its_inputs():
    z, labels = multilabel_problem(n=4000, seed=16)
    fresh_z, fresh_labels = multilabel_problem(n=4000, seed=17)
    raw_nll = float(F.binary_cross_entropy(torch.sigmoid(fresh_z), fresh_labels))
    isotonic_nll = float(F.binary_cross_entropy(PerLabelIsotonic().fit(z, labels).transform(fresh_z), fresh_labels))
    assert isotonic_nll < raw_nll  # temperatures 0.5–3 and an offset: the raw sigmoid is miscalibrated
    with pytest.raises(RuntimeError, match="not fitted"):
        PerLabelIsotonic().transform(z)
    with pytest.raises(ValueError, match="columns"):
        PerLabelIsotonic().fit(z, labels).transform(z[:, :2])
    with pytest.raises(ValueError, match="min_probability"):
        PerLabelIsotonic(min_probability=0.7)
    assert PerLabelIsotonic(min_probability=0.01).fit(z, labels).transform(z).min() >= 0.01


def test_multilabel_calibrators_check_their_labels():
    z, labels = multilabel_problem(n=50)
    with pytest.raises(ValueError, match="multi-label labels must have the logits' shape"):
        PerLabelPlatt().fit(z, labels[:, :3])
    with pytest.raises(RuntimeError, match="not fitted"):
        PerLabelTemperatureScaling().transform(z)
    with pytest.raises(ValueError, match="max_iter"):
        VectorScaling(max_iter=0)


# ------------------------------------------------------------------------------------------------------------
# the calibration split
# ------------------------------------------------------------------------------------------------------------
def test_split_calibration_is_a_seeded_partition():
    selection, calibration = split_calibration(101, seed=3)
    assert torch.equal(torch.cat([selection, calibration]).sort().values, torch.arange(101))
    assert calibration.numel() == 50 and torch.equal(calibration, calibration.sort().values)
    again = split_calibration(101, seed=3)
    assert torch.equal(again[0], selection) and torch.equal(again[1], calibration)
    assert not torch.equal(split_calibration(101, seed=4)[1], calibration)


def test_split_calibration_stratifies_by_class():
    labels = torch.tensor([0] * 80 + [1] * 15 + [2] * 4 + [3] * 2)
    selection, calibration = split_calibration(101, seed=0, labels=labels)
    for k, expected in ((0, 40), (1, 8), (2, 2), (3, 1)):
        assert int((labels[calibration] == k).sum()) == expected
        assert int((labels[selection] == k).sum()) == int((labels == k).sum()) - expected
    with pytest.raises(ValueError, match="integer class indices"):
        split_calibration(101, labels=labels.float())
    with pytest.raises(ValueError, match="calibration_fraction"):
        split_calibration(101, calibration_fraction=1.0)


@pytest.mark.parametrize(
    "calibrator",
    [
        VectorScaling(),
        MatrixScaling(),
        DirichletCalibration(),
        IsotonicCalibration(),
        PerLabelTemperatureScaling(),
        PerLabelPlatt(),
        PerLabelIsotonic(),
    ],
    ids=lambda c: type(c).__name__,
)
def test_posthoc_calibrators_refuse_probabilities_instead_of_logits(calibrator):
    """Issue 18 #8, the other post-hoc maps: softmax outputs passed as logits are refused by fit and transform."""
    z, labels, _ = affine_miscalibrated(300)
    targets = labels if calibrator.task == "multi-class" else F.one_hot(labels, 4).double()
    with pytest.raises(ValueError, match="look like probabilities"):
        calibrator.fit(torch.softmax(z, 1), targets)
    calibrator.fit(z, targets)
    with pytest.raises(ValueError, match="look like probabilities"):
        calibrator.transform(torch.softmax(z, 1))
    if calibrator.task == "multi-class":  # log-probabilities are logits: accepted
        calibrator.fit(torch.log_softmax(z, 1), targets)


def test_cross_validated_matrix_scaling_refuses_probabilities():
    z, labels, _ = affine_miscalibrated(100)
    with pytest.raises(ValueError, match="look like probabilities"):
        MatrixScaling.cross_validated(torch.softmax(z, 1), labels, grid=(1e-2,), folds=2)


def test_split_calibration_with_single_sample_classes_refuses_an_empty_part():
    """Issue 18 #13: stratified by classes of one sample each, round(0.5 · 1) = 0 per class returned an empty
    calibration set without a word; a split that leaves either part empty now raises and says what to change."""
    singletons = torch.tensor([0, 1, 2, 3])
    with pytest.raises(ValueError, match=r"calibration part.*empty.*class sizes \[1, 1, 1, 1\].*labels=None"):
        split_calibration(4, labels=singletons)
    with pytest.raises(ValueError, match="selection part.*empty"):
        split_calibration(4, labels=singletons, calibration_fraction=0.9)
    with pytest.raises(ValueError, match="calibration part.*empty"):
        split_calibration(3, calibration_fraction=0.1)  # unstratified: round(0.3) = 0
    selection, calibration = split_calibration(4)  # the unstratified split the message points to
    assert selection.numel() == 2 and calibration.numel() == 2


@pytest.mark.parametrize(
    "build",
    [
        lambda: TemperatureScaling(max_iter=True),
        lambda: MatrixScaling(True),
        lambda: MatrixScaling(bias_penalty=False),
        lambda: VectorScaling(max_iter=True),
        lambda: DirichletCalibration(1e-2, True),
        lambda: MatrixScaling(max_iter=False),
    ],
)
def test_calibrators_refuse_booleans_as_numbers(build):
    """Issue 18 #13: TemperatureScaling(max_iter=True) and MatrixScaling(True) passed as 1."""
    with pytest.raises(ValueError, match="got (True|False)"):
        build()


def test_per_label_temperature_scaling_warns_like_temperature_scaling():
    """Issue 18 #13: on all-zero or uninformative labels PerLabelTemperatureScaling fitted T ≈ 1e10 silently,
    where TemperatureScaling warns that the NLL has no interior minimum; it now names the labels concerned."""
    generator = torch.Generator().manual_seed(5)
    z = torch.randn(400, 3, generator=generator, dtype=torch.float64)
    labels = torch.bernoulli(torch.sigmoid(2.0 * z), generator=generator)  # label 0: informative
    labels[:, 1] = 0.0
    z[:, 1] = z[:, 1].abs() + 0.1  # all-zero labels, every logit positive: the NLL falls as T -> infinity
    labels[:, 2] = (z[:, 2] < 0).double()  # anti-informative logits
    with pytest.warns(RuntimeWarning, match=r"labels \[1, 2\].*T -> infinity"):
        fitted = PerLabelTemperatureScaling().fit(z, labels)
    assert float(fitted.temperatures[1]) > 1e3 and 0.2 < float(fitted.temperatures[0]) < 2.0
    for t in (1, 2):
        with pytest.warns(RuntimeWarning, match="T -> infinity"):  # the shared-temperature warning, per column
            TemperatureScaling(task="multi-label").fit(z[:, t : t + 1], labels[:, t : t + 1])
    separable = torch.tensor([[3.0], [-2.0]] * 20, dtype=torch.float64)
    with pytest.warns(RuntimeWarning, match=r"labels \[0\].*T -> 0"):
        PerLabelTemperatureScaling().fit(separable, (separable > 0).double())


# ------------------------------------------------------------------------------------------------------------
# issue 29, item 4 (medium): no silent extreme fits on one-class or separable data


def _three_class_logits(n=90, seed=0):
    generator = torch.Generator().manual_seed(seed)
    z = torch.randn(n, 3, generator=generator, dtype=torch.float64)
    noisy = torch.multinomial(torch.softmax(z, 1), 1, generator=generator)[:, 0]  # calibrated labels: not separable
    return z, noisy


@pytest.mark.parametrize("calibrator", [VectorScaling, MatrixScaling, DirichletCalibration])
def test_multiclass_calibrators_warn_on_one_class_or_separable_data(calibrator):
    """Issue 29, medium: vector, matrix and Dirichlet scaling fitted weights of 400-500 or biases of 16 on
    separable or one-class calibration data without a word, where temperature scaling warns."""
    z, noisy = _three_class_logits()
    with pytest.warns(RuntimeWarning, match=rf"{calibrator.__name__}: classes \[1, 2\] do not occur"):
        calibrator().fit(z, torch.zeros(len(z), dtype=torch.long))
    with pytest.warns(RuntimeWarning, match=rf"{calibrator.__name__}: .*every calibration sample.*separable"):
        calibrator().fit(z, z.argmax(1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # calibrated, overlapping classes: no warning
        calibrator().fit(z, noisy)


def test_per_label_platt_warns_on_one_valued_or_separable_labels():
    """Issue 29, medium: per-label Platt fitted a slope of 667 on a separable label and an intercept of -184 on
    an all-zero label without a word, where PerLabelTemperatureScaling names such labels."""
    generator = torch.Generator().manual_seed(1)
    z = torch.randn(200, 3, generator=generator, dtype=torch.float64)
    labels = torch.bernoulli(torch.sigmoid(z), generator=generator)  # label 0: calibrated
    labels[:, 1] = 0.0  # one value only
    labels[:, 2] = (z[:, 2] > 0.3).double()  # separated by its own logit
    with pytest.warns(RuntimeWarning) as caught:
        PerLabelPlatt().fit(z, labels)
    messages = [str(w.message) for w in caught]
    assert any("labels [1]" in m and "only one value" in m for m in messages), messages
    assert any("labels [2]" in m and "separate" in m for m in messages), messages
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PerLabelPlatt().fit(z[:, :1], labels[:, :1])


def test_per_label_platt_names_labels_whose_fitted_slope_reverses_their_ranking():
    """Notebook 11, seed 3: per-label Platt fitted a slope of −0.58 on a finding with 3 positives in the
    calibration half, which reversed that finding's ranking (BCE's macro AUROC 77.7 → 74.3) without a word."""
    generator = torch.Generator().manual_seed(2)
    z = torch.randn(400, 2, generator=generator, dtype=torch.float64)
    labels = torch.bernoulli(torch.sigmoid(2.0 * z), generator=generator)  # label 0: increasing in its logit
    labels[:, 1] = torch.bernoulli(torch.sigmoid(-1.5 * z[:, 1] - 2.0), generator=generator)  # decreasing
    with pytest.warns(RankingReversedWarning, match=r"labels \[1\]: fitted slopes \[-1\.\d\d\].*reverses") as caught:
        platt = PerLabelPlatt().fit(z, labels)
    assert len(caught) == 1
    assert platt.reversed_labels == [1]
    positives = int(labels[:, 1].sum())
    assert f"{positives} positives" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert PerLabelPlatt().fit(z[:, :1], labels[:, :1]).reversed_labels == []

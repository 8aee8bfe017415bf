"""Temperature scaling: recovers a known temperature, lowers NLL, keeps the arg-max, rejects bad input."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers.calibration import TemperatureScaling


def _multiclass_problem(t_true: float, n: int = 20000, k: int = 5, seed: int = 0):
    """Logits z and labels drawn from softmax(z / t_true): the maximum-likelihood temperature is ~t_true."""
    generator = torch.Generator().manual_seed(seed)
    logits = 3.0 * torch.randn(n, k, generator=generator)
    labels = torch.multinomial(torch.softmax(logits / t_true, dim=1), 1, generator=generator)[:, 0]
    return logits, labels


@pytest.mark.parametrize("t_true", [0.5, 1.0, 2.5])
def test_recovers_known_temperature_multiclass(t_true):
    logits, labels = _multiclass_problem(t_true)
    fitted = TemperatureScaling().fit(logits, labels).temperature
    # The MLE's standard error at n = 20000 is ~1 % of T; 5 % is a generous but still discriminating band.
    assert fitted == pytest.approx(t_true, rel=0.05)


def test_recovers_known_temperature_multilabel():
    generator = torch.Generator().manual_seed(1)
    logits = 4.0 * torch.randn(5000, 6, generator=generator)
    labels = torch.bernoulli(torch.sigmoid(logits / 2.0), generator=generator)
    fitted = TemperatureScaling(task="multi-label").fit(logits, labels).temperature
    assert fitted == pytest.approx(2.0, rel=0.05)


def test_fit_matches_an_independent_scalar_minimiser():
    from scipy.optimize import minimize_scalar
    from scipy.special import logsumexp

    logits, labels = _multiclass_problem(1.7, n=3000, seed=3)
    z, y = logits.double().numpy(), labels.numpy()

    def nll(t):
        scaled = z / t
        return float(np.mean(logsumexp(scaled, axis=1) - scaled[np.arange(len(y)), y]))

    reference = minimize_scalar(nll, bounds=(0.1, 10.0), method="bounded", options={"xatol": 1e-7}).x
    assert TemperatureScaling().fit(logits, labels).temperature == pytest.approx(reference, abs=1e-4)


def test_lowers_validation_nll_and_keeps_argmax():
    logits, labels = _multiclass_problem(2.0, n=4000, seed=5)
    overconfident = logits  # the labels were drawn at T = 2, so T = 1 is over-confident
    scaler = TemperatureScaling().fit(overconfident, labels)
    probs = scaler.transform(overconfident)
    nll_before = F.cross_entropy(overconfident, labels).item()
    nll_after = F.nll_loss(probs.log(), labels).item()
    assert nll_after < nll_before - 0.01
    assert torch.equal(probs.argmax(1), overconfident.argmax(1))
    assert torch.allclose(probs.sum(1), torch.ones(len(probs)), atol=1e-6)


def test_transform_is_softmax_of_scaled_logits_and_accepts_numpy():
    logits, labels = _multiclass_problem(1.5, n=2000, seed=7)
    scaler = TemperatureScaling().fit(logits.numpy(), labels.numpy())
    expected = torch.softmax(logits / scaler.temperature, dim=1)
    assert torch.allclose(scaler.transform(logits), expected, atol=1e-6)
    assert torch.allclose(scaler.scale(logits.numpy()), logits / scaler.temperature, atol=1e-6)


def test_multilabel_transform_is_sigmoid_and_keeps_decisions():
    generator = torch.Generator().manual_seed(2)
    logits = 3.0 * torch.randn(1000, 4, generator=generator)
    labels = torch.bernoulli(torch.sigmoid(logits / 1.5), generator=generator)
    scaler = TemperatureScaling(task="multi-label").fit(logits, labels)
    probs = scaler.transform(logits)
    assert torch.allclose(probs, torch.sigmoid(logits / scaler.temperature), atol=1e-6)
    assert torch.equal(probs > 0.5, logits > 0)


def test_warns_when_nll_has_no_interior_minimum():
    separable = torch.tensor([[5.0, 0.0], [0.0, 5.0]] * 50)
    labels = torch.tensor([0, 1] * 50)  # every sample correct: the NLL keeps falling as T -> 0
    with pytest.warns(RuntimeWarning, match="T -> 0"):
        TemperatureScaling().fit(separable, labels)
    with pytest.warns(RuntimeWarning, match="T -> infinity"):
        TemperatureScaling().fit(separable, 1 - labels)  # every sample wrong: logits anti-informative
    with pytest.warns(RuntimeWarning, match="T -> 0"):
        TemperatureScaling(task="multi-label").fit(separable, torch.nn.functional.one_hot(labels).float())


@pytest.mark.parametrize(
    "logits, labels, task, message",
    [
        (torch.zeros(4, 3), torch.tensor([0, 1, 2, 3]), "multi-class", "lie in"),
        (torch.zeros(4, 3), torch.zeros(4, 3), "multi-class", r"\(N,\)"),
        (torch.zeros(4, 3), torch.tensor([0.0, 1.0, 2.0, 1.0]), "multi-class", "integer"),
        (torch.tensor([[0.0, math.nan]]), torch.tensor([0]), "multi-class", "NaN"),
        (torch.zeros(4), torch.tensor([0, 1, 0, 1]), "multi-class", "shape"),
        (torch.zeros(0, 3), torch.zeros(0, dtype=torch.long), "multi-class", "N >= 1"),
        (torch.zeros(4, 2), torch.full((4, 2), 0.5), "multi-label", "0 or 1"),
        (torch.zeros(4, 2), torch.zeros(4, 3), "multi-label", "shape"),
        (torch.zeros(4, 2, dtype=torch.long), torch.zeros(4, dtype=torch.long), "multi-class", "floating"),
    ],
)
def test_rejects_bad_input(logits, labels, task, message):
    with pytest.raises(ValueError, match=message):
        TemperatureScaling(task=task).fit(logits, labels)


def test_rejects_unknown_task_and_unfitted_use():
    with pytest.raises(ValueError, match="task"):
        TemperatureScaling(task="binary-ish")
    with pytest.raises(RuntimeError, match="not fitted"):
        TemperatureScaling().transform(torch.zeros(2, 3))
    with pytest.raises(TypeError):
        TemperatureScaling().fit([[0.0, 1.0]], [0])
    assert np.isnan(TemperatureScaling().temperature)


def test_temperature_scaling_refuses_probabilities_instead_of_logits():
    """Issue 18 #8: fit(softmax outputs, labels) fitted T = 0.402 without a word. Rows in [0, 1] that sum to 1
    are probabilities, not logits: fit and transform refuse them and say to pass logits or log-probabilities."""
    logits, labels = _multiclass_problem(1.5, n=2000)
    probs = torch.softmax(logits, dim=1)
    for passed in (probs, probs.double().numpy()):
        with pytest.raises(ValueError, match=r"look like probabilities.*torch\.log\(probs\)"):
            TemperatureScaling().fit(passed, labels)
    with pytest.raises(ValueError, match="look like probabilities"):
        TemperatureScaling(task="multi-label").fit(probs, F.one_hot(labels, 5).float())
    fitted = TemperatureScaling().fit(logits, labels)
    with pytest.raises(ValueError, match="look like probabilities"):
        fitted.transform(probs)
    # log-probabilities are logits (softmax(log p) = p): they fit the temperature of the logits themselves
    from_log_probs = TemperatureScaling().fit(torch.log(probs), labels).temperature
    assert from_log_probs == pytest.approx(fitted.temperature, rel=1e-5)
    # logits that merely lie in [0, 1] (rows not summing to 1) are still logits
    noise = torch.rand(500, 5, generator=torch.Generator().manual_seed(0))
    in_unit_interval = 0.3 * noise + 0.2 * F.one_hot(labels[:500], 5)
    assert 0 < TemperatureScaling().fit(in_unit_interval, labels[:500]).temperature < math.inf

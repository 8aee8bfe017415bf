"""logit_analysis.calibrated_batch_penalties: the exact expected DCA / MDCA penalty of the calibrated prior predictor
agrees with a Monte-Carlo average of the course's own regularisers on sampled batches."""

import pytest
import torch

from helpers.lessons import calibrated_batch_penalties
from helpers.losses import DCARegulariser, MDCARegulariser

PRIOR = torch.tensor([0.033, 0.051, 0.110, 0.011, 0.111, 0.669, 0.015], dtype=torch.float64)


@pytest.mark.parametrize("batch_size", [32, 128])
def test_matches_monte_carlo_of_the_regularisers(batch_size):
    prior = PRIOR / PRIOR.sum()
    exact = calibrated_batch_penalties(prior, batch_size)
    generator = torch.Generator().manual_seed(0)
    probs = prior.expand(batch_size, -1)
    draws = [torch.multinomial(prior, batch_size, replacement=True, generator=generator) for _ in range(4000)]
    mdca = torch.tensor([float(MDCARegulariser().penalty(probs, y)) for y in draws])
    dca = torch.tensor([float(DCARegulariser().penalty(probs, y)) for y in draws])
    assert exact["mdca"] == pytest.approx(float(mdca.mean()), abs=4 * float(mdca.std()) / 4000**0.5)
    assert exact["dca"] == pytest.approx(float(dca.mean()), abs=4 * float(dca.std()) / 4000**0.5)


def test_penalty_shrinks_like_one_over_root_batch_and_is_never_zero():
    prior = PRIOR / PRIOR.sum()
    small, large = calibrated_batch_penalties(prior, 32), calibrated_batch_penalties(prior, 512)
    assert small["mdca"] > large["mdca"] > 0
    assert small["mdca"] / large["mdca"] == pytest.approx(4.0, rel=0.25)  # sqrt(512 / 32)
    torch.testing.assert_close(small["class_sd"], (prior * (1 - prior) / 32).sqrt())


def test_bad_prior_is_refused():
    with pytest.raises(ValueError, match="summing to 1"):
        calibrated_batch_penalties([0.5, 0.6], 8)
    with pytest.raises(ValueError, match="batch_size"):
        calibrated_batch_penalties([0.5, 0.5], 0)

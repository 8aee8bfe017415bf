"""Random forecasts with labels for the metric tests (seeded, float64)."""

import torch


def random_multiclass(n, k, seed, scale=2.0):
    """(N, K) softmax probabilities of scaled Gaussian logits and (N,) uniform labels."""
    generator = torch.Generator().manual_seed(seed)
    probs = torch.softmax(scale * torch.randn(n, k, generator=generator, dtype=torch.float64), dim=1)
    labels = torch.randint(k, (n,), generator=generator)
    return probs, labels


def random_multilabel(n, t, seed):
    """(N, T) probabilities skewed towards 0 and labels drawn with probability 0.8·√p (so not calibrated)."""
    generator = torch.Generator().manual_seed(seed)
    probs = torch.rand(n, t, generator=generator, dtype=torch.float64) ** 2
    labels = (torch.rand(n, t, generator=generator, dtype=torch.float64) < probs.sqrt() * 0.8).double()
    return probs, labels

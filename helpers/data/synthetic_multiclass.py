"""The DermaMNIST-like multi-class set ``synthetic_dermamnist``: 28x28 RGB lesions on skin, 7 classes with
DermaMNIST's imbalance, and the exact posterior of eq. (2) of :mod:`helpers.data.synthetic_common`,

    P(k | x) = softmax_k( b_k + phi_k(x) ),                                                               (2)

phi the template matches of eq. (1). The offsets b are fitted (Newton) on the fixed reference sample of 20,000
images so that the population class frequencies equal the DermaMNIST class prior. The same sample gives the
population ground truth: ``true_class_similarity`` S[k, j] = E[P(j | x) | y = k] (what the CCL-Net soft-label
matrix estimates; Wei et al., MICCAI 2020).

Measured with the default sizes (7,007 / 1,003 / 2,005) and seed 0 on the 2,005 test images: Bayes accuracy 0.87.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from medmnist import INFO
from scipy.special import logsumexp, softmax

from helpers.data.bundle import MULTI_CLASS
from helpers.data.synthetic_common import (
    CHUNK_ROWS,
    IMAGE_SIZE,
    REFERENCE_SEED,
    REFERENCE_SIZE,
    PlacedTemplates,
    SyntheticDataset,
    SyntheticSplit,
    build_template_bank,
    check_split_sizes,
    inverse_cdf,
    newton_minimise,
    pixel_grid,
    quantise,
    split_rngs,
)

# ---------------------------------------------------------------------------------------------------------------
# DermaMNIST-like: 7 classes in medmnist's order
# ---------------------------------------------------------------------------------------------------------------
DERMA_CLASS_NAMES: list[str] = [INFO["dermamnist"]["label"][str(k)] for k in range(7)]
DERMA_SHORT_NAMES: list[str] = ["akiec", "bcc", "bkl", "df", "mel", "nv", "vasc"]
DERMA_TRAIN_COUNTS = np.array([228, 359, 769, 80, 779, 4693, 99])
DERMA_PRIOR = DERMA_TRAIN_COUNTS / DERMA_TRAIN_COUNTS.sum()
#: designed look-alike pairs: each pair shares its main pattern and differs by a fainter component
DERMA_SIMILAR_PAIRS: tuple[tuple[int, int], ...] = ((0, 2), (1, 3), (4, 5))  # akiec~bkl, bcc~df, mel~nv
DERMA_BETA = 3.0  # beta_k in (1), the same for all classes
DERMA_NOISE = 0.08  # white noise std on the [0, 1] scale, per pixel and channel
DERMA_AMPLITUDE = (0.2, 1.4)  # lesion strength, uniform: faint lesions are ambiguous
DERMA_MAX_SHIFT = 2  # lesion centre jitter, pixels in each direction (25 positions)
DERMA_SKIN = np.array([0.80, 0.60, 0.50])


def true_class_similarity(posteriors: np.ndarray) -> np.ndarray:
    """S[k, j] = E[P(j | x) | y = k] estimated from exact posteriors (rows sum to 1).

    With y drawn from P(. | x): E[P(j | x) | y = k] = E[P(k | x) P(j | x)] / E[P(k | x)], averaged over the given
    images. This is the class-correlation ("soft label") matrix CCL-Net learns (Wei et al., MICCAI 2020, sec. 2.2).
    """
    p = np.asarray(posteriors, dtype=np.float64)
    if p.ndim != 2 or not np.allclose(p.sum(axis=1), 1.0, atol=1e-6):
        raise ValueError("posteriors must be a (N, K) matrix of probability rows (each summing to 1)")
    return (p.T @ p) / p.sum(axis=0)[:, None]


# ---------------------------------------------------------------------------------------------------------------
# Multi-class generator (DermaMNIST-like)
# ---------------------------------------------------------------------------------------------------------------
def _derma_lesions() -> list[np.ndarray]:
    """Radially symmetric lesion patterns (28, 28, 3): offsets from the skin colour on the [0, 1] scale."""
    yy, xx = pixel_grid()
    r = np.hypot(yy - 13.5, xx - 13.5)

    def disk(radius: float, soft: float = 0.8) -> np.ndarray:
        return (1.0 / (1.0 + np.exp(-(radius - r) / soft)))[..., None]

    def ring(radius: float, width: float = 1.0) -> np.ndarray:
        return np.exp(-((r - radius) ** 2) / (2 * width**2))[..., None]

    def rgb(*values: float) -> np.ndarray:
        return np.array(values)[None, None, :]

    tan_annulus = rgb(-0.12, -0.16, -0.18) * ring(6.5, 1.4)
    pearly_centre = rgb(0.14, 0.12, 0.12) * disk(2.0, 0.6)
    brown_disk = rgb(-0.30, -0.32, -0.28) * disk(4.0)
    return [
        tan_annulus + rgb(0.02, -0.16, -0.10) * ring(6.5, 0.8),  # akiec: bkl-like annulus, redder and scaly
        pearly_centre + rgb(-0.02, -0.18, -0.10) * ring(4.0),  # bcc: pearly centre, pink-red ring
        tan_annulus,  # bkl: light tan annulus (waxy, lighter centre)
        pearly_centre + rgb(-0.16, -0.20, -0.20) * ring(4.0),  # df: pearly centre, brown ring
        brown_disk + rgb(-0.14, -0.12, -0.06) * ring(4.8, 0.9),  # mel: nv-like disk with a dark blue-grey rim
        brown_disk,  # nv: regular brown disk
        rgb(0.06, -0.50, -0.12) * disk(3.0),  # vasc: small red-purple disk
    ]


@dataclass(frozen=True)
class SyntheticDermaModel:
    """The DermaMNIST-like generator and its exact posterior, eqs. (1)-(2)."""

    bank: PlacedTemplates
    placed_lesions: np.ndarray  # (K * n_shifts, 28, 28, 3) raw lesion patterns at each position
    n_shifts: int
    bias: np.ndarray  # b_k of eq. (2)

    n_classes = 7

    def features(self, images: np.ndarray) -> np.ndarray:
        return self.bank.features(images)

    def posterior(self, images: np.ndarray) -> np.ndarray:
        """Exact P(k | x) (N, 7) for uint8 images (N, 28, 28, 3)."""
        return softmax(self.features(images) + self.bias, axis=1)

    def sample_images(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n uint8 images (n, 28, 28, 3): a lesion of a class drawn from the prior, at a random position and
        strength, on skin, plus white noise (float32 arithmetic, built in chunks to bound memory)."""
        latent = rng.choice(self.n_classes, size=n, p=DERMA_PRIOR)
        placement = latent * self.n_shifts + rng.integers(0, self.n_shifts, size=n)
        skin = DERMA_SKIN * rng.uniform(0.9, 1.05, size=(n, 1)) + rng.normal(0.0, 0.015, size=(n, 3))
        strength = rng.uniform(*DERMA_AMPLITUDE, size=n)
        images = np.empty((n, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
        lesions = self.placed_lesions.astype(np.float32)
        for lo in range(0, n, CHUNK_ROWS):
            rows = slice(lo, min(n, lo + CHUNK_ROWS))
            chunk = lesions[placement[rows]] * strength[rows, None, None, None].astype(np.float32)
            chunk += skin[rows, None, None, :].astype(np.float32)
            chunk += DERMA_NOISE * rng.standard_normal(chunk.shape, dtype=np.float32)
            images[rows] = quantise(chunk)
        return images

    def sample_labels(self, posteriors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return inverse_cdf(posteriors, rng.random(len(posteriors))).astype(np.int64)


def _fit_multiclass_bias(features: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """b minimising mean_n logsumexp(F_n + b) - prior·b (convex): at the optimum mean_n softmax(F_n + b) = prior."""

    def objective(bias: np.ndarray):
        logits = features + bias
        probs = softmax(logits, axis=1)
        hessian = np.diag(probs.mean(axis=0)) - probs.T @ probs / len(probs)
        # the all-ones direction is flat (softmax is shift-invariant): pin it without changing the other directions
        hessian += 1.0 / len(prior)
        return logsumexp(logits, axis=1).mean() - prior @ bias, probs.mean(axis=0) - prior, hessian

    bias = newton_minimise(objective, np.log(prior) - np.median(features, axis=0), "class offsets")
    return bias - bias.mean()


@functools.lru_cache(maxsize=1)
def _derma_model_and_reference() -> tuple[SyntheticDermaModel, dict[str, np.ndarray]]:
    lesions = _derma_lesions()
    shifts = [
        (dy, dx)
        for dy in range(-DERMA_MAX_SHIFT, DERMA_MAX_SHIFT + 1)
        for dx in range(-DERMA_MAX_SHIFT, DERMA_MAX_SHIFT + 1)
    ]
    bank, placed = build_template_bank(lesions, [shifts] * len(lesions), np.full(len(lesions), DERMA_BETA))
    model = SyntheticDermaModel(bank, placed, len(shifts), np.zeros(len(lesions)))
    rng = np.random.default_rng(REFERENCE_SEED)
    features = model.features(model.sample_images(REFERENCE_SIZE, rng))
    bias = _fit_multiclass_bias(features, DERMA_PRIOR)
    model = SyntheticDermaModel(bank, placed, len(shifts), bias)
    templates = np.stack([(p - p.mean(axis=(0, 1))).ravel() for p in lesions])
    norms = np.linalg.norm(templates, axis=1)
    reference = {
        "true_class_similarity": true_class_similarity(softmax(features + bias, axis=1)),
        "template_similarity": (templates @ templates.T) / np.outer(norms, norms),
        "class_prior": DERMA_PRIOR.copy(),
        "similar_pairs": np.array(DERMA_SIMILAR_PAIRS),
        "bias": bias.copy(),
        "beta": bank.beta.copy(),
    }
    return model, reference


def derma_model() -> SyntheticDermaModel:
    """The calibrated DermaMNIST-like model (built once per process: a few seconds)."""
    return _derma_model_and_reference()[0]


def make_synthetic_dermamnist(
    n_train: int = 7007, n_val: int = 1003, n_test: int = 2005, seed: int = 0
) -> SyntheticDataset:
    """DermaMNIST-like set: 28x28 RGB, 7 classes with DermaMNIST's imbalance, exact posteriors P(k | x).

    Classes (medmnist's order akiec, bcc, bkl, df, mel, nv, vasc) are lesions on skin; the look-alike pairs
    akiec~bkl, bcc~df, mel~nv share their main pattern. Population class frequencies equal
    [228, 359, 769, 80, 779, 4693, 99] / 7007 (labels are sampled, so split counts vary binomially around them).
    Bayes accuracy is about 0.87. The posterior is invariant to horizontal and vertical flips (radially symmetric
    templates, symmetric shift set), so flip augmentation keeps it; small shifts change it slightly (the shift set
    is finite). ``ground_truth``: ``true_class_similarity`` S[k, j] = E[P(j | x) | y = k],
    ``template_similarity`` (cosine of the zero-mean patterns), ``class_prior``, ``similar_pairs``, ``bias``, ``beta``.
    """
    check_split_sizes(n_train=n_train, n_val=n_val, n_test=n_test)
    model, reference = _derma_model_and_reference()
    splits = []
    for n, rng in zip((n_train, n_val, n_test), split_rngs(seed, stream=7)):
        images = model.sample_images(n, rng)
        posteriors = model.posterior(images)
        splits.append(SyntheticSplit(images, model.sample_labels(posteriors, rng), posteriors))
    return SyntheticDataset(
        "synthetic_dermamnist",
        MULTI_CLASS,
        "dermamnist",
        list(DERMA_CLASS_NAMES),
        *splits,
        seed=seed,
        ground_truth={k: v.copy() for k, v in reference.items()},
    )

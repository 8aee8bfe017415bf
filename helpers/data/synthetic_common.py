"""What every synthetic set shares: the construction, the template-match features, the result containers and the
seeded random streams. The sets themselves: :mod:`helpers.data.synthetic_multiclass` (DermaMNIST-like, eq. 2) and
:mod:`helpers.data.synthetic_multilabel` (ChestMNIST-like, eqs. 3-4); :mod:`helpers.data.synthetic_sets` writes them
as medmnist files and reads them back.

Real data only allow an *estimate* of calibration error. These generators produce images together with the exact
Bayes posterior of their labels, so the course can measure true calibration error and the bias of ECE-type
estimators.

Construction (the same for all sets). An image is drawn from a latent description (lesion class / findings,
position, strength, noise), quantised to uint8 and stored. A deterministic feature vector ``phi(x)`` is then computed
from the *stored* uint8 image, and the label distribution is *defined* as a closed-form function of ``phi(x)``;
labels are finally sampled from that distribution. Hence ``P(y | x)`` is exact for the stored image (not for a
continuous pre-quantisation latent): the latent only shapes the image distribution ``p(x)``, and a label can differ
from the latent that drew the image (that is the irreducible label noise a calibrated model must report).

The features are template matches marginalised over position. Template ``k`` (zero-mean per channel) placed at
each allowed position ``s`` of a set ``S_k`` gives a response ``r_ks(x) = <x / 255, T_k^s>`` and

    phi_k(x) = log( (1/``|S_k|``) * sum_{s in S_k} exp(beta_k * r_ks(x)) )                                   (1)

which, up to a constant, is the log-likelihood ratio of "pattern k present at an unknown, uniformly drawn
position" against white Gaussian noise. The posteriors are

* multi-class (DermaMNIST-like):  P(k | x) = softmax_k( b_k + phi_k(x) )                                  (2)
* multi-label, coupled given the image (ChestMNIST-like, ``synthetic_chestmnist``):
      P(y | x) ∝ exp( sum_t (c_t + phi_t(x)) y_t + sum_{s<t} J_st y_s y_t )                               (3)
* multi-label, independent given the image (``synthetic_chestmnist_independent``):
      P(y | x) = prod_t σ( c_t + phi_t(x) + sum_{k≠t} W_tk (phi_k(x) - mean phi_k) )  (shift folded into c)   (4)

The offsets (and couplings or mixing) of each posterior are fitted on a fixed reference sample of 20,000 images
(fixed seed): the constants are the same for every ``seed``; split counts are binomial around the population
values, not equal to them. The same reference sample gives the population ground truth (Monte-Carlo over 20,000
images, computed from the exact posteriors).

Images are synthesised in float32 and quantised; features and posteriors are float64 (exact up to float64
rounding). Everything is seeded: the same seed gives identical arrays and identical file bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import ThreadpoolController

IMAGE_SIZE = 28
GENERATOR_VERSION = 2
REFERENCE_SIZE = 20_000
REFERENCE_SEED = 20_240_611  # fixed: the posterior function must not depend on the user's seed
CHUNK_ROWS = 4096  # images (or rows of fields) processed at once: bounds the memory of the float64 products


@functools.lru_cache(maxsize=1)
def _blas_controller() -> ThreadpoolController:
    return ThreadpoolController()  # finds the BLAS libraries once; limiting is then cheap


def one_blas_thread():
    """Context: one BLAS thread. The matrices here are modest; on 2 busy shared cores OpenBLAS with 2 threads was
    measured 30x slower on (200 x 784) @ (784 x 200) products, and never more than 2x faster on the big ones."""
    return _blas_controller().limit(limits=1, user_api="blas")


# ---------------------------------------------------------------------------------------------------------------
# Result containers
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class SyntheticSplit:
    """One split in medmnist's array layout.

    images: uint8 (N, 28, 28) grayscale or (N, 28, 28, 3) RGB; labels: int64 (N,) class indices (multi-class) or
    uint8 (N, T) in {0, 1} (multi-label); posteriors: float64 (N, K) P(k | x) or (N, T) P(y_t = 1 | x).
    """

    images: np.ndarray
    labels: np.ndarray
    posteriors: np.ndarray

    def __len__(self) -> int:
        return len(self.images)


@dataclass
class SyntheticDataset:
    """Three splits plus the generator's ground truth (population quantities: see the generator's module,
    :mod:`helpers.data.synthetic_multiclass` or :mod:`helpers.data.synthetic_multilabel`)."""

    name: str
    task: str
    medmnist_flag: str
    class_names: list[str]
    train: SyntheticSplit
    val: SyntheticSplit
    test: SyntheticSplit
    seed: int
    ground_truth: dict[str, np.ndarray] = field(default_factory=dict)

    def splits(self) -> dict[str, SyntheticSplit]:
        return {"train": self.train, "val": self.val, "test": self.test}


# ---------------------------------------------------------------------------------------------------------------
# Features: template matches marginalised over position, eq. (1)
# ---------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlacedTemplates:
    """Columns of ``columns`` are zero-mean templates at their allowed positions, grouped contiguously by feature.

    ``columns`` (D, M) with D = flattened image size in medmnist layout; ``group`` (M,) non-decreasing feature
    index; ``beta`` (G,) per feature. ``features(images)`` evaluates eq. (1) for every feature.
    """

    columns: np.ndarray
    group: np.ndarray
    beta: np.ndarray

    @property
    def n_features(self) -> int:
        return len(self.beta)

    def features(self, images: np.ndarray) -> np.ndarray:
        images = np.asarray(images)
        if images.dtype != np.uint8:
            raise ValueError(f"the posterior is defined on stored uint8 images, got dtype {images.dtype}")
        flat = images.reshape(len(images), -1)
        if flat.shape[1] != self.columns.shape[0]:
            raise ValueError(f"images have {flat.shape[1]} values each, the templates expect {self.columns.shape[0]}")
        starts = np.flatnonzero(np.r_[True, np.diff(self.group) != 0])
        counts = np.diff(np.r_[starts, len(self.group)])
        out = np.empty((len(flat), self.n_features))
        scale = self.beta[self.group]
        with one_blas_thread():
            for lo in range(0, len(flat), CHUNK_ROWS):
                scores = (flat[lo : lo + CHUNK_ROWS].astype(np.float64) / 255.0) @ self.columns * scale
                peak = np.maximum.reduceat(scores, starts, axis=1)
                total = np.add.reduceat(np.exp(scores - peak[:, self.group]), starts, axis=1)
                out[lo : lo + CHUNK_ROWS] = peak + np.log(total / counts)
        return out


def build_template_bank(
    patterns: list[np.ndarray], placements: list[list[tuple[int, int]]], beta: np.ndarray
) -> tuple[PlacedTemplates, np.ndarray]:
    """Zero-mean (per channel) templates rolled to each placement; returns the bank and the rolled raw patterns."""
    columns, raw, group = [], [], []
    for index, (pattern, shifts) in enumerate(zip(patterns, placements)):
        template = pattern - pattern.mean(axis=(0, 1), keepdims=True)
        for shift in shifts:
            columns.append(np.roll(template, shift, axis=(0, 1)).ravel())
            raw.append(np.roll(pattern, shift, axis=(0, 1)))
            group.append(index)
    bank = PlacedTemplates(np.stack(columns, axis=1), np.array(group), np.asarray(beta, dtype=np.float64))
    return bank, np.stack(raw)


def quantise(images: np.ndarray) -> np.ndarray:
    """Images on the [0, 1] scale as stored uint8 images (rounded, clipped to 0..255)."""
    return np.clip(np.rint(images * 255.0), 0, 255).astype(np.uint8)


def pixel_grid() -> tuple[np.ndarray, np.ndarray]:
    """Row and column coordinates (float64, 28 x 28 each) of the image's pixels."""
    return np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE].astype(np.float64)


def split_rngs(seed: int, stream: int) -> list[np.random.Generator]:
    """Independent streams for train/val/test: changing one split's size leaves the others unchanged."""
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return [np.random.default_rng(s) for s in np.random.SeedSequence([int(seed), stream]).spawn(3)]


def check_split_sizes(**sizes: int) -> None:
    """A ValueError naming the first split size that is not a positive integer."""
    for name, value in sizes.items():
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def inverse_cdf(probs: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Category index per row: the first k with cumsum(probs)[k] > u (rounding guard on the last category)."""
    return np.minimum((np.cumsum(probs, axis=1) <= uniforms[:, None]).sum(axis=1), probs.shape[1] - 1)


def newton_minimise(
    objective: Callable[[np.ndarray], tuple[float, np.ndarray, np.ndarray]], start: np.ndarray, what: str
) -> np.ndarray:
    """Damped Newton for a smooth convex objective returning (value, gradient, Hessian); stops at ``|grad|`` < 1e-12."""
    point = start
    value, gradient, hessian = objective(point)
    for _ in range(100):
        if np.abs(gradient).max() < 1e-12:
            return point
        step = np.linalg.lstsq(hessian, gradient, rcond=None)[0]
        for _ in range(60):  # halve until the objective does not increase (it is convex, so this terminates)
            trial = objective(point - step)
            if trial[0] <= value + 1e-15:
                break
            step = step / 2
        point, (value, gradient, hessian) = point - step, trial
    raise RuntimeError(f"calibrating the synthetic {what} did not converge (gradient {np.abs(gradient).max():.2e})")

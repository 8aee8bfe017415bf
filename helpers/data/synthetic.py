"""Synthetic MedMNIST-like data sets whose posteriors are known exactly.

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

Marginals of (3) are computed by exact enumeration of all 2^T configurations, factorised as 2^(T/2) x 2^(T/2)
(first half A, second half B): Z = sum_a M_A[a] sum_b K[a, b] M_B[b] with K = exp(y_a^T J_AB y_b) shared by all
images, so one image costs one (2^7 x 2^7) matrix-vector product. Labels are sampled exactly from the joint
(first y_A from its marginal, then y_B | y_A). The bundle's ground truth holds ``offsets`` c, ``mixing``
M = I + W (the identity for (3)) and ``couplings`` J (zero for (4)), so the exact joint P(y | x) of any image is
h(x) = c + M phi(x) with J, by enumeration.

The chest labels are grounded in real data: ``helpers/data_files/chestxray14_label_stats.json`` holds the
prevalences and pairwise co-occurrence counts of the first 40,000 images (10,447 patients) of NIH ChestX-ray14
(Wang et al., CVPR 2017; see ``helpers.data.label_stats``). The findings drawn into an image come from the latent
maximum-entropy pairwise model with exactly these prevalences and co-occurrences (fitted by enumeration). The
posterior is then fitted on a fixed reference sample of 20,000 images (fixed seed) so that its *population*
statistics, the reference-sample averages of the exact posteriors E_x[P(y_t | x)] and E_x[P(y_s, y_t | x)], equal
the real ones: for (3) c and J jointly by convex moment matching (Newton, exact Hessian by enumeration;
``fit_pairwise_moments``); for (4) c and W by Gauss-Newton (``fit_independent_posterior``). Both match to
float precision (max relative prevalence error < 1e-10, max correlation error < 1e-10; tolerances tested: 10 %
and 0.02). In (3) labels are coupled given the image (``|J|`` up to 2.5: SPA's conditional-independence assumption 1,
Cheng & Vasconcelos CVPR 2024, fails); in (4) they are dependent only through the image (assumption 1 holds).
The fit is deterministic and cached per process (about 10-25 s per variant on 2 shared cores). The DermaMNIST-like
offsets b (2) are fitted the same way (Newton) to the DermaMNIST class prior. The constants are the same for every
``seed``; split counts are binomial around the population values, not equal to them. The same reference sample
gives the population ground truth (Monte-Carlo over 20,000 images, computed from the exact posteriors):
``true_class_similarity`` S[k, j] = E[P(j | x) | y = k] (what the CCL-Net soft-label matrix estimates; Wei et al.,
MICCAI 2020) and the label co-occurrence and correlation.

Measured with the default sizes (20,000 / 2,500 / 5,000) and seed 0 on the 5,000 test images: DermaMNIST-like
Bayes accuracy 0.87. ChestMNIST-like, coupled: macro AUROC of the exact marginals 0.817, macro AP 0.384, 57.3 % of
images without finding; independent: macro AUROC 0.818, macro AP 0.379, 57.2 % without finding (ChestX-ray14:
57.7 %). Generating one chest set (27,500 images) takes about 4.5 s after the fit.

Images are synthesised in float32 and quantised; features and posteriors are float64 (exact up to float64
rounding). Everything is seeded: the same seed gives identical arrays and identical file bytes.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from medmnist import INFO
from scipy.special import expit, logsumexp, softmax
from threadpoolctl import ThreadpoolController

from helpers.data import label_stats
from helpers.utils import write_atomically_with

IMAGE_SIZE = 28
GENERATOR_VERSION = 2
MULTI_CLASS = "multi-class"
MULTI_LABEL = "multi-label"
_REFERENCE_SIZE = 20_000
_REFERENCE_SEED = 20_240_611  # fixed: the posterior function must not depend on the user's seed
_CHUNK = 4096

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

# ---------------------------------------------------------------------------------------------------------------
# ChestMNIST-like: 14 findings in medmnist's order
# ---------------------------------------------------------------------------------------------------------------
CHEST_FINDINGS: list[str] = [INFO["chestmnist"]["label"][str(t)] for t in range(14)]
#: "coupled": labels coupled given the image (eq. 3, J != 0); "independent": independent given it (eq. 4)
CHEST_VARIANTS: tuple[str, ...] = ("coupled", "independent")
CHEST_NOISE = 0.06
CHEST_AMPLITUDE_RANGE = (0.4, 1.6)  # multiplies each finding's amplitude


@functools.lru_cache(maxsize=1)
def _blas_controller() -> ThreadpoolController:
    return ThreadpoolController()  # finds the BLAS libraries once; limiting is then cheap


def _one_blas_thread():
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
    """Three splits plus the generator's ground truth (population quantities, see the module docstring)."""

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
        with _one_blas_thread():
            for lo in range(0, len(flat), _CHUNK):
                scores = (flat[lo : lo + _CHUNK].astype(np.float64) / 255.0) @ self.columns * scale
                peak = np.maximum.reduceat(scores, starts, axis=1)
                total = np.add.reduceat(np.exp(scores - peak[:, self.group]), starts, axis=1)
                out[lo : lo + _CHUNK] = peak + np.log(total / counts)
        return out


def _build_bank(
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


def _quantise(images: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(images * 255.0), 0, 255).astype(np.uint8)


def _grid() -> tuple[np.ndarray, np.ndarray]:
    return np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE].astype(np.float64)


def _split_rngs(seed: int, stream: int) -> list[np.random.Generator]:
    """Independent streams for train/val/test: changing one split's size leaves the others unchanged."""
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return [np.random.default_rng(s) for s in np.random.SeedSequence([int(seed), stream]).spawn(3)]


def _check_sizes(**sizes: int) -> None:
    for name, value in sizes.items():
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _inverse_cdf(probs: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Category index per row: the first k with cumsum(probs)[k] > u (rounding guard on the last category)."""
    return np.minimum((np.cumsum(probs, axis=1) <= uniforms[:, None]).sum(axis=1), probs.shape[1] - 1)


# ---------------------------------------------------------------------------------------------------------------
# Exact inference in the pairwise binary model (3)
# ---------------------------------------------------------------------------------------------------------------
def _configs(n: int) -> np.ndarray:
    """All 2^n binary vectors (2^n, n); bit t of the row index is label t."""
    return ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1).astype(np.float64)


class _Enumerator:
    """Exact enumeration of P(y | h) ∝ exp(h·y + ½ yᵀJy) split into halves A = first ⌈T/2⌉ labels and B = rest."""

    def __init__(self, couplings: np.ndarray):
        couplings = np.asarray(couplings, dtype=np.float64)
        if couplings.ndim != 2 or couplings.shape[0] != couplings.shape[1]:
            raise ValueError(f"couplings must be a square (T, T) matrix, got shape {couplings.shape}")
        if not np.allclose(couplings, couplings.T) or np.any(np.diag(couplings) != 0):
            raise ValueError("couplings must be symmetric with a zero diagonal")
        if couplings.shape[0] > 24:
            raise ValueError(f"exact enumeration supports at most 24 labels, got {couplings.shape[0]}")
        n_labels = couplings.shape[0]
        self.n_labels = n_labels
        self.n_a = (n_labels + 1) // 2
        self.y_a, self.y_b = _configs(self.n_a), _configs(n_labels - self.n_a)
        a, b = slice(0, self.n_a), slice(self.n_a, n_labels)
        self.q_a = 0.5 * np.einsum("ci,ij,cj->c", self.y_a, couplings[a, a], self.y_a)
        self.q_b = 0.5 * np.einsum("ci,ij,cj->c", self.y_b, couplings[b, b], self.y_b)
        log_cross = self.y_a @ couplings[a, b] @ self.y_b.T
        self.log_cross_max = log_cross.max()
        self.cross = np.exp(log_cross - self.log_cross_max)  # K[a, b] up to a constant

    def _check(self, fields: np.ndarray) -> np.ndarray:
        fields = np.atleast_2d(np.asarray(fields, dtype=np.float64))
        if fields.ndim != 2 or fields.shape[1] != self.n_labels:
            raise ValueError(f"fields must have shape (N, {self.n_labels}) to match the couplings, got {fields.shape}")
        if not np.isfinite(fields).all():
            raise ValueError("fields must be finite")
        return fields

    def _halves(self, fields: np.ndarray):
        log_a = fields[:, : self.n_a] @ self.y_a.T + self.q_a
        log_b = fields[:, self.n_a :] @ self.y_b.T + self.q_b
        max_a, max_b = log_a.max(axis=1, keepdims=True), log_b.max(axis=1, keepdims=True)
        m_a, m_b = np.exp(log_a - max_a), np.exp(log_b - max_b)
        through_b = m_b @ self.cross.T  # sum_b K[a, b] M_B[b]
        through_a = m_a @ self.cross  # sum_a M_A[a] K[a, b]
        z = (m_a * through_b).sum(axis=1)
        log_z = np.log(z) + max_a[:, 0] + max_b[:, 0] + self.log_cross_max
        return m_a, m_b, through_a, through_b, z, log_z

    def statistics(self, fields: np.ndarray, second_moment: bool = False):
        """Marginals (N, T), log Z (N,) and, if asked, (1/N) sum_n E[y yᵀ | h_n] (T, T) in one pass.

        The mean second moment has the mean marginals on its diagonal and the expected co-occurrence elsewhere.
        """
        fields = self._check(fields)
        n_a, n_labels = self.n_a, fields.shape[1]
        marginals, log_z = np.empty(fields.shape), np.empty(len(fields))
        moment = np.zeros((n_labels, n_labels))
        with _one_blas_thread():
            for lo in range(0, len(fields), _CHUNK):
                m_a, m_b, through_a, through_b, z, log_z[lo : lo + _CHUNK] = self._halves(fields[lo : lo + _CHUNK])
                p_a = m_a * through_b / z[:, None]  # P(y_A = a | h)
                p_b = m_b * through_a / z[:, None]  # P(y_B = b | h)
                marginals[lo : lo + _CHUNK, :n_a] = p_a @ self.y_a
                marginals[lo : lo + _CHUNK, n_a:] = p_b @ self.y_b
                if second_moment:
                    moment[:n_a, :n_a] += self.y_a.T @ (self.y_a * p_a.sum(axis=0)[:, None])
                    moment[n_a:, n_a:] += self.y_b.T @ (self.y_b * p_b.sum(axis=0)[:, None])
                    moment[:n_a, n_a:] += self.y_a.T @ (self.cross * ((m_a / z[:, None]).T @ m_b)) @ self.y_b
        moment[n_a:, :n_a] = moment[:n_a, n_a:].T
        return marginals, log_z, moment / len(fields)

    def pair_statistics(self, fields: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-row pairwise marginals P(y_s = 1, y_t = 1 | h_n) (N, T, T) (diagonal: the marginals), log Z (N,)
        and the mean joint distribution (1/N) sum_n P(y | h_n) over all 2^T configurations (row i of
        ``_configs(T)``: bit t of i is label t)."""
        fields = self._check(fields)
        n_a, n_labels = self.n_a, fields.shape[1]
        pairs, log_z = np.empty((len(fields), n_labels, n_labels)), np.empty(len(fields))
        mean_joint = np.zeros(self.cross.shape)
        outer_a = (self.y_a[:, :, None] * self.y_a[:, None, :]).reshape(len(self.y_a), -1)
        outer_b = (self.y_b[:, :, None] * self.y_b[:, None, :]).reshape(len(self.y_b), -1)
        with _one_blas_thread():
            for lo in range(0, len(fields), _CHUNK):
                rows = slice(lo, lo + _CHUNK)
                m_a, m_b, through_a, through_b, z, log_z[rows] = self._halves(fields[rows])
                w_a = m_a / z[:, None]
                pairs[rows, :n_a, :n_a] = ((w_a * through_b) @ outer_a).reshape(-1, n_a, n_a)
                pairs[rows, n_a:, n_a:] = ((m_b * through_a / z[:, None]) @ outer_b).reshape(
                    -1, n_labels - n_a, n_labels - n_a
                )
                for s in range(n_a):
                    pairs[rows, s, n_a:] = (((w_a * self.y_a[:, s]) @ self.cross) * m_b) @ self.y_b
                mean_joint += w_a.T @ m_b
        pairs[:, n_a:, :n_a] = pairs[:, :n_a, n_a:].transpose(0, 2, 1)
        mean_joint = (mean_joint * self.cross / len(fields)).T.ravel()  # index a + 2^n_a * b
        return pairs, log_z, mean_joint

    def subset_moments(self, fields: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """mu_S(h_n) = P(y_t = 1 for every t in S | h_n) (N, len(masks)) for label subsets S given as bitmasks.

        With P(a, b | h) = M_A[a] K[a, b] M_B[b] / Z over the halves, mu_S = sum_{a ⊇ S_A} sum_{b ⊇ S_B} P(a, b | h)
        = (Z_A^T P Z_B)[S_A, S_B] with the superset indicators Z[c, s] = 1[c ⊇ s]: two (2^7 x 2^7) products per
        image, every term non-negative (no cancellation)."""
        fields = self._check(fields)
        masks = np.asarray(masks, dtype=np.int64).reshape(-1)
        if masks.size and (masks.min() < 0 or masks.max() >= 2**self.n_labels):
            raise ValueError(
                f"masks must be label bitmasks in [0, 2^{self.n_labels}), got {masks.min()}..{masks.max()}"
            )
        low = masks & (2**self.n_a - 1)
        high = masks >> self.n_a
        rows_a, where_a = np.unique(low, return_inverse=True)
        cols_b, where_b = np.unique(high, return_inverse=True)
        codes_a, codes_b = np.arange(len(self.y_a)), np.arange(len(self.y_b))
        superset_a = ((codes_a[:, None] & rows_a[None, :]) == rows_a[None, :]).astype(np.float64)  # (2^n_a, S_A)
        superset_b = ((codes_b[:, None] & cols_b[None, :]) == cols_b[None, :]).astype(np.float64)  # (2^n_b, S_B)
        out = np.empty((len(fields), len(masks)))
        chunk = 256
        with _one_blas_thread():
            for lo in range(0, len(fields), chunk):
                rows = slice(lo, lo + chunk)
                m_a, m_b, _, _, z, _ = self._halves(fields[rows])
                through_b = self.cross @ (m_b[:, :, None] * superset_b[None])  # (n, 2^n_a, S_B)
                table = superset_a.T @ ((m_a / z[:, None])[:, :, None] * through_b)  # (n, S_A, S_B)
                out[rows] = table[:, where_a, where_b]
        return out

    def sample(self, fields: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One exact draw of y (N, T) uint8 per row: y_A from its marginal, then y_B given y_A."""
        fields = self._check(fields)
        uniforms = rng.random((len(fields), 2))
        labels = np.empty(fields.shape, dtype=np.uint8)
        with _one_blas_thread():
            return self._sample(fields, uniforms, labels)

    def _sample(self, fields: np.ndarray, uniforms: np.ndarray, labels: np.ndarray) -> np.ndarray:
        for lo in range(0, len(fields), _CHUNK):
            m_a, m_b, _, through_b, _, _ = self._halves(fields[lo : lo + _CHUNK])
            p_a = m_a * through_b
            a = _inverse_cdf(p_a / p_a.sum(axis=1, keepdims=True), uniforms[lo : lo + _CHUNK, 0])
            p_b = m_b * self.cross[a]
            b = _inverse_cdf(p_b / p_b.sum(axis=1, keepdims=True), uniforms[lo : lo + _CHUNK, 1])
            labels[lo : lo + _CHUNK, : self.n_a] = self.y_a[a]
            labels[lo : lo + _CHUNK, self.n_a :] = self.y_b[b]
        return labels


def multilabel_marginals(fields: np.ndarray, couplings: np.ndarray) -> np.ndarray:
    """Exact P(y_t = 1) under P(y) ∝ exp(sum_t h_t y_t + sum_{s<t} J_st y_s y_t), one row of fields per image.

    fields: (N, T) h; couplings: (T, T) symmetric J with zero diagonal. Exact enumeration of all 2^T configurations
    (vectorised, factorised into two halves), T <= 24.
    """
    return _Enumerator(couplings).statistics(fields)[0]


def multilabel_log_partition(fields: np.ndarray, couplings: np.ndarray) -> np.ndarray:
    """log Z(h) = log sum_y exp(h·y + sum_{s<t} J_st y_s y_t) per row of fields (exact enumeration)."""
    return _Enumerator(couplings).statistics(fields)[1]


def multilabel_pair_marginals(fields: np.ndarray, couplings: np.ndarray) -> np.ndarray:
    """P(y_s = 1, y_t = 1 | h_n) (N, T, T) per image, exact (diagonal: the marginals P(y_t = 1 | h_n))."""
    return _Enumerator(couplings).pair_statistics(fields)[0]


def multilabel_subset_moments(fields: np.ndarray, couplings: np.ndarray, masks) -> np.ndarray:
    """P(y_t = 1 for every t in S | h_n) (N, len(masks)), exact, for label subsets S given as integer bitmasks
    (bit t = label t; the empty set 0 has probability 1). Any event "these labels present, those absent" follows by
    inclusion-exclusion (``helpers.metrics.joint_retrieval_map``)."""
    return _Enumerator(couplings).subset_moments(fields, masks)


def multilabel_expected_cooccurrence(fields: np.ndarray, couplings: np.ndarray) -> np.ndarray:
    """C[s, t] = (1/N) sum_n P(y_s = 1, y_t = 1 | h_n) (diagonal: mean marginals), exact."""
    return _Enumerator(couplings).statistics(fields, second_moment=True)[2]


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
    yy, xx = _grid()
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
        for lo in range(0, n, _CHUNK):
            rows = slice(lo, min(n, lo + _CHUNK))
            chunk = lesions[placement[rows]] * strength[rows, None, None, None].astype(np.float32)
            chunk += skin[rows, None, None, :].astype(np.float32)
            chunk += DERMA_NOISE * rng.standard_normal(chunk.shape, dtype=np.float32)
            images[rows] = _quantise(chunk)
        return images

    def sample_labels(self, posteriors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return _inverse_cdf(posteriors, rng.random(len(posteriors))).astype(np.int64)


def _newton_minimise(
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


def _fit_multiclass_bias(features: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """b minimising mean_n logsumexp(F_n + b) - prior·b (convex): at the optimum mean_n softmax(F_n + b) = prior."""

    def objective(bias: np.ndarray):
        logits = features + bias
        probs = softmax(logits, axis=1)
        hessian = np.diag(probs.mean(axis=0)) - probs.T @ probs / len(probs)
        # the all-ones direction is flat (softmax is shift-invariant): pin it without changing the other directions
        hessian += 1.0 / len(prior)
        return logsumexp(logits, axis=1).mean() - prior @ bias, probs.mean(axis=0) - prior, hessian

    bias = _newton_minimise(objective, np.log(prior) - np.median(features, axis=0), "class offsets")
    return bias - bias.mean()


@functools.lru_cache(maxsize=1)
def _derma_model_and_reference() -> tuple[SyntheticDermaModel, dict[str, np.ndarray]]:
    lesions = _derma_lesions()
    shifts = [
        (dy, dx)
        for dy in range(-DERMA_MAX_SHIFT, DERMA_MAX_SHIFT + 1)
        for dx in range(-DERMA_MAX_SHIFT, DERMA_MAX_SHIFT + 1)
    ]
    bank, placed = _build_bank(lesions, [shifts] * len(lesions), np.full(len(lesions), DERMA_BETA))
    model = SyntheticDermaModel(bank, placed, len(shifts), np.zeros(len(lesions)))
    rng = np.random.default_rng(_REFERENCE_SEED)
    features = model.features(model.sample_images(_REFERENCE_SIZE, rng))
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
    _check_sizes(n_train=n_train, n_val=n_val, n_test=n_test)
    model, reference = _derma_model_and_reference()
    splits = []
    for n, rng in zip((n_train, n_val, n_test), _split_rngs(seed, stream=7)):
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


# ---------------------------------------------------------------------------------------------------------------
# Multi-label generator (ChestMNIST-like)
# ---------------------------------------------------------------------------------------------------------------
def _chest_anatomy() -> np.ndarray:
    yy, xx = _grid()

    def ellipse(cy: float, cx: float, ry: float, rx: float, soft: float = 1.0) -> np.ndarray:
        d = np.sqrt(((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2)
        return 1.0 / (1.0 + np.exp((d - 1.0) * min(ry, rx) / soft))

    body = ellipse(14.5, 13.5, 15, 12.5, 1.5)
    lungs = ellipse(12, 8, 8, 4.2) + ellipse(12, 19, 8, 4.2)
    heart = ellipse(18.5, 15, 5, 5.5)
    diaphragm = ellipse(27, 13.5, 5, 13)
    return 0.08 + 0.5 * body - 0.3 * lungs + 0.25 * heart + 0.2 * diaphragm


def _chest_findings() -> list[tuple[np.ndarray, list[tuple[int, int]], float, float]]:
    """(pattern centred at the image centre, allowed shifts, amplitude, beta) per finding, medmnist's order."""
    yy, xx = _grid()
    cy0, cx0 = 14, 14

    def gauss(dy: float, dx: float, sy: float, sx: float | None = None) -> np.ndarray:
        sx = sy if sx is None else sx
        return np.exp(-((yy - cy0 - dy) ** 2 / (2 * sy**2) + (xx - cx0 - dx) ** 2 / (2 * sx**2)))

    def ellipse(ry: float, rx: float) -> np.ndarray:
        d = np.sqrt(((yy - cy0) / ry) ** 2 + ((xx - cx0) / rx) ** 2)
        return 1.0 / (1.0 + np.exp((d - 1.0) * min(ry, rx)))

    def at(points: list[tuple[float, float]]) -> list[tuple[int, int]]:
        return [(int(r - cy0), int(c - cx0)) for r, c in points]

    def both_sides(points: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return at(points + [(r, 27 - c) for r, c in points])

    lungs = both_sides([(r, c) for r in range(6, 21, 2) for c in range(5, 11, 2)])
    upper = both_sides([(r, c) for r in range(6, 14, 2) for c in range(5, 11, 2)])
    middle = both_sides([(r, c) for r in (13, 14, 15) for c in (6, 8, 10)])
    lower = both_sides([(r, c) for r in (17, 19) for c in (6, 8, 10)])
    periphery = both_sides([(r, c) for r in (6, 8, 10, 12) for c in (4, 5)])
    lungs_both = -(np.roll(ellipse(8, 4.2), (-2, -6), axis=(0, 1)) + np.roll(ellipse(8, 4.2), (-2, 5), axis=(0, 1)))
    # name order follows CHEST_FINDINGS; amplitude on the [0, 1] scale; beta tuned for Bayes AUROC ~0.75-0.9
    return [
        (gauss(0, 0, 0.8, 2.5), middle, 0.25, 2.6),  # atelectasis: plate-like band
        (ellipse(6.2, 7.2) - ellipse(5, 5.5), at([(18.5, 15)]), 0.18, 1.6),  # cardiomegaly: enlarged border
        (gauss(0, 0, 1.6, 2.2), at([(22, c) for c in (5, 7, 20, 22)]), 0.30, 1.6),  # effusion: costophrenic angles
        (gauss(0, 0, 3.0), lungs, 0.15, 1.2),  # infiltration: diffuse haze
        (gauss(0, 0, 2.0), upper, 0.30, 1.7),  # mass
        (gauss(0, 0, 0.9), lungs, 0.45, 5.0),  # nodule: small spot
        (gauss(0, 0, 2.5), lower, 0.20, 0.7),  # pneumonia: patchy haze
        (-gauss(0, 0, 2.0, 1.5), at([(r, c) for r in (5, 7) for c in (5, 7, 20, 22)]), 0.30, 2.6),  # pneumothorax
        (gauss(0, 0, 1.6, 2.2), lower, 0.30, 2.0),  # consolidation: dense patch
        (gauss(0, -4, 2.5, 2.0) + gauss(0, 4, 2.5, 2.0), at([(12, 14)]), 0.15, 1.0),  # edema: perihilar butterfly
        (lungs_both, [(0, 0)], 0.08, 0.9),  # emphysema: hyperlucent lungs
        (gauss(-1.5, 0, 2.5, 0.6) + gauss(1.5, 0, 2.5, 0.6), periphery, 0.30, 1.4),  # fibrosis: peripheral streaks
        (gauss(0, 0, 3.0, 0.7), at([(r, c) for r in (9, 12, 15) for c in (3, 24)]), 0.30, 2.7),  # pleural thickening
        (gauss(0, 0, 1.8), at([(20, 14)]), 0.30, 2.0),  # hernia: retrocardiac mass
    ]


@dataclass(frozen=True)
class SyntheticChestModel:
    """The ChestMNIST-like generator and its exact posterior, eqs. (1), (3) and (4).

    Images: findings drawn from the latent pairwise model P(z) ∝ exp(latent_fields·z + ½ zᵀ latent_couplings z).
    Labels: P(y | x) ∝ exp(sum_t h_t(x) y_t + ½ yᵀ J y) with fields h(x) = offsets + mixing @ phi(x); the
    ``coupled`` variant has mixing = I and J ≠ 0 (eq. 3), the ``independent`` variant J = 0 (eq. 4).
    """

    variant: str
    bank: PlacedTemplates
    placed_findings: np.ndarray  # (M, 28, 28) raw finding patterns at each allowed position
    amplitude: np.ndarray  # (T,)
    couplings: np.ndarray  # J (T, T) of the posterior (zero for the independent variant)
    offsets: np.ndarray  # c_t
    mixing: np.ndarray  # (T, T): h(x) = offsets + mixing @ phi(x); the identity for the coupled variant
    latent_fields: np.ndarray  # fields of the image-free latent model that draws which findings are drawn in
    latent_couplings: np.ndarray  # couplings of that latent model
    anatomy: np.ndarray  # (28, 28)

    n_labels = 14

    def features(self, images: np.ndarray) -> np.ndarray:
        return self.bank.features(images)

    def fields(self, images: np.ndarray) -> np.ndarray:
        """h(x) = c + mixing @ phi(x), eqs. (3)-(4)."""
        return self.fields_from_features(self.features(images))

    def fields_from_features(self, features: np.ndarray) -> np.ndarray:
        return features @ self.mixing.T + self.offsets

    def posterior(self, images: np.ndarray) -> np.ndarray:
        """Exact marginals P(y_t = 1 | x) (N, 14) for uint8 images (N, 28, 28)."""
        return multilabel_marginals(self.fields(images), self.couplings)

    def sample_latent(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n exact draws (n, 14) bool of the findings drawn into the images, from the latent pairwise model."""
        all_configs = _configs(self.n_labels)
        energy = all_configs @ self.latent_fields + 0.5 * np.einsum(
            "ci,ij,cj->c", all_configs, self.latent_couplings, all_configs
        )
        return all_configs[rng.choice(len(all_configs), size=n, p=softmax(energy))].astype(bool)

    def sample_images(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n uint8 images (n, 28, 28): findings drawn from the latent model, each drawn at a random allowed position
        and strength on a chest-like anatomy, plus white noise (float32, built in chunks)."""
        drawn = self.sample_latent(n, rng)
        gain = rng.uniform(0.85, 1.15, size=n).astype(np.float32)
        offset = rng.normal(0, 0.03, size=n).astype(np.float32)
        starts = np.flatnonzero(np.r_[True, np.diff(self.bank.group) != 0])
        counts = np.bincount(self.bank.group)
        placement = [starts[t] + rng.integers(0, counts[t], size=n) for t in range(self.n_labels)]
        strength = [self.amplitude[t] * rng.uniform(*CHEST_AMPLITUDE_RANGE, size=n) for t in range(self.n_labels)]
        findings = self.placed_findings.astype(np.float32)
        images = np.empty((n, IMAGE_SIZE, IMAGE_SIZE), dtype=np.uint8)
        for lo in range(0, n, _CHUNK):
            rows = slice(lo, min(n, lo + _CHUNK))
            chunk = self.anatomy.astype(np.float32)[None] * gain[rows, None, None] + offset[rows, None, None]
            for t in range(self.n_labels):  # a loop over the 14 findings, vectorised over images
                weight = (strength[t][rows] * drawn[rows, t]).astype(np.float32)
                chunk += findings[placement[t][rows]] * weight[:, None, None]
            chunk += CHEST_NOISE * rng.standard_normal(chunk.shape, dtype=np.float32)
            images[rows] = _quantise(chunk)
        return images

    def sample_labels(self, fields: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Labels (N, 14) uint8 drawn exactly from the joint P(y | x) given the fields h(x) (see ``fields``)."""
        return _Enumerator(self.couplings).sample(fields, rng)


def _sufficient_statistics(n_labels: int) -> np.ndarray:
    """(y_t, y_s y_t for s < t) for every configuration: (2^T, T + T(T-1)/2), rows as in ``_configs``."""
    configs = _configs(n_labels)
    first, second = np.triu_indices(n_labels, 1)
    return np.hstack([configs, configs[:, first] * configs[:, second]])


def _pairwise_parameters(offsets: np.ndarray, couplings: np.ndarray) -> np.ndarray:
    return np.r_[offsets, couplings[np.triu_indices(len(offsets), 1)]]


def _unpack_pairwise(theta: np.ndarray, n_labels: int) -> tuple[np.ndarray, np.ndarray]:
    couplings = np.zeros((n_labels, n_labels))
    couplings[np.triu_indices(n_labels, 1)] = theta[n_labels:]
    return theta[:n_labels].copy(), couplings + couplings.T


def fit_pairwise_moments(
    features: np.ndarray, cooccurrence: np.ndarray, start: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Offsets c and couplings J of eq. (3) whose population moments equal ``cooccurrence`` exactly:

        (1/N) sum_n P(y_t = 1 | x_n) = C[t, t]   and   (1/N) sum_n P(y_s = 1, y_t = 1 | x_n) = C[s, t],

    with h_n = features[n] + c. This is maximum-likelihood moment matching in the exponential family (3): the
    minimiser of the convex mean_n log Z(F_n + c, J) - c·diag(C) - sum_{s<t} J_st C[s, t], found by Newton's
    method with the exact Hessian E_q[T Tᵀ] - mean_n E[T | x_n] E[T | x_n]ᵀ (T = sufficient statistics, q = mean
    joint), all by enumeration. With one all-zero feature row it is the image-free maximum-entropy pairwise model
    with the given marginals and co-occurrences (Jaynes 1957). The targets must be those of some distribution with
    every pair of labels both together and apart (else J is infinite).
    """
    features = np.atleast_2d(np.asarray(features, dtype=np.float64))
    cooccurrence = np.asarray(cooccurrence, dtype=np.float64)
    n_labels = features.shape[1]
    if cooccurrence.shape != (n_labels, n_labels) or not np.allclose(cooccurrence, cooccurrence.T):
        raise ValueError(f"cooccurrence must be a symmetric ({n_labels}, {n_labels}) matrix, got {cooccurrence.shape}")
    prevalence = np.diag(cooccurrence)
    if np.any(prevalence <= 0) or np.any(prevalence >= 1) or np.any(cooccurrence <= 0):
        raise ValueError("every prevalence must lie in (0, 1) and every co-occurrence be positive for a finite fit")
    first, second = np.triu_indices(n_labels, 1)
    target = np.r_[prevalence, cooccurrence[first, second]]
    statistics = _sufficient_statistics(n_labels)

    def objective(theta: np.ndarray):
        offsets, couplings = _unpack_pairwise(theta, n_labels)
        pairs, log_z, mean_joint = _Enumerator(couplings).pair_statistics(features + offsets)
        moments = np.concatenate([np.diagonal(pairs, axis1=1, axis2=2), pairs[:, first, second]], axis=1)
        with _one_blas_thread():
            hessian = statistics.T @ (statistics * mean_joint[:, None]) - moments.T @ moments / len(moments)
        return log_z.mean() - target @ theta, mean_joint @ statistics - target, hessian

    if start is None:
        start = (np.log(prevalence / (1 - prevalence)) - np.median(features, axis=0), np.zeros((n_labels, n_labels)))
    theta = _newton_minimise(objective, _pairwise_parameters(*start), "pairwise label model")
    return _unpack_pairwise(theta, n_labels)


def _scaled_moment_residuals(cooccurrence: np.ndarray):
    """Residual scaling: prevalence errors relative to the prevalence, pair errors in correlation units."""
    prevalence = np.diag(cooccurrence)
    first, second = np.triu_indices(len(prevalence), 1)
    sd = np.sqrt(prevalence * (1 - prevalence))
    scale = np.r_[prevalence, sd[first] * sd[second]]
    return np.r_[prevalence, cooccurrence[first, second]], scale, first, second


def fit_independent_posterior(features: np.ndarray, cooccurrence: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Offsets c and mixing M = I + W (W zero on the diagonal) of eq. (4), P(y | x) = prod_t σ(c_t + (M phi(x))_t),
    whose population moments (1/N) sum_n σ_t and (1/N) sum_n σ_s σ_t equal ``cooccurrence``.

    Labels are independent given the image, so their dependence comes only from the images: the drawn findings are
    correlated (the latent model) and the evidence for one finding shifts the others' log-odds (W), as it would in
    a Bayes posterior under correlated findings. The 105 moment equations in 196 unknowns are not convex: solved
    by Gauss-Newton with minimum-norm steps (the least change of (c, W) that zeroes the linearised residuals,
    ``numpy.linalg.lstsq``) from W = 0, halving a step until the residual norm falls; prevalence errors are
    measured relative to the prevalence and pair errors in correlation units. Features are centred for
    conditioning only (the shift is folded into c).
    """
    features = np.asarray(features, dtype=np.float64)
    n_labels, n = features.shape[1], len(features)
    target, scale, first, second = _scaled_moment_residuals(cooccurrence)
    mean = features.mean(axis=0)
    centred = features - mean
    off_diagonal = ~np.eye(n_labels, dtype=bool)

    def unpack(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        weights = np.zeros((n_labels, n_labels))
        weights[off_diagonal] = theta[n_labels:]
        return theta[:n_labels], weights

    def probabilities(theta: np.ndarray) -> np.ndarray:
        offsets, weights = unpack(theta)
        return expit(offsets + features + centred @ weights.T)

    def residuals(p: np.ndarray) -> np.ndarray:
        moments = np.r_[p.mean(axis=0), (p.T @ p / n)[first, second]]
        return (moments - target) / scale

    def jacobian(p: np.ndarray) -> np.ndarray:
        slope = p * (1 - p)
        d_offset = slope.T @ p / n  # mean σ'_u σ_t
        d_weight = np.stack([(slope[:, u, None] * p).T @ centred for u in range(n_labels)]) / n  # σ'_u σ_t phi_k
        eye = np.eye(n_labels)
        rows = [
            np.r_[eye[t] * slope[:, t].mean(), (eye[t][:, None] * (slope[:, t] @ centred / n))[off_diagonal]]
            for t in range(n_labels)
        ]
        for s, t in zip(first, second):  # the pair (s, t) depends on rows s and t of (c, W)
            grad_offset, grad_weight = np.zeros(n_labels), np.zeros((n_labels, n_labels))
            grad_offset[s], grad_offset[t] = d_offset[s, t], d_offset[t, s]
            grad_weight[s], grad_weight[t] = d_weight[s, t], d_weight[t, s]
            rows.append(np.r_[grad_offset, grad_weight[off_diagonal]])
        return np.array(rows) / scale[:, None]

    prevalence = np.diag(cooccurrence)
    theta = np.r_[np.log(prevalence / (1 - prevalence)) - np.median(features, axis=0), np.zeros(off_diagonal.sum())]
    with _one_blas_thread():
        p = probabilities(theta)
        error = residuals(p)
        for _ in range(100):
            if np.abs(error).max() < 1e-10:
                offsets, weights = unpack(theta)
                return offsets - weights @ mean, np.eye(n_labels) + weights
            step = np.linalg.lstsq(jacobian(p), error, rcond=None)[0]
            for _ in range(40):
                trial_p = probabilities(theta - step)
                trial_error = residuals(trial_p)
                if np.linalg.norm(trial_error) < np.linalg.norm(error):
                    break
                step = step / 2
            theta, p, error = theta - step, trial_p, trial_error
    raise RuntimeError(
        f"fitting the independent chest posterior did not converge: largest scaled moment error "
        f"{np.abs(error).max():.2e}"
    )


def chest_real_statistics() -> dict[str, np.ndarray]:
    """Real ChestX-ray14 label statistics the generator is fitted to (see ``helpers.data.label_stats``)."""
    stats = label_stats.load_label_stats()
    return {key: stats[key].copy() for key in ("prevalence", "cooccurrence", "correlation")}


@functools.lru_cache(maxsize=1)
def _chest_bank() -> tuple[PlacedTemplates, np.ndarray]:
    """The chest findings' template bank (eq. 1) and placed patterns: fixed, no fitting involved."""
    findings = _chest_findings()
    return _build_bank(
        [p[..., None] for p, *_ in findings], [s for _, s, _, _ in findings], np.array([beta for *_, beta in findings])
    )


def chest_fields(images, offsets, mixing) -> np.ndarray:
    """Fields h(x) = c + M phi(x) (N, 14) of stored uint8 chest images, eqs. (1), (3)-(4), from a set's ground truth
    (``offsets`` c, ``mixing`` M; e.g. ``bundle.ground_truth``) without refitting the generator. With the set's
    ``couplings`` J they give the exact joint P(y | x): ``multilabel_marginals(h, J)`` reproduces the stored
    posteriors. ``images``: (N, 28, 28) or (N, 1, 28, 28) uint8, numpy or torch."""
    images = np.asarray(images.numpy() if hasattr(images, "numpy") else images)
    if images.ndim == 4 and images.shape[1] == 1:
        images = images[:, 0]
    if images.ndim != 3 or images.shape[1:] != (IMAGE_SIZE, IMAGE_SIZE):
        raise ValueError(f"chest images must be (N, 28, 28) or (N, 1, 28, 28), got shape {images.shape}")
    offsets = np.asarray(offsets, dtype=np.float64).reshape(-1)
    mixing = np.asarray(mixing, dtype=np.float64)
    if offsets.shape != (14,) or mixing.shape != (14, 14):
        raise ValueError(f"offsets must be (14,) and mixing (14, 14), got {offsets.shape} and {mixing.shape}")
    return _chest_bank()[0].features(images) @ mixing.T + offsets


@functools.lru_cache(maxsize=len(CHEST_VARIANTS))
def _chest_model_and_reference(variant: str = "coupled") -> tuple[SyntheticChestModel, dict[str, np.ndarray]]:
    if variant not in CHEST_VARIANTS:
        raise ValueError(f"unknown chest variant {variant!r}; valid: {', '.join(CHEST_VARIANTS)}")
    findings = _chest_findings()
    bank, placed = _chest_bank()
    real = chest_real_statistics()
    latent_fields, latent_couplings = fit_pairwise_moments(np.zeros((1, 14)), real["cooccurrence"])
    identity, zeros = np.eye(14), np.zeros((14, 14))
    model = SyntheticChestModel(
        variant,
        bank,
        placed[..., 0],
        np.array([a for _, _, a, _ in findings]),
        zeros,
        np.zeros(14),
        identity,
        latent_fields,
        latent_couplings,
        _chest_anatomy(),
    )
    features = model.features(model.sample_images(_REFERENCE_SIZE, np.random.default_rng(_REFERENCE_SEED)))
    if variant == "coupled":
        offsets, couplings = fit_pairwise_moments(features, real["cooccurrence"])
        mixing = identity
    else:
        (offsets, mixing), couplings = fit_independent_posterior(features, real["cooccurrence"]), zeros
    model = dataclasses.replace(model, couplings=couplings, offsets=offsets, mixing=mixing)
    fields = model.fields_from_features(features)
    cooccurrence = multilabel_expected_cooccurrence(fields, couplings)
    reference = {
        "couplings": couplings.copy(),
        "offsets": offsets.copy(),
        "mixing": mixing.copy(),
        "latent_fields": latent_fields.copy(),
        "latent_couplings": latent_couplings.copy(),
        "label_cooccurrence": cooccurrence,
        "label_correlation": label_stats.correlation_from_moments(cooccurrence),
        "prevalence": np.diag(cooccurrence).copy(),
        "real_prevalence": real["prevalence"],
        "real_correlation": real["correlation"],
        "beta": bank.beta.copy(),
    }
    return model, reference


def chest_model(variant: str = "coupled") -> SyntheticChestModel:
    """The fitted ChestMNIST-like model of a variant (built once per process: seconds)."""
    return _chest_model_and_reference(variant)[0]


def chest_label_statistics(variant: str = "coupled") -> dict[str, np.ndarray]:
    """Real (ChestX-ray14) and synthetic population label statistics side by side, for plotting and checks.

    ``real_prevalence`` / ``synthetic_prevalence`` (14,), ``real_correlation`` / ``synthetic_correlation``
    (14, 14) Pearson (phi) correlations of the binary labels (helpers.data.label_stats eq. 1), ``real_cooccurrence`` /
    ``synthetic_cooccurrence`` E[y_s y_t]. Synthetic = averages of the exact posteriors over the fixed reference
    sample of 20,000 images (the population the generator was fitted on).
    """
    truth = _chest_model_and_reference(variant)[1]
    real = chest_real_statistics()
    return {
        "findings": list(CHEST_FINDINGS),
        "real_prevalence": real["prevalence"],
        "synthetic_prevalence": truth["prevalence"].copy(),
        "real_correlation": real["correlation"],
        "synthetic_correlation": truth["label_correlation"].copy(),
        "real_cooccurrence": real["cooccurrence"],
        "synthetic_cooccurrence": truth["label_cooccurrence"].copy(),
    }


def make_synthetic_chestmnist(
    n_train: int = 20000, n_val: int = 2500, n_test: int = 5000, seed: int = 0, variant: str = "coupled"
) -> SyntheticDataset:
    """ChestMNIST-like set: 28x28 grayscale chest-like images, 14 findings, exact marginals P(y_t = 1 | x).

    Population prevalences and pairwise label correlations are those of ChestX-ray14 (see the module docstring).
    ``variant="coupled"`` (data set ``synthetic_chestmnist``): labels coupled given the image, eq. (3), J ≠ 0;
    ``variant="independent"`` (``synthetic_chestmnist_independent``): independent given the image, eq. (4).
    Labels are sampled from the exact joint. ``ground_truth``: ``couplings`` J (zero for independent),
    ``offsets`` c and ``mixing`` M (fields h(x) = c + M phi(x): with J they give the exact joint of any image),
    ``label_cooccurrence`` E[y_s y_t] and ``label_correlation`` (population), ``prevalence``, ``real_prevalence``,
    ``real_correlation``, ``latent_fields``, ``latent_couplings``, ``beta``.
    """
    _check_sizes(n_train=n_train, n_val=n_val, n_test=n_test)
    model, reference = _chest_model_and_reference(variant)
    splits = []
    for n, rng in zip((n_train, n_val, n_test), _split_rngs(seed, stream=14)):
        images = model.sample_images(n, rng)
        fields = model.fields(images)
        posteriors = multilabel_marginals(fields, model.couplings)
        splits.append(SyntheticSplit(images, model.sample_labels(fields, rng), posteriors))
    name = "synthetic_chestmnist" if variant == "coupled" else f"synthetic_chestmnist_{variant}"
    return SyntheticDataset(
        name,
        MULTI_LABEL,
        "chestmnist",
        list(CHEST_FINDINGS),
        *splits,
        seed=seed,
        ground_truth={k: v.copy() for k, v in reference.items()},
    )


# ---------------------------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------------------------
def posteriors_path(path: str | os.PathLike) -> Path:
    """Where the posteriors file of a medmnist-format file lives: ``<stem>_posteriors.npz`` next to it."""
    path = Path(path)
    return path.with_name(path.stem + "_posteriors.npz")


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez_compressed with fixed zip timestamps (identical bytes for identical arrays), written atomically."""

    def write(file) -> None:
        with zipfile.ZipFile(file, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for key, value in arrays.items():
                buffer = io.BytesIO()
                np.lib.format.write_array(buffer, np.asarray(value), allow_pickle=False)
                info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, buffer.getvalue())

    write_atomically_with(path, write)


def write_medmnist_npz(path: str | os.PathLike, dataset: SyntheticDataset) -> tuple[Path, Path]:
    """Write ``dataset`` as a medmnist-format file at ``path`` plus its posteriors file; returns both paths.

    medmnist layout: ``{split}_images`` uint8 (N, 28, 28) or (N, 28, 28, 3); ``{split}_labels`` uint8 (N, 1)
    (multi-class) or (N, T) (multi-label). The posteriors file holds ``{split}_posteriors`` (float64),
    ``gt_<name>`` for each ground-truth array, ``generator_version`` and ``seed``.
    """
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"path must end in .npz (medmnist names files like {dataset.medmnist_flag}.npz), got {path}")
    images_and_labels, posteriors = {}, {}
    for split_name, split in dataset.splits().items():
        labels = split.labels.reshape(-1, 1) if dataset.task == MULTI_CLASS else split.labels
        images_and_labels[f"{split_name}_images"] = split.images.astype(np.uint8)
        images_and_labels[f"{split_name}_labels"] = labels.astype(np.uint8)
        posteriors[f"{split_name}_posteriors"] = split.posteriors.astype(np.float64)
    posteriors.update({f"gt_{key}": np.asarray(value) for key, value in dataset.ground_truth.items()})
    posteriors["generator_version"] = np.array(GENERATOR_VERSION)
    posteriors["seed"] = np.array(dataset.seed)
    _write_npz(path, images_and_labels)
    _write_npz(posteriors_path(path), posteriors)
    return path, posteriors_path(path)


GENERATORS: dict[str, Callable[..., SyntheticDataset]] = {
    "synthetic_dermamnist": make_synthetic_dermamnist,
    "synthetic_chestmnist": make_synthetic_chestmnist,
    "synthetic_chestmnist_independent": functools.partial(make_synthetic_chestmnist, variant="independent"),
}
#: the medmnist file format (and label names) each synthetic set is written in
MEDMNIST_FLAGS: dict[str, str] = {
    "synthetic_dermamnist": "dermamnist",
    "synthetic_chestmnist": "chestmnist",
    "synthetic_chestmnist_independent": "chestmnist",
}


# ---------------------------------------------------------------------------------------------------------------
# Pairwise posteriors of the chest sets (what LPR's population risk needs, notebook 08)
# ---------------------------------------------------------------------------------------------------------------
def multilabel_pair_posteriors(
    marginals: np.ndarray, couplings: np.ndarray, tolerance: float = 1e-12, max_iter: int = 50
) -> np.ndarray:
    """Exact P(y_s = 1, y_t = 1 | x) (N, T, T) (diagonal: the marginals) of images whose exact marginals
    P(y_t = 1 | x) (N, T) under eq. (3) with couplings J are known, e.g. ``bundle.true_posteriors["test"]`` and
    ``bundle.ground_truth["couplings"]`` (J = 0 for the independent set, where the result is η_s η_t off the
    diagonal).

    For a fixed J the marginals are a bijective function of the fields h (the mean map of an exponential family),
    so h is recovered by Newton's method on m(h) = η, whose Jacobian is the covariance Cov(y | h) (exact
    enumeration, ``_Enumerator.pair_statistics``; steps clipped to ±2 for the first iterations), and the pairwise
    posteriors are then enumerated. Raises if the marginals are not matched to ``tolerance`` after ``max_iter``.
    With the images at hand, :func:`chest_fields` and :func:`multilabel_pair_marginals` give the same directly.
    """
    marginals = np.atleast_2d(np.asarray(marginals, dtype=np.float64))
    if marginals.ndim != 2 or not np.all((marginals > 0) & (marginals < 1)):
        raise ValueError("marginals must be an (N, T) array of probabilities strictly inside (0, 1)")
    enumerator = _Enumerator(couplings)
    fields = np.log(marginals / (1 - marginals))
    diagonal = np.arange(marginals.shape[1])
    for _ in range(max_iter):
        pairs, _, _ = enumerator.pair_statistics(fields)
        current = pairs[:, diagonal, diagonal]
        residual = marginals - current
        if np.abs(residual).max() < tolerance:
            return pairs
        covariance = pairs - current[:, :, None] * current[:, None, :]
        covariance[:, diagonal, diagonal] = current * (1 - current)
        step = np.linalg.solve(covariance + 1e-12 * np.eye(len(diagonal)), residual[..., None])[..., 0]
        fields = fields + np.clip(step, -2.0, 2.0)
    raise RuntimeError(
        f"multilabel_pair_posteriors: marginals not matched after {max_iter} Newton steps "
        f"(largest error {np.abs(residual).max():.2e}); are the couplings those of these posteriors?"
    )

"""Exact inference in the pairwise binary label model of the coupled synthetic chest set, eq. (3) of
:mod:`helpers.data.synthetic_common`:

    P(y | h) ∝ exp( h·y + sum_{s<t} J_st y_s y_t ),   y in {0, 1}^T,

with fields h = h(x) per image and couplings J (symmetric, zero diagonal) shared by all images; J = 0 gives
labels independent given the image, eq. (4).

Marginals of (3) are computed by exact enumeration of all 2^T configurations, factorised as 2^(T/2) x 2^(T/2)
(first half A, second half B): Z = sum_a M_A[a] sum_b K[a, b] M_B[b] with K = exp(y_a^T J_AB y_b) shared by all
images, so one image costs one (2^7 x 2^7) matrix-vector product. Labels are sampled exactly from the joint
(first y_A from its marginal, then y_B | y_A). The same enumeration gives the moment-matching fit of the offsets
and couplings (:func:`fit_pairwise_moments`: Newton with the exact Hessian) and, from known marginals, the exact
pairwise posteriors (:func:`multilabel_pair_posteriors`).
"""

from __future__ import annotations

import numpy as np

from helpers.data.synthetic_common import CHUNK_ROWS, inverse_cdf, newton_minimise, one_blas_thread


def label_configurations(n: int) -> np.ndarray:
    """All 2^n binary vectors (2^n, n); bit t of the row index is label t."""
    return ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1).astype(np.float64)


class PairwiseEnumerator:
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
        self.y_a, self.y_b = label_configurations(self.n_a), label_configurations(n_labels - self.n_a)
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
        with one_blas_thread():
            for lo in range(0, len(fields), CHUNK_ROWS):
                m_a, m_b, through_a, through_b, z, log_z[lo : lo + CHUNK_ROWS] = self._halves(
                    fields[lo : lo + CHUNK_ROWS]
                )
                p_a = m_a * through_b / z[:, None]  # P(y_A = a | h)
                p_b = m_b * through_a / z[:, None]  # P(y_B = b | h)
                marginals[lo : lo + CHUNK_ROWS, :n_a] = p_a @ self.y_a
                marginals[lo : lo + CHUNK_ROWS, n_a:] = p_b @ self.y_b
                if second_moment:
                    moment[:n_a, :n_a] += self.y_a.T @ (self.y_a * p_a.sum(axis=0)[:, None])
                    moment[n_a:, n_a:] += self.y_b.T @ (self.y_b * p_b.sum(axis=0)[:, None])
                    moment[:n_a, n_a:] += self.y_a.T @ (self.cross * ((m_a / z[:, None]).T @ m_b)) @ self.y_b
        moment[n_a:, :n_a] = moment[:n_a, n_a:].T
        return marginals, log_z, moment / len(fields)

    def pair_statistics(self, fields: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-row pairwise marginals P(y_s = 1, y_t = 1 | h_n) (N, T, T) (diagonal: the marginals), log Z (N,)
        and the mean joint distribution (1/N) sum_n P(y | h_n) over all 2^T configurations (row i of
        ``label_configurations(T)``: bit t of i is label t)."""
        fields = self._check(fields)
        n_a, n_labels = self.n_a, fields.shape[1]
        pairs, log_z = np.empty((len(fields), n_labels, n_labels)), np.empty(len(fields))
        mean_joint = np.zeros(self.cross.shape)
        outer_a = (self.y_a[:, :, None] * self.y_a[:, None, :]).reshape(len(self.y_a), -1)
        outer_b = (self.y_b[:, :, None] * self.y_b[:, None, :]).reshape(len(self.y_b), -1)
        with one_blas_thread():
            for lo in range(0, len(fields), CHUNK_ROWS):
                rows = slice(lo, lo + CHUNK_ROWS)
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
        with one_blas_thread():
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
        with one_blas_thread():
            return self._sample(fields, uniforms, labels)

    def _sample(self, fields: np.ndarray, uniforms: np.ndarray, labels: np.ndarray) -> np.ndarray:
        for lo in range(0, len(fields), CHUNK_ROWS):
            m_a, m_b, _, through_b, _, _ = self._halves(fields[lo : lo + CHUNK_ROWS])
            p_a = m_a * through_b
            a = inverse_cdf(p_a / p_a.sum(axis=1, keepdims=True), uniforms[lo : lo + CHUNK_ROWS, 0])
            p_b = m_b * self.cross[a]
            b = inverse_cdf(p_b / p_b.sum(axis=1, keepdims=True), uniforms[lo : lo + CHUNK_ROWS, 1])
            labels[lo : lo + CHUNK_ROWS, : self.n_a] = self.y_a[a]
            labels[lo : lo + CHUNK_ROWS, self.n_a :] = self.y_b[b]
        return labels


def multilabel_marginals(fields: np.ndarray, couplings: np.ndarray) -> np.ndarray:
    """Exact P(y_t = 1) under P(y) ∝ exp(sum_t h_t y_t + sum_{s<t} J_st y_s y_t), one row of fields per image.

    fields: (N, T) h; couplings: (T, T) symmetric J with zero diagonal. Exact enumeration of all 2^T configurations
    (vectorised, factorised into two halves), T <= 24.
    """
    return PairwiseEnumerator(couplings).statistics(fields)[0]


def multilabel_log_partition(fields: np.ndarray, couplings: np.ndarray) -> np.ndarray:
    """log Z(h) = log sum_y exp(h·y + sum_{s<t} J_st y_s y_t) per row of fields (exact enumeration)."""
    return PairwiseEnumerator(couplings).statistics(fields)[1]


def multilabel_pair_marginals(fields: np.ndarray, couplings: np.ndarray) -> np.ndarray:
    """P(y_s = 1, y_t = 1 | h_n) (N, T, T) per image, exact (diagonal: the marginals P(y_t = 1 | h_n))."""
    return PairwiseEnumerator(couplings).pair_statistics(fields)[0]


def multilabel_subset_moments(fields: np.ndarray, couplings: np.ndarray, masks) -> np.ndarray:
    """P(y_t = 1 for every t in S | h_n) (N, len(masks)), exact, for label subsets S given as integer bitmasks
    (bit t = label t; the empty set 0 has probability 1). Any event "these labels present, those absent" follows by
    inclusion-exclusion (``helpers.metrics.joint_retrieval_map``)."""
    return PairwiseEnumerator(couplings).subset_moments(fields, masks)


def multilabel_expected_cooccurrence(fields: np.ndarray, couplings: np.ndarray) -> np.ndarray:
    """C[s, t] = (1/N) sum_n P(y_s = 1, y_t = 1 | h_n) (diagonal: mean marginals), exact."""
    return PairwiseEnumerator(couplings).statistics(fields, second_moment=True)[2]


# ---------------------------------------------------------------------------------------------------------------
# Fitting the offsets and couplings to population moments
# ---------------------------------------------------------------------------------------------------------------
def _sufficient_statistics(n_labels: int) -> np.ndarray:
    """(y_t, y_s y_t for s < t) for every configuration: (2^T, T + T(T-1)/2), rows as in ``label_configurations``."""
    configs = label_configurations(n_labels)
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
        pairs, log_z, mean_joint = PairwiseEnumerator(couplings).pair_statistics(features + offsets)
        moments = np.concatenate([np.diagonal(pairs, axis1=1, axis2=2), pairs[:, first, second]], axis=1)
        with one_blas_thread():
            hessian = statistics.T @ (statistics * mean_joint[:, None]) - moments.T @ moments / len(moments)
        return log_z.mean() - target @ theta, mean_joint @ statistics - target, hessian

    if start is None:
        start = (np.log(prevalence / (1 - prevalence)) - np.median(features, axis=0), np.zeros((n_labels, n_labels)))
    theta = newton_minimise(objective, _pairwise_parameters(*start), "pairwise label model")
    return _unpack_pairwise(theta, n_labels)


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
    enumeration, ``PairwiseEnumerator.pair_statistics``; steps clipped to ±2 for the first iterations), and the pairwise
    posteriors are then enumerated. Raises if the marginals are not matched to ``tolerance`` after ``max_iter``.
    With the images at hand, :func:`helpers.data.chest_fields` and :func:`multilabel_pair_marginals` give the same
    directly.
    """
    marginals = np.atleast_2d(np.asarray(marginals, dtype=np.float64))
    if marginals.ndim != 2 or not np.all((marginals > 0) & (marginals < 1)):
        raise ValueError("marginals must be an (N, T) array of probabilities strictly inside (0, 1)")
    enumerator = PairwiseEnumerator(couplings)
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

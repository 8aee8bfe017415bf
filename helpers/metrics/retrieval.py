"""Multi-label image retrieval with conjunctive label queries (Cheng & Vasconcelos, CVPR 2024, sec. 4, eqs. 22–23).

A query asks for images that have every label in P and none in N. Under label independence its posterior is
s(x) = Π_{j∈P} η_j(x) Π_{k∈N} (1 − η_j(x)) (eq. 22), estimated by plugging in the model's probabilities (eq. 23).
Database images are ranked by ŝ — computed in log space, Σ_P log η̂ + Σ_N log(1 − η̂), so long queries do not
underflow — and each query is scored by average precision (AP) against the ground truth (relevant ⇔ all of P
present and none of N). Section 5.3 uses every query with ``|P|`` ≥ 1 and ``|P|`` + ``|N|`` ≤ 5 and plots mAP against
the query length ``|P|`` + ``|N|`` (Fig. 3).

A query is a row of a signed matrix (Q, T) of int8: +1 for labels in P, −1 for labels in N, 0 otherwise.
Queries with no relevant database image have no AP; they are kept with AP = NaN, counted, and left out of mAP.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from helpers.metrics import bootstrapping

if TYPE_CHECKING:
    import scipy.sparse

__all__ = [
    "count_queries",
    "enumerate_queries",
    "sample_queries",
    "query_log_scores",
    "query_relevance",
    "average_precision",
    "RetrievalResult",
    "retrieval_map",
    "inclusion_exclusion",
    "joint_retrieval_map",
    "compare_per_query",
    "top_k",
    "hits_at_k",
    "mean_over_queries",
    "format_query",
]

_MAX_ENUMERATED = 2_000_000


def _check_lengths(n_labels: int, max_length: int) -> None:
    if isinstance(n_labels, bool) or not isinstance(n_labels, int) or n_labels < 1:
        raise ValueError(f"n_labels must be a positive integer, got {n_labels!r}")
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"max_length must be a positive integer, got {max_length!r}")


def count_queries(n_labels: int, max_length: int = 5) -> dict[int, int]:
    """Number of queries of each length L = ``|P|`` + ``|N|`` ≤ max_length with ``|P|`` ≥ 1: C(T, L)·(2^L − 1)."""
    _check_lengths(n_labels, max_length)
    return {length: math.comb(n_labels, length) * (2**length - 1) for length in range(1, min(max_length, n_labels) + 1)}


def _queries_of_length(n_labels: int, length: int) -> np.ndarray:
    """Every query of one length, (C(T, L)·(2^L − 1), T) int8, ordered by label subset then sign pattern."""
    subsets = np.array(list(itertools.combinations(range(n_labels), length)), dtype=np.int64)
    # sign patterns over the L chosen labels with at least one +1: bit set -> positive
    codes = np.arange(1, 2**length)
    signs = np.where((codes[:, None] >> np.arange(length)[None, :]) & 1, 1, -1).astype(np.int8)
    queries = np.zeros((len(subsets), len(signs), n_labels), dtype=np.int8)
    rows = np.arange(len(subsets))[:, None, None]
    patterns = np.arange(len(signs))[None, :, None]
    queries[rows, patterns, subsets[:, None, :]] = signs[None, :, :]
    return queries.reshape(-1, n_labels)


def enumerate_queries(n_labels: int, max_length: int = 5) -> torch.Tensor:
    """All queries with ``|P|`` ≥ 1 and ``|P|`` + ``|N|`` ≤ max_length, shortest first: (Q, T) int8 in {−1, 0, +1}."""
    total = sum(count_queries(n_labels, max_length).values())
    if total > _MAX_ENUMERATED:
        raise ValueError(
            f"{total} queries for T = {n_labels}, max_length = {max_length}: too many to enumerate; "
            "use sample_queries(..., max_queries=...)"
        )
    return torch.from_numpy(
        np.concatenate([_queries_of_length(n_labels, length) for length in range(1, min(max_length, n_labels) + 1)])
    )


def _allocate(counts: dict[int, int], budget: int) -> dict[int, int]:
    """Split ``budget`` queries as evenly as possible over lengths (water-filling: short lengths, which have few
    queries, take all of theirs and pass the rest on), so each point of the Fig. 3 curve has similar support."""
    allocation = {length: 0 for length in counts}
    remaining, open_lengths = budget, sorted(counts, key=lambda length: counts[length])
    while open_lengths and remaining > 0:
        share = remaining // len(open_lengths)
        smallest = open_lengths[0]
        if share > 0 and counts[smallest] <= share:
            allocation[smallest] = counts[smallest]
            remaining -= counts[smallest]
            open_lengths.pop(0)
        else:
            extra = remaining - share * len(open_lengths)
            for i, length in enumerate(open_lengths):
                allocation[length] = share + (1 if i < extra else 0)
            remaining = 0
    return allocation


def _sample_length(n_labels: int, length: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` distinct queries of one length, uniformly at random (random label subset × random sign pattern
    with at least one +1 is uniform over the C(T, L)·(2^L − 1) queries; duplicates are redrawn)."""
    found = np.zeros((0, n_labels), dtype=np.int8)
    while len(found) < size:
        draw = 2 * (size - len(found)) + 16
        subsets = np.argsort(rng.random((draw, n_labels)), axis=1)[:, :length]
        codes = rng.integers(1, 2**length, size=draw)
        signs = np.where((codes[:, None] >> np.arange(length)[None, :]) & 1, 1, -1).astype(np.int8)
        batch = np.zeros((draw, n_labels), dtype=np.int8)
        np.put_along_axis(batch, subsets, signs, axis=1)
        found = np.unique(np.concatenate([found, batch]), axis=0)
    return found[rng.permutation(len(found))[:size]]


def sample_queries(n_labels: int, max_length: int = 5, max_queries: int | None = None, seed: int = 0) -> torch.Tensor:
    """The query set of sec. 5.3: every query if there are at most ``max_queries`` (or it is None), otherwise
    ``max_queries`` of them, spread as evenly as possible over the lengths 1..max_length and drawn uniformly
    without replacement within each length (seeded). Shortest first, (Q, T) int8."""
    counts = count_queries(n_labels, max_length)
    total = sum(counts.values())
    if max_queries is not None and (
        isinstance(max_queries, bool) or not isinstance(max_queries, int) or max_queries < 1
    ):
        raise ValueError(f"max_queries must be a positive integer or None, got {max_queries!r}")
    if max_queries is None or max_queries >= total:
        return enumerate_queries(n_labels, max_length)
    rng = np.random.default_rng(seed)
    parts = []
    for length, size in sorted(_allocate(counts, max_queries).items()):
        if size == 0:
            continue
        if size == counts[length]:
            parts.append(_queries_of_length(n_labels, length))
        else:
            parts.append(_sample_length(n_labels, length, size, rng))
    return torch.from_numpy(np.concatenate(parts))


def _check_queries(queries: torch.Tensor, n_labels: int) -> torch.Tensor:
    queries = torch.as_tensor(queries)
    if queries.ndim != 2 or queries.shape[1] != n_labels:
        raise ValueError(f"queries must be (Q, T={n_labels}) signed label rows, got shape {tuple(queries.shape)}")
    if queries.numel() and not bool(((queries == -1) | (queries == 0) | (queries == 1)).all()):
        raise ValueError("queries must hold +1 (label wanted), -1 (label unwanted) or 0 (not in the query)")
    if queries.numel() and not bool((queries == 1).any(dim=1).all()):
        raise ValueError("every query needs at least one positive label (|P| >= 1)")
    return queries


def _as_matrix(values, name: str) -> torch.Tensor:
    """A tensor or numpy array as an (N, T) tensor, or a ValueError saying what shape was given."""
    if not isinstance(values, torch.Tensor):
        values = torch.as_tensor(np.asarray(values))
    if values.ndim != 2:
        raise ValueError(
            f"{name} must be (N, T) (images x labels), got shape {tuple(values.shape)}; for a single "
            "label pass values[:, None]"
        )
    return values


def _check_database(labels: torch.Tensor) -> None:
    """A ValueError for a database of no images: every query would have no relevant image and the mAP over none
    is NaN (with a numpy division warning), which a results table would carry on silently."""
    if labels.shape[0] == 0:
        raise ValueError(
            f"the retrieval database has no images (labels of shape {tuple(labels.shape)}); mAP ranks "
            "images, so it needs at least one: check the split passed as probs and labels"
        )


def query_log_scores(probs: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """log ŝ of eq. (23) for every (query, image): Σ_{P} log η̂ + Σ_{N} log(1 − η̂), shape (Q, N), float64.

    ``probs`` (N, T) are the model's probabilities (``loss.predict_proba``). A probability of exactly 0 (or 1
    for a negative label) gives log ŝ = −∞: those images tie at the bottom of the ranking.
    """
    probs = _as_matrix(probs, "probs")
    return _log_scores(_probability_terms(probs), _check_queries(queries, probs.shape[1]).to(probs.device))


def _probability_terms(probs: torch.Tensor) -> torch.Tensor:
    """Checked probs -> the (2T + 1, N) float64 table every query block reads: rows t = log η̂_t, rows T + t =
    log(1 − η̂_t), and a last row of zeros (padding). −inf where η̂ = 0 (wanted) or 1 (unwanted): sums keep it."""
    if probs.ndim != 2:
        raise ValueError(f"probs must be (N, T), got shape {tuple(probs.shape)}")
    if probs.numel() and not bool(((probs >= 0) & (probs <= 1)).all()):
        raise ValueError("probs must be probabilities in [0, 1] (use loss.predict_proba(logits))")
    p = probs.to(torch.float64).T
    return torch.cat([torch.log(p), torch.log1p(-p), torch.zeros_like(p[:1])])


def _term_index(queries: torch.Tensor) -> torch.Tensor:
    """(Q, L) rows of the stacked tables: t for a wanted label t, T + t for an unwanted one, 2T as padding."""
    n_labels = queries.shape[1]
    row = torch.where(
        queries == 1,
        torch.arange(n_labels, device=queries.device),
        torch.where(
            queries == -1,
            n_labels + torch.arange(n_labels, device=queries.device),
            torch.full_like(queries, 2 * n_labels, dtype=torch.long),
        ),
    )
    width = max(1, int((queries != 0).sum(dim=1).max())) if queries.numel() else 1
    return torch.sort(row, dim=1).values[:, :width]  # the padding rows (2T) sort last


def _log_scores(terms: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Σ_P log η̂ + Σ_N log(1 − η̂) for every (query, image): a sum of at most L gathered rows (queries are short),
    cheaper than a (Q × T) @ (T × N) product."""
    index = _term_index(queries)
    scores = terms[index[:, 0]].clone()
    for k in range(1, index.shape[1]):
        scores += terms[index[:, k]]
    return scores


def query_relevance(labels: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Ground truth (Q, N) bool: image n is relevant to a query iff it has every label in P and none in N."""
    labels = _as_matrix(labels, "labels")
    return _relevance(_label_matrix(labels), _check_queries(queries, labels.shape[1]).to(labels.device))


def _label_matrix(labels: torch.Tensor) -> torch.Tensor:
    """Checked 0/1 labels -> the (2T + 1, N) bool table of query conditions: rows t = "label t present", rows
    T + t = "label t absent", a last row of True (padding)."""
    if labels.ndim != 2:
        raise ValueError(f"labels must be (N, T), got shape {tuple(labels.shape)}")
    if labels.numel() and not bool(((labels == 0) | (labels == 1)).all()):
        raise ValueError("labels must be 0 or 1")
    present = (labels == 1).T
    return torch.cat([present, ~present, torch.ones_like(present[:1])])


def _relevance(conditions: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    index = _term_index(queries)
    relevant = conditions[index[:, 0]].clone()
    for k in range(1, index.shape[1]):
        relevant &= conditions[index[:, k]]
    return relevant


def average_precision(scores: torch.Tensor, relevant: torch.Tensor) -> torch.Tensor:
    """AP of each row of ``scores`` (Q, N) against ``relevant`` (Q, N) bool; NaN where a row has no relevant item.

    Same definition as scikit-learn's ``average_precision_score``: AP = Σ_k (R_k − R_{k−1}) P_k over the
    distinct score thresholds, so tied scores enter together (no optimistic ordering inside a tie). Equivalently
    AP = (1/R) Σ_{relevant k} #{relevant with score ≥ s_k} / #{items with score ≥ s_k}, which is how it is computed:
    one value sort per row and binary searches for the relevant items only (no argsort, no gathers over all N).
    """
    if scores.shape != relevant.shape or scores.ndim != 2:
        raise ValueError(
            f"scores and relevant must be matching (Q, N) tensors, got {tuple(scores.shape)} and "
            f"{tuple(relevant.shape)}"
        )
    if bool(torch.isnan(scores).any()):
        raise ValueError("scores contain NaN")
    values = scores.detach().cpu().to(torch.float64).numpy()
    hits = relevant.detach().cpu().numpy().astype(bool)
    n_rows, n_items = values.shape
    n_relevant = hits.sum(axis=1)
    width = max(1, int(n_relevant.max(initial=0)))
    rows, cols = np.nonzero(hits)
    position = np.arange(len(rows)) - np.repeat(np.cumsum(n_relevant) - n_relevant, n_relevant)
    relevant_scores = np.full((n_rows, width), -np.inf)  # padding: -inf, masked out below
    relevant_scores[rows, position] = values[rows, cols]
    is_entry = np.zeros((n_rows, width), dtype=bool)
    is_entry[rows, position] = True
    sorted_all = torch.from_numpy(np.sort(values, axis=1))
    sorted_relevant = torch.from_numpy(np.sort(relevant_scores, axis=1))
    queried = torch.from_numpy(relevant_scores)
    below_all = torch.searchsorted(sorted_all, queried, side="left").numpy()
    # the (width − R) padding values are −inf and sort first: they are below every finite score, and no score is
    # below −inf, hence the clamp (a relevant item scored −inf has nothing below it)
    padding = (width - n_relevant)[:, None]
    below_relevant = np.maximum(torch.searchsorted(sorted_relevant, queried, side="left").numpy() - padding, 0)
    precision = (n_relevant[:, None] - below_relevant) / (n_items - below_all)
    with np.errstate(invalid="ignore", divide="ignore"):
        ap = np.where(is_entry, precision, 0.0).sum(axis=1) / n_relevant
    ap[n_relevant == 0] = math.nan
    return torch.from_numpy(ap).to(scores.device)


@dataclass
class RetrievalResult:
    """Per-query retrieval results; AP is NaN for queries with no relevant image (left out of every mAP)."""

    queries: torch.Tensor  # (Q, T) int8 signed rows
    average_precision: torch.Tensor  # (Q,) float64
    n_relevant: torch.Tensor  # (Q,) int64: relevant database images per query

    @property
    def lengths(self) -> torch.Tensor:
        """``|P|`` + ``|N|`` of each query."""
        return (self.queries != 0).sum(dim=1)

    @property
    def evaluated(self) -> torch.Tensor:
        return ~torch.isnan(self.average_precision)

    def mean_average_precision(self) -> float:
        """mAP over all evaluated queries."""
        return float(self.average_precision[self.evaluated].mean()) if bool(self.evaluated.any()) else math.nan

    def map_by_length(self) -> dict[int, float]:
        """Length ``|P|`` + ``|N|`` -> mAP over the evaluated queries of that length (the paper's Fig. 3)."""
        return {row["length"]: row["mAP"] for row in self.summary()}

    def summary(self) -> list[dict]:
        """One row per query length: length, n_queries, n_evaluated (≥ 1 relevant image), n_skipped, mAP."""
        rows = []
        lengths = self.lengths
        for length in sorted(set(lengths.tolist())):
            at = lengths == length
            evaluated = at & self.evaluated
            n_eval = int(evaluated.sum())
            rows.append(
                {
                    "length": length,
                    "n_queries": int(at.sum()),
                    "n_evaluated": n_eval,
                    "n_skipped": int(at.sum()) - n_eval,
                    "mAP": float(self.average_precision[evaluated].mean()) if n_eval else math.nan,
                }
            )
        return rows


def retrieval_map(
    probs: torch.Tensor,
    labels: torch.Tensor,
    max_length: int = 5,
    max_queries: int | None = 2000,
    seed: int = 0,
    queries: torch.Tensor | None = None,
    chunk_elements: int = 2**22,
) -> RetrievalResult:
    """Score, rank and evaluate every query (sec. 5.3): AP per query against the ground truth, vectorised over
    the database and processed in chunks of queries (``chunk_elements`` bounds the (queries × images) block).

    ``queries`` defaults to ``sample_queries(T, max_length, max_queries, seed)``; pass the same query set to
    compare models. ``max_queries=None`` uses every query (79 912 for T = 14 with max_length 5).
    """
    probs, labels = _as_matrix(probs, "probs"), _as_matrix(labels, "labels")
    if probs.shape != labels.shape:
        raise ValueError(f"probs and labels must both be (N, T), got {tuple(probs.shape)} and {tuple(labels.shape)}")
    _check_database(labels)
    if queries is None:
        queries = sample_queries(probs.shape[1], max_length=max_length, max_queries=max_queries, seed=seed)
    queries = _check_queries(queries, probs.shape[1])
    terms = _probability_terms(probs)  # checked and converted once for every chunk
    return _evaluate(lambda _, block: _log_scores(terms, block.to(probs.device)), labels, queries, chunk_elements)


def _evaluate(score_block, labels: torch.Tensor, queries: torch.Tensor, chunk_elements: int) -> RetrievalResult:
    """AP of every query in chunks of queries; ``score_block(start, block) -> (q, N)`` scores the queries
    ``start .. start + q`` (``block`` = those rows of ``queries``)."""
    y = _label_matrix(labels)
    per_chunk = max(1, chunk_elements // max(1, labels.shape[0]))
    aps, counts = [], []
    for start in range(0, queries.shape[0], per_chunk):
        block = queries[start : start + per_chunk]
        relevant = _relevance(y, block.to(labels.device))
        aps.append(average_precision(score_block(start, block), relevant).cpu())
        counts.append(relevant.sum(dim=1).cpu())
    return RetrievalResult(queries=queries.cpu(), average_precision=torch.cat(aps), n_relevant=torch.cat(counts))


def inclusion_exclusion(queries: torch.Tensor) -> tuple[np.ndarray, scipy.sparse.csr_matrix]:
    """The exact score of a query, P(y_P = 1, y_N = 0 | x), as a signed sum of "all present" probabilities:

        P(y_P = 1, y_N = 0 | x) = Σ_{M ⊆ N} (−1)^{``|M|``} μ_{P ∪ M}(x),   μ_S(x) = P(y_t = 1 ∀ t ∈ S | x).

    Returns the label subsets needed (bitmasks, bit t = label t, shape (U,)) and the sparse (Q, U) matrix of signs,
    so that the scores of all queries are ``coefficients @ μ.T``. A query with ``|N|`` unwanted labels needs 2^|N| terms
    (at most 16 for the queries of sec. 5.3)."""
    from scipy import sparse

    queries = torch.as_tensor(queries)
    if queries.ndim != 2 or queries.shape[1] > 62:
        raise ValueError(f"queries must be (Q, T ≤ 62) signed label rows, got shape {tuple(queries.shape)}")
    queries = _check_queries(queries, queries.shape[1]).numpy()
    bits = np.int64(1) << np.arange(queries.shape[1], dtype=np.int64)
    rows, masks, signs = [], [], []
    for row, query in enumerate(queries):
        positive = int(bits[query == 1].sum())
        negative = bits[query == -1]
        for size in range(len(negative) + 1):
            for chosen in itertools.combinations(negative.tolist(), size):
                rows.append(row)
                masks.append(positive | sum(chosen))
                signs.append(-1.0 if size % 2 else 1.0)
    unique, column = np.unique(np.array(masks, dtype=np.int64), return_inverse=True)
    coefficients = sparse.csr_matrix((signs, (rows, column)), shape=(len(queries), len(unique)))
    return unique, coefficients


def joint_retrieval_map(
    subset_probabilities, labels: torch.Tensor, queries: torch.Tensor, chunk_elements: int = 2**22
) -> RetrievalResult:
    """Retrieval ranked by the exact joint query probability P(y_P = 1, y_N = 0 | x) — the ceiling of sec. 5.3 when
    labels are dependent given x — instead of the product of marginals of eq. (22).

    ``subset_probabilities(masks) -> (N, U)``: P(y_t = 1 ∀ t ∈ S | x) for each label-subset bitmask (e.g.
    ``functools.partial(helpers.data.multilabel_subset_moments, fields, couplings)``); it is called once, with
    the subsets :func:`inclusion_exclusion` needs. The signed sums are exact up to float64 rounding (about 1e-16
    times the largest term), far below the query probabilities that decide a ranking.
    """
    labels = _as_matrix(labels, "labels")
    _check_database(labels)
    queries = _check_queries(queries, labels.shape[1])
    masks, coefficients = inclusion_exclusion(queries)
    moments = np.asarray(subset_probabilities(masks), dtype=np.float64)
    if moments.shape != (labels.shape[0], len(masks)):
        raise ValueError(
            f"subset_probabilities returned shape {moments.shape}, expected ({labels.shape[0]}, "
            f"{len(masks)}): one row per database image, one column per subset"
        )
    moments_t = np.ascontiguousarray(moments.T)

    def score_block(start: int, block: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(np.asarray(coefficients[start : start + len(block)] @ moments_t))

    return _evaluate(score_block, labels, queries, chunk_elements)


def top_k(probs: torch.Tensor, query: torch.Tensor, k: int = 5) -> torch.Tensor:
    """Indices of the k database images with the highest ŝ (eq. 23) for one query row (T,)."""
    scores = query_log_scores(probs, torch.as_tensor(query).reshape(1, -1))[0]
    return torch.topk(scores, k=min(k, scores.numel())).indices


def hits_at_k(scores: torch.Tensor, relevant: torch.Tensor, k: int = 6) -> torch.Tensor:
    """Number of relevant items among the k highest scores of each row: ``scores`` (Q, N) (e.g.
    :func:`query_log_scores`, or an exact joint score), ``relevant`` (Q, N) bool (:func:`query_relevance`); (Q,) int64.

    The top k of a row are its k highest scores, ties broken by item index (a stable sort), so a tie at the k-th
    place counts the earlier items. The SPA paper's Fig. 4 shows such a top list for one query; averaged over many
    queries it is precision at k times k.
    """
    if scores.ndim != 2 or scores.shape != relevant.shape:
        raise ValueError(
            f"scores and relevant must be matching (Q, N) tensors, got {tuple(scores.shape)} and "
            f"{tuple(relevant.shape)}"
        )
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= scores.shape[1]:
        raise ValueError(f"k must be an integer in [1, {scores.shape[1]}] (the number of items), got {k!r}")
    if bool(torch.isnan(scores).any()):
        raise ValueError("scores contain NaN")
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :k]
    return torch.gather(relevant.to(torch.int64), 1, order.to(relevant.device)).sum(dim=1)


def mean_over_queries(values, n: int = 1000, seed: int = 0, level: float = 0.95) -> dict:
    """Mean of a per-query value (Q,) with its percentile bootstrap interval over the queries
    (:func:`helpers.metrics.bootstrapping.bootstrap` of the mean): ``{"mean", "low", "high", "n_queries"}``. As in
    :func:`compare_per_query`, the interval reads the queries as an independent sample; queries sharing labels are
    correlated, which makes it too narrow."""
    values = torch.as_tensor(values, dtype=torch.float64).reshape(-1)
    if values.numel() == 0 or bool(torch.isnan(values).any()):
        raise ValueError("values must be a non-empty (Q,) array without NaN")
    result = bootstrapping.bootstrap(lambda v, _: float(v.mean()), values, values, n=n, seed=seed, level=level)
    return {"mean": result.estimate, "low": result.low, "high": result.high, "n_queries": len(values)}


def format_query(query: torch.Tensor, class_names: Sequence[str]) -> str:
    """Human-readable query, e.g. '+effusion −mass': wanted labels with +, unwanted with −."""
    query = torch.as_tensor(query).reshape(-1)
    if query.numel() != len(class_names):
        raise ValueError(f"query has {query.numel()} entries but {len(class_names)} class names were given")
    wanted = [f"+{name}" for name, s in zip(class_names, query.tolist()) if s == 1]
    unwanted = [f"\u2212{name}" for name, s in zip(class_names, query.tolist()) if s == -1]
    return " ".join(wanted + unwanted)


def compare_per_query(
    ap_a, ap_b, lengths, n: int = 1000, seed: int = 0, level: float = 0.95, tie_tolerance: float = 1e-12
) -> dict:
    """Paired comparison of two models' retrieval over the same queries, by query length and over all.

    ``ap_a`` (S_a, Q) and ``ap_b`` (S_b, Q): per-query AP of each training seed (``RetrievalResult
    .average_precision``), averaged over seeds first; ``lengths`` (Q,) the query lengths. Per length (and "all"):
    the mean AP difference a − b, its percentile interval from ``n`` bootstrap resamples of the queries (drawn
    within each length, so "all" keeps the length mix), and the shares of queries where a is higher, tied
    (``|Δ|`` ≤ ``tie_tolerance``) or lower. Queries with no relevant image (NaN AP) are left out.

    What the interval covers: the spread of the per-query differences, read as if the queries of a length were an
    independent sample of all queries of that length. It leaves out the variation between training seeds (they
    are averaged first) and between test sets (the database images are fixed), and it ignores that queries sharing
    labels are correlated (which makes it too narrow). Where every query of a length is evaluated (lengths 1 and 2
    for 14 labels) nothing was sampled: the interval then only describes how much the differences vary across
    queries.
    """
    a = torch.as_tensor(ap_a, dtype=torch.float64).reshape(-1, torch.as_tensor(ap_a).shape[-1]).mean(0)
    b = torch.as_tensor(ap_b, dtype=torch.float64).reshape(-1, torch.as_tensor(ap_b).shape[-1]).mean(0)
    lengths = torch.as_tensor(lengths)
    if a.shape != b.shape or a.shape != lengths.shape:
        raise ValueError(
            f"ap_a, ap_b and lengths must describe the same queries, got {tuple(a.shape)}, "
            f"{tuple(b.shape)} and {tuple(lengths.shape)}"
        )
    if n < 2 or not 0 < level < 1:
        raise ValueError(f"need n >= 2 resamples and 0 < level < 1, got n={n}, level={level}")
    valid = ~(torch.isnan(a) | torch.isnan(b))
    difference, lengths = (a - b)[valid], lengths[valid]
    generator = torch.Generator().manual_seed(seed)
    groups = {int(length): torch.nonzero(lengths == length).squeeze(1) for length in torch.unique(lengths)}
    resampled = {
        length: difference[index][torch.randint(len(index), (n, len(index)), generator=generator)]
        for length, index in groups.items()
    }
    tails = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)

    def row(values: torch.Tensor, replicates: torch.Tensor) -> dict:
        low, high = torch.quantile(replicates, tails).tolist()
        return {
            "n_queries": int(values.numel()),
            "estimate": float(values.mean()),
            "low": low,
            "high": high,
            "higher": float((values > tie_tolerance).double().mean()),
            "tied": float((values.abs() <= tie_tolerance).double().mean()),
            "lower": float((values < -tie_tolerance).double().mean()),
        }

    out = {length: row(difference[groups[length]], resampled[length].mean(1)) for length in sorted(groups)}
    out["all"] = row(difference, torch.cat([resampled[length] for length in sorted(groups)], dim=1).mean(1))
    return out

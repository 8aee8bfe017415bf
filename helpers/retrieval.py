"""Multi-label image retrieval with conjunctive label queries (Cheng & Vasconcelos, CVPR 2024, sec. 4, eqs. 22–23).

A query asks for images that have every label in P and none in N. Under label independence its posterior is
s(x) = Π_{j∈P} η_j(x) Π_{k∈N} (1 − η_j(x)) (eq. 22), estimated by plugging in the model's probabilities (eq. 23).
Database images are ranked by ŝ — computed in log space, Σ_P log η̂ + Σ_N log(1 − η̂), so long queries do not
underflow — and each query is scored by average precision (AP) against the ground truth (relevant ⇔ all of P
present and none of N). Section 5.3 uses every query with |P| ≥ 1 and |P| + |N| ≤ 5 and plots mAP against the
query length |P| + |N| (Fig. 3).

A query is a row of a signed matrix (Q, T) of int8: +1 for labels in P, −1 for labels in N, 0 otherwise.
Queries with no relevant database image have no AP; they are kept with AP = NaN, counted, and left out of mAP.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

__all__ = [
    "count_queries",
    "enumerate_queries",
    "sample_queries",
    "query_log_scores",
    "query_relevance",
    "average_precision",
    "RetrievalResult",
    "retrieval_map",
    "top_k",
    "format_query",
]

_MAX_ENUMERATED = 2_000_000


def _check_lengths(n_labels: int, max_length: int) -> None:
    if isinstance(n_labels, bool) or not isinstance(n_labels, int) or n_labels < 1:
        raise ValueError(f"n_labels must be a positive integer, got {n_labels!r}")
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"max_length must be a positive integer, got {max_length!r}")


def count_queries(n_labels: int, max_length: int = 5) -> dict[int, int]:
    """Number of queries of each length L = |P| + |N| ≤ max_length with |P| ≥ 1: C(T, L)·(2^L − 1)."""
    _check_lengths(n_labels, max_length)
    return {length: math.comb(n_labels, length) * (2 ** length - 1)
            for length in range(1, min(max_length, n_labels) + 1)}


def _queries_of_length(n_labels: int, length: int) -> np.ndarray:
    """Every query of one length, (C(T, L)·(2^L − 1), T) int8, ordered by label subset then sign pattern."""
    subsets = np.array(list(itertools.combinations(range(n_labels), length)), dtype=np.int64)
    # sign patterns over the L chosen labels with at least one +1: bit set -> positive
    codes = np.arange(1, 2 ** length)
    signs = np.where((codes[:, None] >> np.arange(length)[None, :]) & 1, 1, -1).astype(np.int8)
    queries = np.zeros((len(subsets), len(signs), n_labels), dtype=np.int8)
    rows = np.arange(len(subsets))[:, None, None]
    patterns = np.arange(len(signs))[None, :, None]
    queries[rows, patterns, subsets[:, None, :]] = signs[None, :, :]
    return queries.reshape(-1, n_labels)


def enumerate_queries(n_labels: int, max_length: int = 5) -> torch.Tensor:
    """All queries with |P| ≥ 1 and |P| + |N| ≤ max_length, shortest first: (Q, T) int8 in {−1, 0, +1}."""
    total = sum(count_queries(n_labels, max_length).values())
    if total > _MAX_ENUMERATED:
        raise ValueError(f"{total} queries for T = {n_labels}, max_length = {max_length}: too many to enumerate; "
                         "use sample_queries(..., max_queries=...)")
    return torch.from_numpy(np.concatenate([_queries_of_length(n_labels, length)
                                            for length in range(1, min(max_length, n_labels) + 1)]))


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
        codes = rng.integers(1, 2 ** length, size=draw)
        signs = np.where((codes[:, None] >> np.arange(length)[None, :]) & 1, 1, -1).astype(np.int8)
        batch = np.zeros((draw, n_labels), dtype=np.int8)
        np.put_along_axis(batch, subsets, signs, axis=1)
        found = np.unique(np.concatenate([found, batch]), axis=0)
    return found[rng.permutation(len(found))[:size]]


def sample_queries(n_labels: int, max_length: int = 5, max_queries: int | None = None,
                   seed: int = 0) -> torch.Tensor:
    """The query set of sec. 5.3: every query if there are at most ``max_queries`` (or it is None), otherwise
    ``max_queries`` of them, spread as evenly as possible over the lengths 1..max_length and drawn uniformly
    without replacement within each length (seeded). Shortest first, (Q, T) int8."""
    counts = count_queries(n_labels, max_length)
    total = sum(counts.values())
    if max_queries is not None and (isinstance(max_queries, bool) or not isinstance(max_queries, int)
                                    or max_queries < 1):
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
        raise ValueError(f"{name} must be (N, T) (images x labels), got shape {tuple(values.shape)}; for a single "
                         "label pass values[:, None]")
    return values


def query_log_scores(probs: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """log ŝ of eq. (23) for every (query, image): Σ_{P} log η̂ + Σ_{N} log(1 − η̂), shape (Q, N), float64.

    ``probs`` (N, T) are the model's probabilities (``loss.predict_proba``). A probability of exactly 0 (or 1
    for a negative label) gives log ŝ = −∞: those images tie at the bottom of the ranking.
    """
    probs = _as_matrix(probs, "probs")
    return _log_scores(_probability_terms(probs), _check_queries(queries, probs.shape[1]).to(probs.device))


def _probability_terms(probs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Checked probs -> (N, T) float64 log η̂, log(1 − η̂), 1[η̂ = 0], 1[η̂ = 1]: what every query block uses.

    −inf terms (p = 0 wanted, p = 1 unwanted) are counted separately: 0·(−inf) would be NaN in a matmul."""
    if probs.ndim != 2:
        raise ValueError(f"probs must be (N, T), got shape {tuple(probs.shape)}")
    if probs.numel() and not bool(((probs >= 0) & (probs <= 1)).all()):
        raise ValueError("probs must be probabilities in [0, 1] (use loss.predict_proba(logits))")
    p = probs.to(torch.float64)
    log_p = torch.where(p > 0, torch.log(p), torch.zeros_like(p))
    log_1mp = torch.where(p < 1, torch.log1p(-p), torch.zeros_like(p))
    return log_p, log_1mp, (p == 0).to(torch.float64), (p == 1).to(torch.float64)


def _log_scores(terms: tuple[torch.Tensor, ...], queries: torch.Tensor) -> torch.Tensor:
    log_p, log_1mp, is_zero, is_one = terms
    positive = (queries == 1).to(torch.float64)
    negative = (queries == -1).to(torch.float64)
    finite = positive @ log_p.T + negative @ log_1mp.T
    n_impossible = positive @ is_zero.T + negative @ is_one.T
    return torch.where(n_impossible > 0, torch.full_like(finite, -math.inf), finite)


def query_relevance(labels: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Ground truth (Q, N) bool: image n is relevant to a query iff it has every label in P and none in N."""
    labels = _as_matrix(labels, "labels")
    return _relevance(_label_matrix(labels), _check_queries(queries, labels.shape[1]).to(labels.device))


def _label_matrix(labels: torch.Tensor) -> torch.Tensor:
    """Checked 0/1 labels as an (N, T) float64 matrix."""
    if labels.ndim != 2:
        raise ValueError(f"labels must be (N, T), got shape {tuple(labels.shape)}")
    if labels.numel() and not bool(((labels == 0) | (labels == 1)).all()):
        raise ValueError("labels must be 0 or 1")
    return labels.to(torch.float64)


def _relevance(y: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    positive = (queries == 1).to(torch.float64)
    negative = (queries == -1).to(torch.float64)
    has_all = (positive @ y.T) == positive.sum(dim=1, keepdim=True)
    has_none = (negative @ y.T) == 0
    return has_all & has_none


def average_precision(scores: torch.Tensor, relevant: torch.Tensor) -> torch.Tensor:
    """AP of each row of ``scores`` (Q, N) against ``relevant`` (Q, N) bool; NaN where a row has no relevant item.

    Same definition as scikit-learn's ``average_precision_score``: AP = Σ_k (R_k − R_{k−1}) P_k over the
    distinct score thresholds, so tied scores enter together (no optimistic ordering inside a tie).
    """
    if scores.shape != relevant.shape or scores.ndim != 2:
        raise ValueError(f"scores and relevant must be matching (Q, N) tensors, got {tuple(scores.shape)} and "
                         f"{tuple(relevant.shape)}")
    if bool(torch.isnan(scores).any()):
        raise ValueError("scores contain NaN")
    order = torch.argsort(scores, dim=1, descending=True, stable=True)
    sorted_scores = torch.gather(scores, 1, order)
    hits = torch.gather(relevant.to(torch.float64), 1, order)
    true_positives = hits.cumsum(dim=1)
    n_items = scores.shape[1]
    rank = torch.arange(1, n_items + 1, dtype=torch.float64, device=scores.device)
    # the last item of each group of tied scores is a threshold
    threshold = torch.ones_like(hits, dtype=torch.bool)
    threshold[:, :-1] = sorted_scores[:, 1:] != sorted_scores[:, :-1]
    tp_at_threshold = torch.where(threshold, true_positives, torch.zeros_like(true_positives))
    previous = torch.cummax(torch.nn.functional.pad(tp_at_threshold[:, :-1], (1, 0)), dim=1).values
    precision = true_positives / rank
    n_relevant = hits.sum(dim=1)
    ap = (threshold * precision * (true_positives - previous)).sum(dim=1) / n_relevant
    return torch.where(n_relevant > 0, ap, torch.full_like(ap, math.nan))


@dataclass
class RetrievalResult:
    """Per-query retrieval results; AP is NaN for queries with no relevant image (left out of every mAP)."""

    queries: torch.Tensor            # (Q, T) int8 signed rows
    average_precision: torch.Tensor  # (Q,) float64
    n_relevant: torch.Tensor         # (Q,) int64: relevant database images per query

    @property
    def lengths(self) -> torch.Tensor:
        """|P| + |N| of each query."""
        return (self.queries != 0).sum(dim=1)

    @property
    def evaluated(self) -> torch.Tensor:
        return ~torch.isnan(self.average_precision)

    def mean_average_precision(self) -> float:
        """mAP over all evaluated queries."""
        return float(self.average_precision[self.evaluated].mean()) if bool(self.evaluated.any()) else math.nan

    def map_by_length(self) -> dict[int, float]:
        """Length |P| + |N| -> mAP over the evaluated queries of that length (the paper's Fig. 3)."""
        return {row["length"]: row["mAP"] for row in self.summary()}

    def summary(self) -> list[dict]:
        """One row per query length: length, n_queries, n_evaluated (≥ 1 relevant image), n_skipped, mAP."""
        rows = []
        lengths = self.lengths
        for length in sorted(set(lengths.tolist())):
            at = lengths == length
            evaluated = at & self.evaluated
            n_eval = int(evaluated.sum())
            rows.append({"length": length, "n_queries": int(at.sum()), "n_evaluated": n_eval,
                         "n_skipped": int(at.sum()) - n_eval,
                         "mAP": float(self.average_precision[evaluated].mean()) if n_eval else math.nan})
        return rows


def retrieval_map(probs: torch.Tensor, labels: torch.Tensor, max_length: int = 5, max_queries: int | None = 2000,
                  seed: int = 0, queries: torch.Tensor | None = None,
                  chunk_elements: int = 2 ** 22) -> RetrievalResult:
    """Score, rank and evaluate every query (sec. 5.3): AP per query against the ground truth, vectorised over
    the database and processed in chunks of queries (``chunk_elements`` bounds the (queries × images) block).

    ``queries`` defaults to ``sample_queries(T, max_length, max_queries, seed)``; pass the same query set to
    compare models. ``max_queries=None`` uses every query (79 912 for T = 14 with max_length 5).
    """
    probs, labels = _as_matrix(probs, "probs"), _as_matrix(labels, "labels")
    if probs.shape != labels.shape:
        raise ValueError(f"probs and labels must both be (N, T), got {tuple(probs.shape)} and {tuple(labels.shape)}")
    if queries is None:
        queries = sample_queries(probs.shape[1], max_length=max_length, max_queries=max_queries, seed=seed)
    queries = _check_queries(queries, probs.shape[1])
    terms, y = _probability_terms(probs), _label_matrix(labels)  # checked and converted once for every chunk
    per_chunk = max(1, chunk_elements // max(1, probs.shape[0]))
    aps, counts = [], []
    for start in range(0, queries.shape[0], per_chunk):
        block = queries[start:start + per_chunk]
        relevant = _relevance(y, block.to(labels.device))
        aps.append(average_precision(_log_scores(terms, block.to(probs.device)), relevant).cpu())
        counts.append(relevant.sum(dim=1).cpu())
    return RetrievalResult(queries=queries.cpu(), average_precision=torch.cat(aps), n_relevant=torch.cat(counts))


def top_k(probs: torch.Tensor, query: torch.Tensor, k: int = 5) -> torch.Tensor:
    """Indices of the k database images with the highest ŝ (eq. 23) for one query row (T,)."""
    scores = query_log_scores(probs, torch.as_tensor(query).reshape(1, -1))[0]
    return torch.topk(scores, k=min(k, scores.numel())).indices


def format_query(query: torch.Tensor, class_names: Sequence[str]) -> str:
    """Human-readable query, e.g. '+effusion −mass': wanted labels with +, unwanted with −."""
    query = torch.as_tensor(query).reshape(-1)
    if query.numel() != len(class_names):
        raise ValueError(f"query has {query.numel()} entries but {len(class_names)} class names were given")
    wanted = [f"+{name}" for name, s in zip(class_names, query.tolist()) if s == 1]
    unwanted = [f"\u2212{name}" for name, s in zip(class_names, query.tolist()) if s == -1]
    return " ".join(wanted + unwanted)

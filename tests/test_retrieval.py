"""Tests for helpers.metrics.retrieval: query enumeration, eq. (23) scores, AP against scikit-learn."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score

from helpers.metrics import (
    average_precision,
    count_queries,
    enumerate_queries,
    format_query,
    hits_at_k,
    inclusion_exclusion,
    joint_retrieval_map,
    mean_over_queries,
    query_log_scores,
    query_relevance,
    retrieval_map,
    sample_queries,
    top_k,
)


def brute_force_queries(n_labels, max_length):
    """Every signed row in {−1, 0, 1}^T with at least one +1 and at most max_length non-zeros."""
    return {
        row
        for row in itertools.product((-1, 0, 1), repeat=n_labels)
        if 1 in row and sum(v != 0 for v in row) <= max_length
    }


@pytest.mark.parametrize("n_labels,max_length", [(1, 5), (3, 2), (4, 5), (6, 3), (7, 5)])
def test_enumeration_matches_brute_force(n_labels, max_length):
    expected = brute_force_queries(n_labels, max_length)
    queries = enumerate_queries(n_labels, max_length)
    rows = [tuple(r) for r in queries.tolist()]
    assert len(rows) == len(set(rows)) == len(expected)
    assert set(rows) == expected
    assert sum(count_queries(n_labels, max_length).values()) == len(expected)
    lengths = (queries != 0).sum(1)
    assert torch.all(lengths[1:] >= lengths[:-1])  # shortest first


def test_query_counts_for_fourteen_labels():
    counts = count_queries(14, 5)
    assert counts == {L: math.comb(14, L) * (2**L - 1) for L in range(1, 6)}
    assert sum(counts.values()) == 79912


def test_sampling_is_seeded_distinct_valid_and_spread_over_lengths():
    queries = sample_queries(14, max_length=5, max_queries=600, seed=3)
    assert queries.shape == (600, 14)
    assert len({tuple(r) for r in queries.tolist()}) == 600
    assert torch.all((queries == 1).any(1))
    lengths = (queries != 0).sum(1)
    per_length = torch.bincount(lengths, minlength=6)[1:].tolist()
    assert per_length[0] == 14  # length 1 has only 14 queries: all of them
    assert max(per_length[1:]) - min(per_length[1:]) <= 1 and sum(per_length) == 600
    assert torch.equal(queries, sample_queries(14, max_length=5, max_queries=600, seed=3))
    assert not torch.equal(queries, sample_queries(14, max_length=5, max_queries=600, seed=4))
    assert sample_queries(4, max_queries=10_000).shape[0] == 65  # everything when the budget covers it
    big = sample_queries(80, max_length=5, max_queries=500)
    assert big.shape == (500, 80) and len({tuple(r) for r in big.tolist()}) == 500


def test_scores_are_eq23_in_log_space():
    g = torch.Generator().manual_seed(0)
    probs = torch.rand(6, 4, generator=g, dtype=torch.float64)
    probs[0, 1] = 0.0
    probs[1, 2] = 1.0
    queries = enumerate_queries(4, 3)
    scores = query_log_scores(probs, queries)
    for q in range(queries.shape[0]):
        for n in range(probs.shape[0]):
            s = 1.0
            for t in range(4):
                if queries[q, t] == 1:
                    s *= probs[n, t].item()
                elif queries[q, t] == -1:
                    s *= 1.0 - probs[n, t].item()
            expected = math.log(s) if s > 0 else -math.inf
            assert scores[q, n].item() == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_relevance_is_all_of_p_and_none_of_n():
    g = torch.Generator().manual_seed(1)
    labels = (torch.rand(30, 5, generator=g) < 0.4).float()
    queries = enumerate_queries(5, 3)
    relevant = query_relevance(labels, queries)
    for q in range(queries.shape[0]):
        for n in range(labels.shape[0]):
            wanted = all(labels[n, t] == 1 for t in range(5) if queries[q, t] == 1)
            unwanted = all(labels[n, t] == 0 for t in range(5) if queries[q, t] == -1)
            assert bool(relevant[q, n]) == (wanted and unwanted)


def test_average_precision_matches_sklearn_including_ties():
    rng = np.random.default_rng(0)
    scores = np.round(rng.normal(size=(12, 40)), 1)  # rounding creates tied scores
    relevant = rng.random((12, 40)) < 0.3
    relevant[:, 0] = True
    ours = average_precision(torch.from_numpy(scores), torch.from_numpy(relevant))
    for q in range(12):
        assert ours[q].item() == pytest.approx(average_precision_score(relevant[q], scores[q]), abs=1e-12)


def test_average_precision_is_nan_without_relevant_items():
    ap = average_precision(torch.tensor([[0.3, 0.1]]), torch.tensor([[False, False]]))
    assert math.isnan(ap.item())


def test_perfect_model_has_map_one_and_skipped_queries_are_counted():
    g = torch.Generator().manual_seed(2)
    labels = (torch.rand(200, 6, generator=g) < 0.3).float()
    labels[:, 5] = 0.0  # label 5 never present: queries wanting it have no relevant image
    perfect = retrieval_map(labels, labels, max_length=3, max_queries=None)
    assert perfect.mean_average_precision() == pytest.approx(1.0)
    wants_absent = perfect.queries[:, 5] == 1
    assert torch.all(torch.isnan(perfect.average_precision[wants_absent]))
    assert torch.all(perfect.n_relevant[wants_absent] == 0)
    summary = perfect.summary()
    assert sum(row["n_skipped"] for row in summary) == int(wants_absent.sum())
    assert sum(row["n_queries"] for row in summary) == perfect.queries.shape[0]
    assert set(perfect.map_by_length()) == {1, 2, 3}
    # a calibrated-but-uncertain model ranks the same way and is still perfect; a random one is not
    soft = retrieval_map(0.1 + 0.8 * labels, labels, max_length=3, max_queries=None)
    assert soft.mean_average_precision() == pytest.approx(1.0)
    noise = retrieval_map(torch.rand(200, 6, generator=g), labels, max_length=3, max_queries=None)
    assert noise.mean_average_precision() < 0.7


def test_retrieval_map_matches_per_query_sklearn_on_a_small_database():
    g = torch.Generator().manual_seed(5)
    labels = (torch.rand(60, 4, generator=g) < 0.4).float()
    probs = (0.5 * labels + 0.5 * torch.rand(60, 4, generator=g)).clamp(0, 1)
    result = retrieval_map(probs, labels, max_length=2, max_queries=None, chunk_elements=100)
    scores = query_log_scores(probs, result.queries).numpy()
    relevant = query_relevance(labels, result.queries).numpy()
    for q in range(result.queries.shape[0]):
        if relevant[q].any():
            expected = average_precision_score(relevant[q], scores[q])
            assert result.average_precision[q].item() == pytest.approx(expected, abs=1e-12)


def test_top_k_and_format_query():
    probs = torch.tensor([[0.9, 0.1], [0.2, 0.3], [0.8, 0.9], [0.95, 0.05]])
    query = torch.tensor([1, -1])
    assert top_k(probs, query, k=2).tolist() == [3, 0]
    assert format_query(query, ["effusion", "mass"]) == "+effusion \u2212mass"


def test_bad_queries_raise():
    with pytest.raises(ValueError, match="positive"):
        query_log_scores(torch.rand(3, 2), torch.tensor([[-1, 0]]))
    with pytest.raises(ValueError, match="\\+1"):
        query_log_scores(torch.rand(3, 2), torch.tensor([[2, 0]]))
    with pytest.raises(ValueError, match="probabilities"):
        query_log_scores(torch.randn(3, 2) * 5, torch.tensor([[1, 0]]))
    with pytest.raises(ValueError, match="too many"):
        enumerate_queries(80, 5)


def test_retrieval_map_accepts_numpy_and_rejects_1d_input_clearly():
    """Issue 10 #14: numpy input raised AttributeError, 1-D input IndexError."""
    generator = torch.Generator().manual_seed(3)
    probs = torch.rand(30, 4, generator=generator, dtype=torch.float64)
    labels = (torch.rand(30, 4, generator=generator) < 0.4).double()
    expected = retrieval_map(probs, labels, max_queries=None)
    from_numpy = retrieval_map(probs.numpy(), labels.numpy(), max_queries=None)
    assert torch.equal(from_numpy.average_precision.isnan(), expected.average_precision.isnan())
    assert torch.allclose(from_numpy.average_precision.nan_to_num(), expected.average_precision.nan_to_num())
    assert torch.equal(query_log_scores(probs.numpy(), expected.queries), query_log_scores(probs, expected.queries))
    with pytest.raises(ValueError, match=r"\(N, T\)"):
        retrieval_map(probs[:, 0], labels[:, 0])
    with pytest.raises(ValueError, match=r"\(N, T\)"):
        query_relevance(labels[:, 0], expected.queries)


def test_average_precision_with_minus_infinity_scores_matches_sklearn():
    """A probability of 0 gives log ŝ = −∞: such items tie at the bottom, relevant or not."""
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(20, 30))
    scores[rng.random((20, 30)) < 0.3] = -np.inf
    relevant = rng.random((20, 30)) < 0.3
    relevant[:, 0] = True
    ours = average_precision(torch.from_numpy(scores), torch.from_numpy(relevant))
    finite = np.where(np.isinf(scores), -1e300, scores)  # the same order, which sklearn accepts
    for q in range(20):
        assert ours[q].item() == pytest.approx(average_precision_score(relevant[q], finite[q]), abs=1e-12)


def _random_pairwise_model(n_labels, n_images, seed):
    rng = np.random.default_rng(seed)
    couplings = np.triu(rng.normal(0, 1.5, size=(n_labels, n_labels)), 1)
    return rng.normal(-1.0, 1.5, size=(n_images, n_labels)), couplings + couplings.T


def _brute_force_joint(fields, couplings):
    """P(y | h) over every configuration by an explicit loop (not helpers.data.pairwise_label_model's factorisation)."""
    configs = np.array(list(itertools.product((0.0, 1.0), repeat=fields.shape[1])))
    energy = fields @ configs.T + 0.5 * np.einsum("ci,ij,cj->c", configs, couplings, configs)[None, :]
    joint = np.exp(energy - energy.max(axis=1, keepdims=True))
    return configs, joint / joint.sum(axis=1, keepdims=True)


def test_inclusion_exclusion_gives_the_exact_query_probability_of_a_dependent_joint():
    from helpers.data import multilabel_subset_moments

    fields, couplings = _random_pairwise_model(6, 25, seed=4)
    configs, joint = _brute_force_joint(fields, couplings)
    queries = enumerate_queries(6, 4)
    masks, coefficients = inclusion_exclusion(queries)
    scores = coefficients @ multilabel_subset_moments(fields, couplings, masks).T
    matches = np.all(
        (configs[None, :, :] == 1) == (queries.numpy()[:, None, :] == 1), axis=2, where=queries.numpy()[:, None, :] != 0
    )
    expected = matches.astype(float) @ joint.T
    np.testing.assert_allclose(scores, expected, atol=1e-13)
    # ... and it is not the product of the marginals (eq. 22), which assumes independence given x
    product = torch.exp(query_log_scores(torch.from_numpy(joint @ configs), queries)).numpy()
    assert np.abs(product - expected).max() > 0.05


def test_joint_retrieval_map_ranks_by_the_exact_joint_and_equals_eq22_without_couplings():
    from functools import partial

    from helpers.data import multilabel_subset_moments

    fields, couplings = _random_pairwise_model(5, 80, seed=6)
    configs, joint = _brute_force_joint(fields, couplings)
    labels = torch.from_numpy(configs[[np.random.default_rng(7).choice(32, p=p) for p in joint]])
    queries = enumerate_queries(5, 3)
    result = joint_retrieval_map(
        partial(multilabel_subset_moments, fields, couplings), labels, queries, chunk_elements=500
    )
    relevant = query_relevance(labels, queries).numpy()
    matches = np.all(
        (configs[None] == 1) == (queries.numpy()[:, None, :] == 1), axis=2, where=queries.numpy()[:, None, :] != 0
    )
    exact_scores = matches.astype(float) @ joint.T
    for q in range(len(queries)):
        if relevant[q].any():
            expected = average_precision_score(relevant[q], exact_scores[q])
            assert result.average_precision[q].item() == pytest.approx(expected, abs=1e-9)
    independent = joint_retrieval_map(partial(multilabel_subset_moments, fields, np.zeros((5, 5))), labels, queries)
    marginals = torch.sigmoid(torch.from_numpy(fields))
    torch.testing.assert_close(
        independent.average_precision,
        retrieval_map(marginals, labels, queries=queries).average_precision,
        equal_nan=True,
        rtol=0,
        atol=1e-9,
    )


def test_compare_per_query_averages_seeds_counts_ties_and_brackets_the_difference():
    from helpers.metrics import compare_per_query

    g = torch.Generator().manual_seed(0)
    lengths = torch.tensor([1] * 50 + [2] * 150)
    base = torch.rand(200, generator=g, dtype=torch.float64)
    a = torch.stack([base + 0.1, base + 0.3])  # seed mean: base + 0.2
    b = base.clone()[None]
    b[0, :20] = base[:20] + 0.2  # 20 queries of length 1 tie
    b[0, 199] = math.nan  # no relevant image: left out
    result = compare_per_query(a, b, lengths, n=200)
    assert result[1]["tied"] == pytest.approx(20 / 50) and result[1]["higher"] == pytest.approx(30 / 50)
    assert result[2]["n_queries"] == 149 and result[2]["estimate"] == pytest.approx(0.2)
    expected_all = (30 * 0.2 + 149 * 0.2) / 199
    assert result["all"]["estimate"] == pytest.approx(expected_all)
    assert result["all"]["low"] <= expected_all <= result["all"]["high"]
    assert result[1]["higher"] + result[1]["tied"] + result[1]["lower"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same queries"):
        compare_per_query(a, b[:, :10], lengths)


def test_retrieval_map_refuses_an_empty_database():
    """Issue 18 #15: retrieval_map with no images returned a NaN mAP and a numpy "invalid value" warning; an empty
    database now raises, for eq. (22) and for the exact-joint ranking alike, before any query is scored."""
    import warnings

    queries = torch.tensor([[1, 0, -1, 0]], dtype=torch.int8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy warning on the way
        with pytest.raises(ValueError, match=r"no images.*\(0, 4\).*at least one"):
            retrieval_map(torch.empty(0, 4), torch.empty(0, 4))
        with pytest.raises(ValueError, match="no images"):
            retrieval_map(np.empty((0, 4)), np.empty((0, 4)), queries=queries)
        with pytest.raises(ValueError, match="no images"):
            joint_retrieval_map(lambda masks: np.empty((0, len(masks))), torch.empty(0, 4), queries)


def test_hits_at_k_counts_the_relevant_items_of_the_k_highest_scores():
    scores = torch.tensor([[0.9, 0.1, 0.8, 0.7], [0.2, 0.4, 0.3, 0.1]], dtype=torch.float64)
    relevant = torch.tensor([[True, True, False, True], [True, False, False, True]])
    # row 0: top 2 = items 0, 2 -> one relevant; row 1: top 2 = items 1, 2 -> none
    assert hits_at_k(scores, relevant, k=2).tolist() == [1, 0]
    assert hits_at_k(scores, relevant, k=4).tolist() == [3, 2]  # k = N counts every relevant item
    # a tie at the k-th place counts the earlier item (stable order)
    tied = torch.tensor([[0.5, 0.5, 0.5]], dtype=torch.float64)
    assert hits_at_k(tied, torch.tensor([[False, True, True]]), k=1).tolist() == [0]
    # agrees with top_k on a model's eq. (23) scores
    g = torch.Generator().manual_seed(1)
    probs = torch.rand(30, 4, generator=g, dtype=torch.float64)
    labels = (torch.rand(30, 4, generator=g) < 0.5).to(torch.int64)
    query = torch.tensor([[1, -1, 0, 1]])
    relevance = query_relevance(labels, query)
    expected = int(relevance[0][top_k(probs, query[0], k=6)].sum())
    assert hits_at_k(query_log_scores(probs, query), relevance, k=6).tolist() == [expected]


def test_hits_at_k_and_mean_over_queries_reject_bad_input():
    scores = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="k must be"):
        hits_at_k(scores, torch.zeros(2, 3, dtype=torch.bool), k=4)
    with pytest.raises(ValueError, match="matching"):
        hits_at_k(scores, torch.zeros(2, 4, dtype=torch.bool), k=1)
    with pytest.raises(ValueError, match="NaN"):
        hits_at_k(torch.full((1, 3), math.nan), torch.zeros(1, 3, dtype=torch.bool), k=1)
    with pytest.raises(ValueError, match="non-empty"):
        mean_over_queries([])
    with pytest.raises(ValueError, match="resamples"):
        mean_over_queries([1.0, 2.0], n=1)


def test_mean_over_queries_is_the_mean_with_a_seeded_percentile_interval():
    values = torch.arange(100, dtype=torch.float64) / 10
    result = mean_over_queries(values, n=2000, seed=3)
    assert result["mean"] == pytest.approx(4.95)
    assert result["n_queries"] == 100
    # the bootstrap sd of a mean is sd / sqrt(n): the 95 % interval is about ± 1.96 of it
    half_width = 1.96 * float(values.std(unbiased=False)) / 10
    assert result["low"] == pytest.approx(4.95 - half_width, abs=0.1)
    assert result["high"] == pytest.approx(4.95 + half_width, abs=0.1)
    assert mean_over_queries(values, n=2000, seed=3) == result  # deterministic
    constant = mean_over_queries(torch.full((7,), 2.0))
    assert constant["low"] == constant["high"] == constant["mean"] == 2.0

"""Metrics against hand computations, pytrec_eval and the paper-003 regression values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluators.bootstrap import bootstrap_ci
from evaluators.inclination import (
    complete_at_k,
    max_at_r,
    max_at_r_norm,
    max_at_r_norm_from_mean,
    max_at_r_norm_per_query,
)
from evaluators.retrieval import ranks_of, run_from_search, search
from lira.metrics import ir_metrics, sts_correlations


def test_max_at_r_and_complete_at_k_by_hand():
    ranking = ["d3", "d1", "d7", "d2", "d9"]
    assert max_at_r(ranking, ["d1", "d2"]) == 4
    assert max_at_r(ranking, ["d3"]) == 1
    with pytest.raises(ValueError, match="not in the ranking"):
        max_at_r(ranking, ["d1", "zz"])
    assert complete_at_k([1, 4, 12, 10], 10) == 75.0


def test_max_at_r_norm_paper_003_regression():
    # |D| = 2380, |R| = 2, from-mean form (paper 003 tables): 650.95 -> 18.31, 106.42 -> 43.88.
    assert max_at_r_norm(650.95, 2380, 2) == pytest.approx(18.31, abs=0.005)
    assert max_at_r_norm(106.42, 2380, 2) == pytest.approx(43.88, abs=0.005)
    assert max_at_r_norm(2, 2380, 2) == pytest.approx(100.0)
    assert max_at_r_norm(2380, 2380, 2) == pytest.approx(0.0)


def test_per_query_and_from_mean_forms_differ_as_jensen_says():
    ranks = [2, 2, 2000]
    per_query = max_at_r_norm_per_query(ranks, 2380, 2)
    from_mean = max_at_r_norm_from_mean(ranks, 2380, 2)
    assert per_query == pytest.approx((100 + 100 + max_at_r_norm(2000, 2380, 2)) / 3)
    assert per_query > from_mean  # log is concave


def test_search_chunked_equals_brute_force():
    rng = np.random.default_rng(0)
    q, d = rng.normal(size=(7, 16)), rng.normal(size=(503, 16))
    s1, i1 = search(q, d, k=10, chunk_size=64)
    s2, i2 = search(q, d, k=10, chunk_size=100000)
    brute = np.argsort(-(q @ d.T), axis=1)[:, :10]
    assert (i1 == brute).all() and (i2 == brute).all()
    np.testing.assert_allclose(s1, s2, rtol=1e-5)
    ranks = ranks_of(
        q, d, [[int(brute[0, 3])], [int(brute[1, 0]), int(brute[1, 9])]], chunk_size=50
    )
    assert ranks[0] == [4] and ranks[1] == [1, 10]


def test_ir_metrics_by_hand_and_pytrec():
    # q1: relevant doc at rank 2; q2: relevant at rank 1 and 12 (cut at 10 for recall@10).
    docs = [f"d{i}" for i in range(15)]
    run = {
        "q1": {d: 15.0 - i for i, d in enumerate(docs)},
        "q2": {d: 15.0 - i for i, d in enumerate(docs)},
    }
    qrels = {"q1": {"d1": 1}, "q2": {"d0": 1, "d11": 1}}
    m = ir_metrics(run, qrels, ["ndcg@10", "mrr@10", "recall@10", "ndcg@1"])
    assert m["ndcg@10"]["q1"] == pytest.approx(100 / math.log2(3), abs=1e-3)
    assert m["mrr@10"]["q1"] == pytest.approx(50.0)
    assert m["recall@10"]["q2"] == pytest.approx(50.0)
    idcg = 1 + 1 / math.log2(3)
    assert m["ndcg@10"]["q2"] == pytest.approx(100 / idcg, abs=1e-3)
    assert m["ndcg@1"]["q1"] == 0.0 and m["ndcg@1"]["q2"] == 100.0
    with pytest.raises(ValueError, match="unknown metrics"):
        ir_metrics(run, qrels, ["map"])


def test_run_from_search_keeps_scores():
    run = run_from_search(["a"], ["x", "y"], np.array([[0.9, 0.1]]), np.array([[1, 0]]))
    assert run == {"a": {"y": pytest.approx(0.9), "x": pytest.approx(0.1)}}


def test_bootstrap_contains_mean_and_narrows():
    rng = np.random.default_rng(1)
    small, big = rng.normal(5, 1, 30), rng.normal(5, 1, 3000)
    m1, lo1, hi1 = bootstrap_ci(small, 500, seed=0)
    m2, lo2, hi2 = bootstrap_ci(big, 500, seed=0)
    assert lo1 <= m1 <= hi1 and lo2 <= m2 <= hi2
    assert (hi2 - lo2) < (hi1 - lo1) / 5
    assert bootstrap_ci([3.0], 100) == (3.0, 3.0, 3.0)


def test_sts_correlations_match_hand_values():
    r = sts_correlations([1, 2, 3, 4], [2, 4, 6, 9])
    assert r["spearman"] == pytest.approx(100.0)
    assert 95 < r["pearson"] < 100
    with pytest.raises(ValueError):
        sts_correlations([1], [1])

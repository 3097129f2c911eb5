"""The one implementation of each evaluation metric (lira.metrics) against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lira.metrics import ndcg_at_k, ndcg_of_scores, sts_correlations


def test_ndcg_at_k_of_one_query_by_hand():
    # relevant documents at ranks 1 and 3 of 5: DCG = 1 + 1/log2(4); ideal = 1 + 1/log2(3)
    run = {"q": {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6, "e": 0.5}}
    qrels = {"q": {"a": 1, "c": 1}}
    idcg = 1 + 1 / math.log2(3)
    assert ndcg_at_k(run, qrels, 10)["q"] == pytest.approx((1 + 0.5) / idcg, abs=1e-12)
    assert ndcg_at_k(run, qrels, 2)["q"] == pytest.approx(1 / idcg, abs=1e-12)  # c is cut off
    assert ndcg_at_k(run, qrels, 1)["q"] == 1.0
    # graded gains (trec_eval's): gain = the judgement
    graded = ndcg_at_k(run, {"q": {"a": 1, "c": 2}}, 10)["q"]
    assert graded == pytest.approx((1 + 2 / 2) / (2 + 1 / math.log2(3)), abs=1e-12)
    with pytest.raises(ValueError, match="k >= 1"):
        ndcg_at_k(run, qrels, 0)


def test_ndcg_of_scores_by_hand():
    s = torch.tensor([[0.1, 0.9, 0.5], [0.9, 0.1, 0.5], [0.3, 0.2, 0.1]])
    y = torch.tensor([[1, 0, 0], [1, 0, 0], [0, 0, 0]])
    # row 0: the relevant candidate ranks 3rd -> 1/log2(4); row 1: 1st; row 2: none relevant -> 0
    np.testing.assert_allclose(ndcg_of_scores(s, y), [0.5, 1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(ndcg_of_scores(s.numpy(), y.numpy(), k=2), [0.0, 1.0, 0.0])
    with pytest.raises(ValueError, match=r"\[Q, C\]"):
        ndcg_of_scores(s[0], y[0])


def test_sts_correlations_scale():
    r = sts_correlations([1, 2, 3, 4], [2, 4, 6, 9], scale=1.0)
    assert r["spearman"] == pytest.approx(1.0)
    assert sts_correlations([1, 2, 3, 4], [2, 4, 6, 9])["pearson"] == pytest.approx(
        100 * r["pearson"]
    )

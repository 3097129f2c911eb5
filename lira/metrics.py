"""The evaluation metrics, one implementation each: the evaluators and LaSR's validation call these.

nDCG@k, MRR@10 and Recall@k come from ``pytrec_eval`` (trec_eval's own implementations; MRR@10
is trec_eval's ``recip_rank`` on the run cut at 10). Pearson and Spearman come from scipy: the
same numbers as mteb's STS tasks (``cosine_pearson`` / ``cosine_spearman``, x100), which
tests/evaluators/test_mteb.py checks on a tiny STS22 copy run through mteb. The differentiable
training surrogates (soft nDCG, soft Spearman, the torch Pearson of the correlation loss) stay
with their losses in :mod:`lasr.losses`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytrec_eval
import torch
from numpy.typing import ArrayLike
from scipy import stats
from torch import Tensor

MEASURES = {
    "ndcg@1": ("ndcg_cut.1", "ndcg_cut_1", 1),
    "ndcg@10": ("ndcg_cut.10", "ndcg_cut_10", 10),
    "mrr@10": ("recip_rank", "recip_rank", 10),
    "recall@10": ("recall.10", "recall_10", 10),
    "recall@100": ("recall.100", "recall_100", 100),
}
"""Metric name -> (trec_eval measure to request, key in its results, run depth it needs)."""


def ir_metrics(
    run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]], metrics: Sequence[str]
) -> dict[str, dict[str, float]]:
    """Per-query values {metric: {qid: value}} of nDCG@k / MRR@10 / Recall@k via pytrec_eval."""
    unknown = [m for m in metrics if m not in MEASURES]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; known {sorted(MEASURES)}")
    out: dict[str, dict[str, float]] = {}
    for m in metrics:
        request, key, depth = MEASURES[m]
        cut = {q: dict(sorted(r.items(), key=lambda kv: -kv[1])[:depth]) for q, r in run.items()}
        res = pytrec_eval.RelevanceEvaluator(qrels, {request}).evaluate(cut)
        out[m] = {q: 100.0 * float(v[key]) for q, v in res.items()}
    return out


def ndcg_at_k(
    run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]], k: int
) -> dict[str, float]:
    """Per-query nDCG@k in [0, 1] of ``run`` {qid: {doc_id: score}} (trec_eval's ``ndcg_cut``;
    graded gains; a query without judgements is left out)."""
    if k < 1:
        raise ValueError(f"nDCG@k needs k >= 1, got {k}")
    res = pytrec_eval.RelevanceEvaluator(qrels, {f"ndcg_cut.{k}"}).evaluate(run)
    return {q: float(v[f"ndcg_cut_{k}"]) for q, v in res.items()}


def ndcg_of_scores(
    scores: ArrayLike | Tensor, labels: ArrayLike | Tensor, k: int = 10
) -> np.ndarray:
    """nDCG@k per row of a score matrix [Q, C] (array or tensor) against labels [Q, C] (> 0 =
    relevant, binary gain) through :func:`ndcg_at_k`; a row without a relevant candidate is 0."""
    s, y = _matrix(scores), _matrix(labels) > 0
    if s.ndim != 2 or s.shape != y.shape:
        raise ValueError(f"scores and labels must both be [Q, C], got {s.shape} and {y.shape}")
    run = {str(i): {str(j): float(v) for j, v in enumerate(row)} for i, row in enumerate(s)}
    qrels = {str(i): {str(j): 1 for j in np.flatnonzero(row)} for i, row in enumerate(y)}
    res = ndcg_at_k(run, {q: r for q, r in qrels.items() if r}, k)
    return np.array([res.get(str(i), 0.0) for i in range(len(s))], dtype=np.float64)


def sts_correlations(
    pred: Sequence[float], gold: Sequence[float], scale: float = 100.0
) -> dict[str, float]:
    """Pearson and Spearman correlation (x ``scale``; mteb's x100) of predictions with gold."""
    p, g = np.asarray(pred, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if p.shape != g.shape or p.size < 2:
        raise ValueError(
            f"need two equal-length score lists of size >= 2, got {p.shape}, {g.shape}"
        )
    return {
        "pearson": float(scale * stats.pearsonr(p, g).statistic),
        "spearman": float(scale * stats.spearmanr(p, g).statistic),
    }


def _matrix(x: ArrayLike | Tensor) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor (any dtype, any device)
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def ndcg_dense(scores: Tensor, labels: Tensor, k: int = 10) -> Tensor:
    """Binary-gain nDCG@k per row [Q] of a torch score matrix [Q, C] against labels [Q, C]
    (> 0 = relevant; -inf scores mark non-candidates): :func:`ndcg_at_k` vectorised for grid
    searches (equal to it up to ties, pinned by a test); a row without a relevant label is 0."""
    if k < 1:
        raise ValueError(f"nDCG@k needs k >= 1, got {k}")
    rel = (labels > 0).to(scores.dtype)
    kk = min(k, scores.shape[-1])
    top = scores.topk(kk, dim=-1).indices  # [Q, k]
    disc = 1.0 / torch.log2(torch.arange(kk, dtype=scores.dtype, device=scores.device) + 2.0)
    dcg = (rel.gather(-1, top) * disc).sum(-1)
    n_rel = rel.sum(-1).clamp(max=kk).long()
    idcg = torch.cumsum(disc, 0)[(n_rel - 1).clamp(min=0)] * (n_rel > 0)
    return torch.where(n_rel > 0, dcg / idcg.clamp(min=1e-12), torch.zeros_like(dcg))

"""Exact dense retrieval and IR metrics.

Search is a batched matrix product chunked over the corpus with a running top-k merge, so
memory is O(Q·(k + chunk)) and a 1M-document corpus fits. Metrics come from ``pytrec_eval``
(trec_eval's own implementations); MRR@10 is trec_eval's ``recip_rank`` on the run cut at 10.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytrec_eval
import torch

# metric name -> (trec_eval measure to request, key in its results, run depth it needs)
MEASURES = {
    "ndcg@1": ("ndcg_cut.1", "ndcg_cut_1", 1),
    "ndcg@10": ("ndcg_cut.10", "ndcg_cut_10", 10),
    "mrr@10": ("recip_rank", "recip_rank", 10),
    "recall@10": ("recall.10", "recall_10", 10),
    "recall@100": ("recall.100", "recall_100", 100),
}


@torch.no_grad()
def search(
    queries: np.ndarray, docs: np.ndarray, k: int, chunk_size: int = 65536
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (scores, indices) of every query by dot product, exact, chunked over the corpus."""
    q = torch.as_tensor(queries, dtype=torch.float32)  # [Q, d]
    k = min(k, docs.shape[0])
    best_s = torch.full((q.shape[0], 0), float("-inf"))
    best_i = torch.zeros((q.shape[0], 0), dtype=torch.long)
    for start in range(0, docs.shape[0], chunk_size):
        d = torch.as_tensor(docs[start : start + chunk_size], dtype=torch.float32)  # [C, d]
        s = q @ d.T  # [Q, C]
        cand_s = torch.cat([best_s, s], dim=1)
        cand_i = torch.cat([best_i, torch.arange(start, start + d.shape[0]).expand_as(s)], dim=1)
        top = torch.topk(cand_s, k=min(k, cand_s.shape[1]), dim=1)
        best_s, best_i = top.values, torch.gather(cand_i, 1, top.indices)
    return best_s.numpy(), best_i.numpy()


@torch.no_grad()
def ranks_of(
    queries: np.ndarray, docs: np.ndarray, targets: Sequence[Sequence[int]], chunk_size: int = 65536
) -> list[list[int]]:
    """1-based rank of each target doc of each query in the full ranking (ties: pessimistic)."""
    q = torch.as_tensor(queries, dtype=torch.float32)
    d_all = torch.as_tensor(docs, dtype=torch.float32)
    out = []
    for i, tgt in enumerate(targets):
        t = torch.as_tensor(list(tgt), dtype=torch.long)
        t_scores = d_all[t] @ q[i]  # [T]
        above = torch.zeros(len(t), dtype=torch.long)
        for start in range(0, d_all.shape[0], chunk_size):
            s = d_all[start : start + chunk_size] @ q[i]  # [C]
            above += (s[None, :] >= t_scores[:, None]).sum(dim=1)
        out.append(above.tolist())  # counts include the target itself -> 1-based rank
    return out


def run_from_search(
    query_ids: Sequence[str], doc_ids: Sequence[str], scores: np.ndarray, idx: np.ndarray
) -> dict[str, dict[str, float]]:
    """pytrec_eval run format {qid: {doc_id: score}} from top-k results."""
    return {
        q: {doc_ids[j]: float(s) for s, j in zip(scores[r], idx[r])}
        for r, q in enumerate(query_ids)
    }


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

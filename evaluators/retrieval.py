"""Dense retrieval (exact or FAISS) and IR metrics.

Exact search is a batched matrix product chunked over the corpus with a running top-k merge, so
memory is O(Q·(k + chunk)) and a 1M-document corpus fits. With ``eval.search: faiss`` the same
:func:`search` builds a FAISS index over the documents instead (inner product; the encoders'
rows are L2-normalised, so it is cosine): a flat (exact) index, or for large corpora searched
by many queries an IVF index (spherical k-means cells, ``faiss_nprobe`` scanned per query) or
HNSW. faiss is optional (the ``faiss`` extra); asking for it without it stops with the fix.
:func:`ranks_of` (Max@R, Complete@K) needs the full ranking and is always exact. The metrics
(:func:`ir_metrics`, pytrec_eval) live in :mod:`lira.metrics`, shared with LaSR's validation.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import torch

from lira.config import ConfigError

if TYPE_CHECKING:  # faiss is optional (the ``faiss`` extra): its types for annotations only
    import faiss

    from evaluators.config import EvalConfig

log = logging.getLogger(__name__)

FAISS_REQUIREMENT = "faiss-cpu==1.15.1"
"""The faiss build the ``faiss`` extra pins (and ``scripts/setup.sh --dev`` installs)."""


def search(
    queries: np.ndarray,
    docs: np.ndarray,
    k: int,
    chunk_size: int = 65536,
    cfg: EvalConfig | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (scores, indices) [Q, k'] of every query by dot product, best first.

    ``cfg.search == "faiss"``: through a FAISS index built from ``cfg`` (:func:`faiss_search`);
    otherwise (or ``cfg`` None) exact, chunked over the corpus (:func:`exact_search`). k' =
    min(k, documents); an approximate index may return fewer hits for a query, padded with
    index -1 and score -inf (:func:`run_from_search` drops them).
    """
    if cfg is not None and cfg.search == "faiss":
        return faiss_search(queries, docs, k, cfg)
    return exact_search(queries, docs, k, chunk_size)


@torch.no_grad()
def exact_search(
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
        chunk_top = torch.topk(s, k=min(k, s.shape[1]), dim=1)  # merge k, not C, per chunk
        cand_s = torch.cat([best_s, chunk_top.values], dim=1)
        cand_i = torch.cat([best_i, chunk_top.indices + start], dim=1)
        top = torch.topk(cand_s, k=min(k, cand_s.shape[1]), dim=1)
        best_s, best_i = top.values, torch.gather(cand_i, 1, top.indices)
    return best_s.numpy(), best_i.numpy()


# ----------------------------------------------------------------------------------- FAISS
def import_faiss() -> ModuleType:
    """The ``faiss`` module, or a :class:`ConfigError` naming the fix when it is missing."""
    try:
        import faiss
    except ImportError as e:
        raise ConfigError(
            "eval.search",
            f"'faiss' needs the faiss-cpu package, which is not installed: run "
            f"`.venv/bin/pip install -e '.[faiss]'` ({FAISS_REQUIREMENT}; `bash scripts/setup.sh "
            "--dev` installs it), or set eval.search=exact",
        ) from e
    return faiss


def faiss_index_kind(n_docs: int, cfg: EvalConfig, n_queries: int | None = None) -> str:
    """The index ``cfg`` asks for: flat, ivf or hnsw. ``auto``: ivf from ``faiss_flat_below``
    documents and ``faiss_ivf_min_queries`` queries (``n_queries`` None: an index kept for many
    searches), else flat; below that, IVF's build costs more than the search it saves."""
    if cfg.faiss_index != "auto":
        return cfg.faiss_index
    many = n_queries is None or n_queries >= cfg.faiss_ivf_min_queries
    return "ivf" if n_docs >= cfg.faiss_flat_below and many else "flat"


def ivf_lists(n_docs: int, nlist: int = 0) -> int:
    """IVF lists for ``n_docs`` documents: ``nlist``, or 2·sqrt(n) (>= 39 documents per list,
    faiss's minimum for k-means), never more than the documents."""
    if nlist > 0:
        return max(1, min(nlist, n_docs))
    return max(1, min(round(2 * math.sqrt(n_docs)), n_docs // 39))


def build_faiss_index(
    docs: np.ndarray, cfg: EvalConfig, k: int = 100, n_queries: int | None = None
) -> faiss.Index:
    """A FAISS inner-product index over ``docs`` [N, d] of the kind :func:`faiss_index_kind`
    picks for ``n_queries``, trained (IVF) and filled, with its search parameters set (``k``:
    HNSW's beam is at least k)."""
    faiss = import_faiss()
    x = np.ascontiguousarray(docs, dtype=np.float32)
    n, dim = x.shape
    kind = faiss_index_kind(n, cfg, n_queries)
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, cfg.faiss_hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = cfg.faiss_ef_construction
        index.hnsw.efSearch = max(cfg.faiss_ef_search, k)
    else:
        nlist = ivf_lists(n, cfg.faiss_nlist)
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.spherical = True  # centroids on the unit sphere, as the vectors
        index.cp.max_points_per_centroid = cfg.faiss_train_per_list
        index.cp.niter = cfg.faiss_kmeans_iters
        index.cp.seed = cfg.seed
        index.train(x)
        index.nprobe = min(cfg.faiss_nprobe, nlist)
    index.add(x)
    return index


def faiss_search(
    queries: np.ndarray, docs: np.ndarray, k: int, cfg: EvalConfig, index: faiss.Index | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (scores, indices) through FAISS (``index``: one built by :func:`build_faiss_index`
    on ``docs``, else built here). Missing hits of an approximate index: index -1, score -inf."""
    k = min(k, docs.shape[0])
    q = np.ascontiguousarray(queries, dtype=np.float32)
    if k == 0 or q.shape[0] == 0:
        return np.zeros((q.shape[0], k), np.float32), np.zeros((q.shape[0], k), np.int64)
    if index is None:
        index = build_faiss_index(docs, cfg, k, n_queries=q.shape[0])
    scores, idx = index.search(q, k)
    scores[idx < 0] = -np.inf
    return scores, idx


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
    """pytrec_eval run format {qid: {doc_id: score}} from top-k results (index -1: no hit)."""
    return {
        q: {doc_ids[j]: float(s) for s, j in zip(scores[r], idx[r]) if j >= 0}
        for r, q in enumerate(query_ids)
    }

"""FAISS search (``eval.search: faiss``) against the exact chunked search, on one synthetic corpus.

    .venv/bin/python benchmarks/faiss_search.py [--docs 200000] [--queries 1000] [--dim 384]
                                                [--threads 1] [--repeats 3]

The corpus has cluster structure, so the nearest neighbours are not trivial to find: documents
are drawn from a mixture of ``--clusters`` Gaussian topics in a ``--latent``-dimensional space,
mapped to ``--dim`` dimensions by a fixed random projection, with isotropic noise, then
L2-normalised (as the encoders' rows are). Each query is a perturbed copy of a random document
(mean cosine to its nearest document ~0.78, to its 10th ~0.44, like real embeddings).
Exact top-k (``evaluators.retrieval.exact_search``) is the ground truth.

For each FAISS index (flat, IVF and HNSW with the ``EvalConfig`` defaults) it prints recall@10
against the exact top-10, the build time, the search time, and the speed-ups over exact search:
``search`` (index already built: repeated evaluation of one corpus) and ``build+search`` (what
one ``lira eval`` scenario pays, since the evaluator builds the index per call), and the number
of queries from which the build pays for itself (``eval.faiss_ivf_min_queries``). Exact and
FAISS searches alternate within each round and the best of ``--repeats`` rounds is kept, so
load from other processes hits both alike. torch and faiss use the same number of threads.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from evaluators.config import EvalConfig
from evaluators.retrieval import build_faiss_index, exact_search, faiss_search, import_faiss


def corpus(n_docs: int, n_queries: int, dim: int, clusters: int, latent: int, seed: int):
    """(docs [N, dim], queries [Q, dim]) float32, L2-normalised, with cluster structure."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(clusters, latent)).astype(np.float32)
    proj = (rng.normal(size=(latent, dim)) / np.sqrt(latent)).astype(np.float32)

    def draw(n: int, topic: np.ndarray, spread: float) -> np.ndarray:
        z = centers[topic] + spread * rng.normal(size=(n, latent)).astype(np.float32)
        x = z @ proj + 0.3 * rng.normal(size=(n, dim)).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    topics = rng.integers(0, clusters, size=n_docs)
    docs = draw(n_docs, topics, 1.0)  # clusters overlap: IVF cells cut through them
    pick = rng.integers(0, n_docs, size=n_queries)
    noise = rng.normal(size=(n_queries, dim)).astype(np.float32)
    q = docs[pick] + 0.8 * noise / np.linalg.norm(noise, axis=1, keepdims=True)
    return docs, (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def recall_at(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean share of the exact top-k that the approximate top-k holds."""
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth)]))


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--latent", type=int, default=64)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1, help="torch and faiss threads")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--indexes", default="flat,ivf,hnsw")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    faiss = import_faiss()
    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    docs, queries = corpus(args.docs, args.queries, args.dim, args.clusters, args.latent,
                           args.seed)  # fmt: skip
    print(f"corpus: {args.docs} docs x {args.dim} dims ({args.clusters} clusters), "
          f"{args.queries} queries, k={args.k}, {args.threads} thread(s), faiss "
          f"{faiss.__version__}, torch {torch.__version__}")  # fmt: skip
    (_, truth), _ = timed(lambda: exact_search(queries, docs, args.k))
    rows = []
    for kind in args.indexes.split(","):
        cfg = EvalConfig(search="faiss", faiss_index=kind)
        index, build_s = timed(lambda cfg=cfg: build_faiss_index(docs, cfg, args.k))
        exact_t, faiss_t, found = [], [], None
        for _ in range(args.repeats):  # alternate: exact, faiss, exact, faiss, ...
            _, t = timed(lambda: exact_search(queries, docs, args.k))
            exact_t.append(t)
            (_, found), t = timed(
                lambda cfg=cfg, index=index: faiss_search(queries, docs, args.k, cfg, index)
            )
            faiss_t.append(t)
        ex, fs = min(exact_t), min(faiss_t)
        if kind == "ivf":
            detail = f"nlist={index.nlist}, nprobe={index.nprobe}"
        elif kind == "hnsw":
            detail = f"M={cfg.faiss_hnsw_m}, efSearch={index.hnsw.efSearch}"
        else:
            detail = "exact"
        rows.append((f"{kind} ({detail})", recall_at(found, truth), build_s, fs, ex))
        del index
    print(
        f"\n| index | recall@{args.k} | build s | search s | exact s | search speed-up "
        "(exact / faiss) | build+search speed-up | break-even queries |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, rec, b, fs, ex in rows:
        saved = (ex - fs) / args.queries  # seconds saved per query
        even = f"{b / saved:,.0f}" if saved > 0 else "never"
        print(f"| {name} | {rec:.4f} | {b:.2f} | {fs:.3f} | {ex:.3f} | {ex / fs:.2f}x | "
              f"{ex / (b + fs):.2f}x | {even} |")  # fmt: skip


if __name__ == "__main__":
    main()

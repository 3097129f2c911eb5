"""The evaluation's configuration (``eval.*``) and the run view the evaluators read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from lasr.config import LaSRRun
from lira.baselines.config import BaselinesConfig
from lira.config import check, check_at_least, check_seed

EVAL_METRICS = ("ndcg@1", "ndcg@10", "mrr@10", "recall@10", "recall@100")
"""The single-reference metrics ``lira.metrics.MEASURES`` computes (kept equal by a test)."""


@dataclass
class EvalConfig:
    """Evaluation: tasks, scenarios, metrics, bootstrap."""

    scenarios: list[str] = field(
        default_factory=lambda: [
            "en-en",
            "lang-en",
            "en-lang",
            "multi",
            "multi-1",
            "mono-same",
            "mono-cross",
        ]
    )
    """Query->document scenarios evaluated (see evaluators/scenarios.py for each paper column)."""
    metrics: list[str] = field(default_factory=lambda: ["ndcg@10", "mrr@10", "recall@10"])
    """Single-reference metrics: ndcg@1, ndcg@10, mrr@10, recall@10, recall@100."""
    model: str = ""
    """``lira eval``: a LiRA model or baseline folder; empty = the bare backbone."""
    batch_size: int = 64
    """Texts per encode batch."""
    chunk_size: int = 65536
    """Documents scored per chunk in exact search (bounds memory)."""
    search: Literal["exact", "faiss"] = "exact"
    """Top-k search: exact (chunked matmul) or faiss (the faiss extra); Max@R is always exact."""
    faiss_index: Literal["auto", "flat", "ivf", "hnsw"] = "auto"
    """faiss index: flat (exact), ivf, hnsw; auto = ivf for large corpora and many queries."""
    faiss_flat_below: int = 100000
    """faiss_index: auto uses the flat (exact) index for corpora with fewer documents than this."""
    faiss_ivf_min_queries: int = 5000
    """faiss_index: auto uses ivf only from this many queries (fewer: its build costs more)."""
    faiss_nlist: int = 0
    """IVF: number of lists (k-means cells); 0 = 2·sqrt(documents), at most documents / 39."""
    faiss_nprobe: int = 32
    """IVF: lists scanned per query (more: higher recall, slower search)."""
    faiss_train_per_list: int = 64
    """IVF: k-means trains on at most this many sampled documents per list (faiss: 256)."""
    faiss_kmeans_iters: int = 10
    """IVF: k-means iterations (faiss: 25; training dominates the build time)."""
    faiss_hnsw_m: int = 32
    """HNSW: neighbours per node (more: higher recall, more memory, slower build)."""
    faiss_ef_construction: int = 40
    """HNSW: beam width while building the graph."""
    faiss_ef_search: int = 128
    """HNSW: beam width while searching (raised to k when smaller)."""
    bootstrap: int = 1000
    """Bootstrap resamples of queries for the 95% intervals (0 = none)."""
    diagnostics: bool = True
    """Also compute the diagnostics (ε̂1, L_emp, English inclination, probes)."""
    seed: int = 0
    """Seed of the bootstrap (and of the IVF k-means of search: faiss)."""

    def __post_init__(self) -> None:
        known = {"en-en", "lang-en", "en-lang", "multi", "multi-1", "mono-same", "mono-cross"}
        check_at_least(
            self,
            faiss_flat_below=1,
            faiss_ivf_min_queries=1,
            faiss_nprobe=1,
            faiss_train_per_list=1,
            faiss_kmeans_iters=1,
            faiss_hnsw_m=1,
            faiss_ef_construction=1,
            faiss_ef_search=1,
        )
        check(self.faiss_nlist >= 0, "faiss_nlist", "must be >= 0 (0 = 2·sqrt(documents))")
        check_seed(self.seed, "seed")
        bad = [s for s in self.scenarios if s not in known]
        check(not bad, "scenarios", f"unknown {bad}; choose from {sorted(known)}")
        check(self.bootstrap >= 0, "bootstrap", "must be >= 0 (0 = no intervals)")
        check(self.batch_size >= 1, "batch_size", "must be >= 1")
        check(self.chunk_size >= 1, "chunk_size", "must be >= 1 (documents scored per chunk)")
        check(len(self.metrics) > 0, "metrics", f"name at least one of {list(EVAL_METRICS)}")
        bad = [m for m in self.metrics if m not in EVAL_METRICS]
        check(not bad, "metrics", f"unknown {bad}; choose from {list(EVAL_METRICS)}")


class EvalRun(LaSRRun, Protocol):
    """The parts of a run config the evaluators read (a ``RunConfig`` is one)."""

    baselines: BaselinesConfig
    eval: EvalConfig
    stages: list[str]
    """The stages of ``lira run`` the config asks for (a baseline is expected when it names
    ``baselines``)."""

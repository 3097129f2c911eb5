"""LiRAModel: streams, translation through the store, encode, adapters, save/load round trip."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from lira.config import RunConfig, TranslationConfig, TranslatorConfig
from lira.model import LiRAModel, SentenceEncoderAdapter
from lira.translation.store import TranslationStore, reference_translator

DE = ["Wie viele Punkte gab die Verteidigung ab?", "Wer führte das Team an?"]
EN = ["How many points did the defense allow?", "Who led the team?"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory, models_config):
    """A LiRA model on the demo models (MiniLM backbone), a fresh Arca and a filled store."""
    tmp = tmp_path_factory.mktemp("lira-model")
    store = TranslationStore(tmp / "store.sqlite")
    gold = TranslatorConfig(name="gold", kind="reference", role="mt", train_only=True)
    ref = reference_translator("ref")
    store.add_reference(ref, [(d, "de", e, None) for d, e in zip(DE, EN)])
    store.add_reference(gold, [(d, "de", e.upper(), None) for d, e in zip(DE, EN)])
    models = dataclasses.replace(models_config, backbone="demo:minilm", backbone_pooling="mean")
    cfg = RunConfig(
        output_dir=str(tmp),
        models=models,
        translation=TranslationConfig(mt_translators=[ref, gold], num_candidates=2),
    )
    cfg.lasr.fusion_dim, cfg.lasr.fusion_layers = 32, 1
    torch.manual_seed(0)
    model = LiRAModel.from_config(cfg, None, store=store)
    torch.nn.init.normal_(model.head.out.weight, std=0.05)  # a head that is not the identity
    return model, store, tmp


def test_translation_choice_store_and_train_only(stack):
    model, _, _ = stack
    assert model.english_texts(DE, ["de", "de"]) == EN  # gold is train_only: never at inference
    picked = model.english_texts(DE, ["de", "de"], train=True)
    assert all(p in (e, e.upper()) for p, e in zip(picked, EN))
    # English input skips translation, unknown text falls back to itself
    assert model.english_texts(["Who led?", "Unbekannt"], ["en", "de"]) == ["Who led?", "Unbekannt"]


def test_streams_use_the_chosen_translation(stack):
    model, _, _ = stack
    e_en, e_lr = model.streams(DE, ["de", "de"], kind="query")
    want = torch.as_tensor(model.backbone.encode(EN, kind="query"))
    assert torch.allclose(e_en, want, atol=1e-5)
    assert e_lr.shape == (2, model.d_lr) and e_lr.abs().sum() > 0
    e_en2, _ = model.streams(EN, ["en", "en"])
    assert torch.allclose(e_en2, want, atol=1e-5)


def test_encode_normalised_numpy_and_torch_and_errors(stack):
    model, _, _ = stack
    z = model.encode(DE + EN, ["de", "de", "en", "en"], batch_size=3)
    assert isinstance(z, np.ndarray) and z.shape == (4, model.d_en)
    assert np.allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-5)
    zt = model.encode(DE, ["de", "de"], convert_to_numpy=False)
    assert isinstance(zt, torch.Tensor) and np.allclose(zt.numpy(), z[:2], atol=1e-6)
    # encode batches by length internally: every row still belongs to its own text
    mixed, langs = [EN[1], DE[0], EN[0], DE[1]], ["en", "de", "en", "de"]
    one_by_one = np.concatenate([model.encode([t], [g]) for t, g in zip(mixed, langs)])
    batched = model.encode(mixed, langs, batch_size=1)
    assert np.allclose(batched, one_by_one, atol=1e-5)
    assert np.allclose(batched[[1, 3, 2, 0]], z, atol=1e-5)
    with pytest.raises(TypeError, match="list of texts"):
        model.encode("one string")
    with pytest.raises(ValueError, match="one lang per text"):
        model.encode(DE, ["de"])
    with pytest.raises(ValueError, match="kind"):
        model.encode(DE, ["de", "de"], kind="passage")


def test_sentence_encoder_adapter(stack):
    model, _, _ = stack
    ad = model.as_sentence_encoder(lang="de")
    assert isinstance(ad, SentenceEncoderAdapter)
    doc = ad.encode(DE, batch_size=8, prompt_type="document")
    assert np.allclose(doc, model.encode(DE, ["de", "de"], kind="document"), atol=1e-6)
    assert ad.encode(DE[0]).shape == (model.d_en,)
    assert ad.encode_corpus([{"title": "", "text": DE[0]}]).shape == (1, model.d_en)


ROUNDTRIP = """
import json, sys, numpy as np, torch
torch.set_num_threads(1)
from lira.model import LiRAModel
m = LiRAModel.from_pretrained(sys.argv[1])
z = m.encode(json.loads(sys.argv[2]), json.loads(sys.argv[3]))
np.save(sys.argv[4], z)
"""


@pytest.mark.slow
def test_save_pretrained_fresh_process_identical_embeddings(stack, tmp_path):
    model, _, _ = stack
    texts, langs = [*DE, EN[0]], ["de", "de", "en"]
    torch.set_num_threads(1)
    want = model.encode(texts, langs)
    model.save_pretrained(tmp_path / "lira")
    meta = json.loads((tmp_path / "lira" / "lira_config.json").read_text())
    assert meta["format"] == "lira-v1" and meta["models"]["backbone"] == "demo:minilm"
    out = tmp_path / "z.npy"
    subprocess.run(
        [
            sys.executable,
            "-c",
            ROUNDTRIP,
            str(tmp_path / "lira"),
            json.dumps(texts),
            json.dumps(langs),
            str(out),
        ],
        check=True,
    )
    got = np.load(out)
    assert got.shape == want.shape
    assert np.abs(got - want).max() < 1e-6
    with pytest.raises(FileNotFoundError, match="not a LiRA model folder"):
        LiRAModel.from_pretrained(tmp_path)


def test_lasr_streams_never_use_train_only_references(stack):
    """LaSR trains on the translations inference sees: gold (train-only) English is Arca's anchor."""
    from lasr.trainer import build_bank

    model, store, _ = stack
    gold = next(t for t in model.translation_cfg.mt_translators if t.train_only)
    store.add_reference(gold, [("Wer gewann?", "de", "The weather is nice in Paris.", None)])
    assert model.english_texts(["Wer gewann?"], ["de"], train=True) == [
        "The weather is nice in Paris."
    ]
    bank = build_bank(model, ["q"], ["Wer gewann?"], ["de"], "query", batch_size=4)
    untranslated = torch.as_tensor(model.backbone.encode(["Wer gewann?"], kind="query"))
    assert torch.allclose(bank.e_en, untranslated, atol=1e-5)

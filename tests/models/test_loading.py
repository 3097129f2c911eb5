"""Loaders of h, g and causal LMs: pooling by hand, padding invariance, gradients, errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from lira.config import ModelsConfig
from lira.models import (
    Backbone,
    TokenEncoder,
    load_backbone,
    load_causal_lm,
    load_encoder,
    load_seq2seq,
    pool,
)
from lira.models.loading import last_token_index

SHORT = "Who won?"
LONG = "How many points did the Panthers defense surrender in the whole season?"


# ----------------------------------------------------------------------------- pure pooling
def _toy() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    hidden = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)  # [B=2, L=4, d=3]
    right = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    left = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    return hidden, right, left


def test_mean_pooling_by_hand():
    hidden, right, _ = _toy()
    got = pool(hidden, right, "mean")
    want = torch.stack([(hidden[0, 0] + hidden[0, 1]) / 2, hidden[1].mean(0)])
    torch.testing.assert_close(got, want)


def test_cls_pooling_by_hand():
    hidden, right, _ = _toy()
    torch.testing.assert_close(pool(hidden, right, "cls"), hidden[:, 0])


def test_last_token_pooling_right_and_left_padding():
    hidden, right, left = _toy()
    assert last_token_index(right).tolist() == [1, 3]
    assert last_token_index(left).tolist() == [3, 3]
    torch.testing.assert_close(
        pool(hidden, right, "last"), torch.stack([hidden[0, 1], hidden[1, 3]])
    )
    torch.testing.assert_close(pool(hidden, left, "last"), hidden[:, 3])


def test_unknown_pooling_is_an_error():
    hidden, right, _ = _toy()
    with pytest.raises(ValueError, match="mean, cls, last"):
        pool(hidden, right, "max")


# ----------------------------------------------------------------------------- backbone
@pytest.fixture(scope="module")
def qwen_backbone(models_config) -> Backbone:
    cfg = dataclasses.replace(models_config, backbone="demo:backbone", backbone_pooling="last")
    return load_backbone(cfg)


@pytest.fixture(scope="module")
def minilm(models_config) -> Backbone:
    return load_backbone(models_config)


def _alone(backbone: Backbone, text: str, how: str) -> torch.Tensor:
    """Hand computation: the single unpadded text through the raw HF model, pooled by hand."""
    enc = backbone.tokenizer([text], return_tensors="pt")
    with torch.no_grad():
        hidden = backbone.model(input_ids=enc["input_ids"]).last_hidden_state[0]  # [L, d]
    vec = {"mean": hidden.mean(0), "cls": hidden[0], "last": hidden[-1]}[how]
    return torch.nn.functional.normalize(vec, dim=-1)


@pytest.mark.parametrize("side", ["left", "right"])
def test_last_token_pooling_is_padding_invariant(qwen_backbone, side):
    qwen_backbone.tokenizer.padding_side = side
    try:
        with torch.no_grad():
            batch = qwen_backbone([SHORT, LONG])  # SHORT gets padded
    finally:
        qwen_backbone.tokenizer.padding_side = "left"
    torch.testing.assert_close(batch[0], _alone(qwen_backbone, SHORT, "last"), atol=1e-5, rtol=0)
    torch.testing.assert_close(batch[1], _alone(qwen_backbone, LONG, "last"), atol=1e-5, rtol=0)


@pytest.mark.parametrize("how", ["mean", "cls"])
def test_mean_and_cls_pooling_match_hand_computation(minilm, how):
    minilm.pooling = how
    try:
        with torch.no_grad():
            batch = minilm([SHORT, LONG])
    finally:
        minilm.pooling = "mean"
    torch.testing.assert_close(batch[0], _alone(minilm, SHORT, how), atol=1e-5, rtol=0)


def test_forward_is_normalised_and_differentiable(minilm):
    out = minilm([SHORT, LONG], kind="document")
    assert out.shape == (2, minilm.dim) and minilm.dim == 384
    torch.testing.assert_close(out.norm(dim=-1), torch.ones(2))
    (out[0] @ out[1]).backward()
    grads = [p.grad for p in minilm.model.parameters() if p.grad is not None]
    assert grads and any(g.abs().sum() > 0 for g in grads)
    minilm.model.zero_grad(set_to_none=True)


def test_encode_matches_forward_keeps_order_and_restores_mode(minilm):
    texts = [LONG, SHORT, "The Broncos won Super Bowl 50.", "A cat sleeps."]
    minilm.train()
    vecs = minilm.encode(texts, batch_size=3)
    assert minilm.training  # mode restored
    minilm.eval()
    assert vecs.shape == (4, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    with torch.no_grad():
        want = minilm(texts).numpy()
    np.testing.assert_allclose(vecs, want, atol=1e-5)
    assert minilm.encode([]).shape == (0, 384)


def test_prompts_are_applied_per_kind(models_config):
    cfg = dataclasses.replace(models_config, query_prompt="query: ", document_prompt="passage: ")
    bb = load_backbone(cfg)
    q, d = bb.encode([SHORT], kind="query"), bb.encode([SHORT], kind="document")
    assert not np.allclose(q, d)
    np.testing.assert_allclose(q[0], _alone(bb, "query: " + SHORT, "mean").numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="kind"):
        bb.encode([SHORT], kind="passage")


def test_truncation_to_max_length(models_config):
    bb = load_backbone(dataclasses.replace(models_config, backbone_max_length=8))
    tokens, mask = bb.token_stream([LONG * 3])
    assert tokens.shape[1] == 8 and mask.shape == (1, 8)


def test_token_streams(minilm):
    tokens, mask = minilm.token_stream([SHORT, LONG], stream="input_embeddings")
    ids = minilm.tokenizer([SHORT, LONG], padding=True, return_tensors="pt")["input_ids"]
    assert tokens.shape == (2, ids.shape[1], 384) and mask.shape == (2, ids.shape[1])
    torch.testing.assert_close(tokens, minilm.model.get_input_embeddings().weight[ids])
    assert not tokens.requires_grad
    hidden, mask2 = minilm.token_stream([SHORT, LONG], stream="last_hidden")
    assert hidden.shape == tokens.shape and torch.equal(mask, mask2)
    with pytest.raises(ValueError, match="input_embeddings"):
        minilm.token_stream([SHORT], stream="pooled")


def test_minilm_ranks_paraphrases_above_unrelated(minilm):
    vecs = minilm.encode(
        [
            "How many points did the defense give up?",
            "How many points did the defence allow?",
            "The weather in Paris is rainy in November.",
        ]
    )
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.3


def test_backbone_dtype_from_config(models_config):
    bb = load_backbone(
        dataclasses.replace(models_config, backbone="demo:backbone", dtype="bfloat16")
    )
    assert next(bb.parameters()).dtype == torch.bfloat16
    assert bb.encode([SHORT]).dtype == np.float32


# ----------------------------------------------------------------------------- encoder g
def test_encoder_dtype_overrides_dtype_for_g_only(models_config):
    """models.encoder_dtype: g trained in full keeps fp32 weights while h is bf16 (App. C)."""
    bf16 = dataclasses.replace(models_config, dtype="bfloat16")
    assert next(load_encoder(bf16).parameters()).dtype == torch.bfloat16
    mixed = dataclasses.replace(bf16, encoder_dtype="float32")
    assert next(load_encoder(mixed).parameters()).dtype == torch.float32
    assert next(load_backbone(mixed).parameters()).dtype == torch.bfloat16


def test_mt5_encoder_has_no_decoder_and_trains(models_config):
    enc = load_encoder(models_config)
    assert isinstance(enc, TokenEncoder)
    assert type(enc.model).__name__ == "MT5EncoderModel"
    assert not any("decoder" in n for n, _ in enc.model.named_parameters())
    tokens, mask = enc(["Wie viele Punkte?", "¿Cuántos puntos dejaron escapar en defensa?"])
    assert tokens.shape[0] == 2 and tokens.shape[2] == enc.dim == 64
    assert mask.shape == tokens.shape[:2] and mask[0].sum() < mask[1].sum()
    tokens.sum().backward()
    assert any(p.grad is not None for p in enc.model.parameters())


def test_other_encoders_load_through_automodel(models_config):
    enc = load_encoder(dataclasses.replace(models_config, encoder="demo:minilm"))
    assert type(enc.model).__name__ == "BertModel" and enc.dim == 384
    tokens, mask = enc([SHORT])
    assert tokens.shape == (1, mask.shape[1], 384)


def test_a_lora_adapter_folder_loads_as_g(models_config, tmp_path):
    """Issue 60, item 2: ``models.encoder=<peft adapter folder>`` (safetensors) crashed with
    ``'MT5Config' object has no attribute 'named_modules'`` (the adapter wrapped a config); g is
    its base model with the adapter's weights."""
    from peft import LoraConfig, get_peft_model

    base = load_encoder(models_config)
    tuned = get_peft_model(base.model, LoraConfig(r=2, target_modules=["q", "v"]))
    torch.manual_seed(0)
    for name, p in tuned.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.5)
    tuned.save_pretrained(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
    with torch.no_grad():
        want, _ = base(["Wie viele Punkte?"])  # the base with the adapter applied in place
    enc = load_encoder(dataclasses.replace(models_config, encoder=str(tmp_path / "adapter")))
    with torch.no_grad():
        got, _ = enc(["Wie viele Punkte?"])
        plain, _ = load_encoder(models_config)(["Wie viele Punkte?"])
    assert enc.dim == base.dim and torch.allclose(got, want, atol=1e-5)
    assert (got - plain).abs().max() > 1e-3  # the adapter's weights are loaded


# ----------------------------------------------------------------------------- causal LM
def test_load_causal_lm_pads_left_and_generates(demo_cache):
    model, tok = load_causal_lm("demo:qwen3-lm", str(demo_cache))
    assert tok.padding_side == "left" and tok.pad_token is not None
    prompts = [
        tok.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True,
                                tokenize=False)
        for t in (SHORT, LONG)
    ]  # fmt: skip
    enc = tok(prompts, padding=True, return_tensors="pt")
    out = model.generate(**enc, max_new_tokens=4, do_sample=False)
    assert (
        out.shape == (2, enc["input_ids"].shape[1] + 4)
        or out.shape[1] < enc["input_ids"].shape[1] + 4
    )


def test_load_seq2seq_translates(demo_cache):
    model, tok = load_seq2seq("demo:marian", str(demo_cache))
    assert type(model).__name__ == "MarianMTModel" and not model.training
    enc = tok(["Wie viele Punkte?", "¿Cuántos puntos?"], padding=True, return_tensors="pt")
    out = tok.batch_decode(model.generate(**enc, max_new_tokens=16), skip_special_tokens=True)
    assert len(out) == 2 and all(t.strip() for t in out)


# ----------------------------------------------------------------------------- errors
def test_missing_folder_names_path_and_demo_alias(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(FileNotFoundError, match=r"no-such-model.*demo:minilm"):
        load_backbone(ModelsConfig(backbone=str(missing)))
    with pytest.raises(FileNotFoundError, match="demo:mt5"):
        load_encoder(ModelsConfig(encoder=str(missing)))
    with pytest.raises(FileNotFoundError, match="demo:qwen3-lm"):
        load_causal_lm(str(missing))
    with pytest.raises(FileNotFoundError, match="demo:marian"):
        load_seq2seq(str(missing))


def test_folder_without_config_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no config\.json"):
        load_backbone(ModelsConfig(backbone=str(tmp_path)))


def test_unknown_demo_alias_lists_names():
    with pytest.raises(ValueError, match="demo:backbone"):
        load_backbone(ModelsConfig(backbone="demo:nope"))

"""``random:<arch>`` references: the paper's shapes without weights, cost-only (issue 31)."""

from __future__ import annotations

import logging

import pytest
import torch

from lira.config import ModelsConfig
from lira.models import load_backbone, load_causal_lm, load_encoder
from lira.models.random_weights import arch_names, random_config, random_folder

TINY = ModelsConfig(backbone="random:tiny-qwen3-embedding", backbone_pooling="last",
                    encoder="random:tiny-mt5-encoder", backbone_max_length=32,
                    encoder_max_length=32)  # fmt: skip


def test_shipped_paper_shapes_match_the_paper_models():
    assert {"qwen3-embedding-8b", "mt5-xl-encoder", "qwen3-8b"} <= set(arch_names())
    h = random_config("random:qwen3-embedding-8b")
    assert (h.model_type, h.num_hidden_layers, h.hidden_size) == ("qwen3", 36, 4096)
    assert (h.num_attention_heads, h.num_key_value_heads, h.intermediate_size) == (32, 8, 12288)
    g = random_config("random:mt5-xl-encoder")
    assert (g.model_type, g.num_layers, g.d_model, g.d_ff) == ("mt5", 24, 2048, 5120)
    llm = random_config("random:qwen3-8b")
    assert (llm.num_hidden_layers, llm.hidden_size, llm.vocab_size) == (36, 4096, 151936)


def test_random_backbone_and_encoder_build_without_weights_and_warn(caplog):
    with caplog.at_level(logging.WARNING, logger="lira.models.random_weights"):
        h = load_backbone(TINY)
        g = load_encoder(TINY)
    assert type(h.model).__name__ == "Qwen3Model" and h.dim == 64
    assert type(g.model).__name__ == "MT5EncoderModel" and g.dim == 64
    warned = [r.getMessage() for r in caplog.records]
    assert sum("RANDOM WEIGHTS" in m and "cost measurements only" in m for m in warned) == 2
    v = h.encode(["a short one", "a somewhat longer English sentence to embed"], batch_size=2)
    assert v.shape == (2, 64) and abs(float((v**2).sum(1).mean()) - 1.0) < 1e-4
    tokens, mask = g(["ein kurzer Satz", "noch einer"])
    assert tokens.shape[-1] == 64 and int(mask.sum()) > 0
    # the ids of the tokenizer stay inside the model's vocabulary
    ids = h.tokenizer(["every word of this text"], return_tensors="pt")["input_ids"]
    assert int(ids.max()) < h.model.config.vocab_size


def test_random_causal_lm_and_device_argument():
    lm, tok = load_causal_lm("random:tiny-qwen3-lm")
    assert type(lm).__name__ == "Qwen3ForCausalLM" and tok.padding_side == "left"
    h = load_backbone(TINY, device="cpu")
    assert next(h.parameters()).device == torch.device("cpu")


def test_unknown_random_reference_names_the_choices():
    with pytest.raises(FileNotFoundError, match="random:qwen3-embedding-8b"):
        random_folder("random:no-such-arch")


def test_random_models_are_built_on_the_default_device_when_none_is_given(monkeypatch):
    """A stage loads h without a device and places it later: a random 8B h built on the CPU took
    over 225 s of an H100 run (../shared/gpu_check.sh); it is built where it will run."""
    import lira.models.devices as devices

    monkeypatch.setattr(devices, "default_device", lambda: torch.device("meta"))
    h = load_backbone(ModelsConfig(backbone="random:tiny-qwen3-embedding"))
    assert {p.device.type for p in h.model.parameters()} == {"meta"}

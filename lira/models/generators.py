"""Generative models: causal LMs (translators, critic, reasoning) and seq2seq MT models."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lira.models.loading import (
    from_pretrained,
    load_tokenizer,
    resolve_path,
    torch_dtype,
    with_pad_token,
)


def load_causal_lm(
    ref: str, cache_dir: str = "", dtype: str | torch.dtype = "float32"
) -> tuple[nn.Module, Any]:
    """(model, tokenizer) of a causal LM; pad token set and left padding for batched generation."""
    from transformers import AutoModelForCausalLM

    path = resolve_path(ref, cache_dir, "qwen3-lm")
    tokenizer = with_pad_token(load_tokenizer(path, ref, "qwen3-lm"))
    tokenizer.padding_side = "left"
    model = from_pretrained(AutoModelForCausalLM, path, ref, "qwen3-lm", dtype=torch_dtype(dtype))
    if getattr(model, "generation_config", None) is not None:
        if model.generation_config.pad_token_id is None:
            model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def load_seq2seq(
    ref: str, cache_dir: str = "", dtype: str | torch.dtype = "float32"
) -> tuple[nn.Module, Any]:
    """(model, tokenizer) of a seq2seq MT model (Marian, M2M100, NLLB, mT5) in eval mode."""
    from transformers import AutoModelForSeq2SeqLM

    path = resolve_path(ref, cache_dir, "marian")
    tokenizer = with_pad_token(load_tokenizer(path, ref, "marian"))
    model = from_pretrained(AutoModelForSeq2SeqLM, path, ref, "marian", dtype=torch_dtype(dtype))
    if getattr(model, "generation_config", None) is not None:
        if model.generation_config.pad_token_id is None:
            model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.eval(), tokenizer

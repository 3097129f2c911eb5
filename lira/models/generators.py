"""Generative models: causal LMs (translators, critic, reasoning) and seq2seq MT models.

The translator pool's transformers backend, the critic, ``lira tune-translator`` and the
reasoning stage all load their LMs here, so ``models.cache_dir``, the demo aliases and the
local-folder rules of :func:`~lira.models.loading.resolve_path` hold for every one of them.
A peft adapter folder (``adapter_config.json``, e.g. an unmerged ``lira tune-translator``
output) loads as its base model wrapped with the adapter.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, PreTrainedTokenizerBase

from lira.models.loading import (
    from_pretrained,
    load_model_config,
    load_tokenizer,
    resolve_path,
    torch_dtype,
    with_pad_token,
)
from lira.models.random_weights import build_random, is_random_ref, random_tokenizer


def _pad_generation(model: nn.Module, tokenizer: PreTrainedTokenizerBase) -> None:
    """Give the model's generation config the tokenizer's pad id where it has none."""
    if getattr(model, "generation_config", None) is not None:
        if model.generation_config.pad_token_id is None:
            model.generation_config.pad_token_id = tokenizer.pad_token_id


def line_end_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """The end-of-text id and every token id that holds a line break, where a completion
    prompt's translation ends (the pool's transformers backend and ``lira tune-translator``
    stop generation on them). Ids, not ``stop_strings``: those were 1.3x slower per batch on
    Gemma-3-270M's 262k-token vocabulary (``benchmarks/completion_stops.py``: 9.0 s vs 7.0 s
    for 16 questions; not stopping at all, 15.7 s)."""
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    marks = ("\n", "Ċ", "<0x0A>")  # literal, byte-level BPE, sentencepiece byte fallback
    ids = {i for i, p in enumerate(pieces) if p and any(m in p for m in marks)}
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return sorted(ids)


def is_seq2seq(ref: str, cache_dir: str = "") -> bool:
    """True when ``ref`` is an encoder-decoder (seq2seq MT) model, False for a causal LM."""
    path = resolve_path(ref, cache_dir, "marian")
    config = load_model_config(path, ref, "marian", cache_dir=cache_dir)
    return bool(getattr(config, "is_encoder_decoder", False))


def load_causal_lm(
    ref: str, cache_dir: str = "", dtype: str | torch.dtype = "float32"
) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """(model, tokenizer) of a causal LM; pad token set and left padding for batched generation
    (``random:<arch>``: random weights, cost-only)."""
    if is_random_ref(ref):
        tokenizer = with_pad_token(random_tokenizer(ref))
        tokenizer.padding_side = "left"
        model = build_random(AutoModelForCausalLM, ref, torch_dtype(dtype))
        _pad_generation(model, tokenizer)
        return model, tokenizer
    path = resolve_path(ref, cache_dir, "qwen3-lm")
    tokenizer = with_pad_token(load_tokenizer(path, ref, "qwen3-lm", cache_dir=cache_dir))
    tokenizer.padding_side = "left"
    model = from_pretrained(
        AutoModelForCausalLM, path, ref, "qwen3-lm", cache_dir=cache_dir, dtype=torch_dtype(dtype)
    )
    _pad_generation(model, tokenizer)
    return model, tokenizer


def load_seq2seq(
    ref: str, cache_dir: str = "", dtype: str | torch.dtype = "float32"
) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """(model, tokenizer) of a seq2seq MT model (Marian, M2M100, NLLB, mT5) in eval mode."""
    path = resolve_path(ref, cache_dir, "marian")
    tokenizer = with_pad_token(load_tokenizer(path, ref, "marian", cache_dir=cache_dir))
    model = from_pretrained(
        AutoModelForSeq2SeqLM, path, ref, "marian", cache_dir=cache_dir, dtype=torch_dtype(dtype)
    )
    _pad_generation(model, tokenizer)
    return model.eval(), tokenizer

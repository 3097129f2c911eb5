"""TRL wiring of ``lira tune-translator``: the GRPO dataset, TRL's ``GRPOConfig``, the policy
model and the saved ``final/`` folder."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from datasets import Dataset
from torch import nn
from transformers import PreTrainedTokenizerBase

from arca.tuning.config import TuneTranslatorRun
from lira.checkpoint.folders import atomic_dir
from lira.models.generators import line_end_ids, load_causal_lm
from lira.prompts import is_completion, translation_prompt
from lira.translation.config import TranslatorConfig
from lira.translation.translators import chat_messages
from lira.translation.tuning import base_translator

if TYPE_CHECKING:  # trl loads only when GRPO runs (it is heavy)
    from trl import GRPOConfig, GRPOTrainer

FORMAT = "lira-tuned-translator/1"
META_NAME = "tune_translator.json"


def build_dataset(sources: Sequence[tuple[str, str]], translator: TranslatorConfig) -> Dataset:
    """The GRPO dataset: the pool's translation prompt (a chat message, or the plain few-shot
    text of a completion version) + ``source`` + ``lang``."""
    version = translator.prompt_version

    def prompt(text: str, lang: str) -> str | list[dict[str, str]]:
        filled = translation_prompt(text, lang, version)
        return filled if is_completion(version) else chat_messages(filled)

    return Dataset.from_list(
        [{"prompt": prompt(text, lang), "source": text, "lang": lang} for text, lang in sources]
    )


def load_policy(
    translator: TranslatorConfig, cache_dir: str = ""
) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """(model, tokenizer) of the translator's weights, as the transformers backend loads them."""
    dtype = "auto" if torch.cuda.is_available() else torch.float32  # bf16 is slow on CPUs
    return load_causal_lm(translator.model, cache_dir, dtype=dtype)


@contextmanager
def line_end_stops(model: nn.Module, tokenizer: PreTrainedTokenizerBase) -> Iterator[None]:
    """Within: the model's end-of-sequence ids are every line-break id, so a ``GRPOTrainer``
    built here samples and masks a completion prompt's completion up to its first line (the
    pool's translation); restored after, so the saved model keeps its own ids."""
    config = model.generation_config
    original = config.eos_token_id
    config.eos_token_id = line_end_ids(tokenizer)
    try:
        yield
    finally:
        config.eos_token_id = original


def grpo_config(cfg: TuneTranslatorRun, out: Path, batch_size: int) -> GRPOConfig:
    """TRL's ``GRPOConfig`` for ``tune_translator`` (one generation batch per step)."""
    from trl import GRPOConfig

    tc = cfg.tune_translator
    max_new = tc.max_new_tokens or base_translator(cfg).max_new_tokens
    cuda = torch.cuda.is_available()
    return GRPOConfig(
        output_dir=str(out),
        max_steps=tc.steps,
        per_device_train_batch_size=batch_size * tc.num_generations,
        gradient_accumulation_steps=1,
        num_generations=tc.num_generations,
        max_completion_length=max_new,
        temperature=tc.temperature,
        learning_rate=tc.lr,
        beta=tc.kl_beta,
        save_strategy="steps",
        save_steps=tc.save_steps,
        save_total_limit=tc.keep_checkpoints,
        logging_steps=tc.logging_steps,
        report_to="none",
        seed=cfg.seed,
        bf16=cuda and torch.cuda.is_bf16_supported(),
        use_cpu=not cuda,
        gradient_checkpointing=tc.gradient_checkpointing,
        use_vllm=tc.use_vllm,
        vllm_mode="colocate",
        remove_unused_columns=False,
        dataloader_num_workers=0,
    )


def checkpoints(out: Path) -> list[Path]:
    """GRPOTrainer's ``checkpoint-N`` folders in ``out``, oldest first."""
    return sorted(
        (p for p in out.glob("checkpoint-*") if p.is_dir() and p.name[11:].isdigit()),
        key=lambda p: int(p.name[11:]),
    )


def save_final(
    trainer: GRPOTrainer,
    tokenizer: PreTrainedTokenizerBase,
    cfg: TuneTranslatorRun,
    out: Path,
    meta: dict,
) -> Path:
    """``adapter/`` (LoRA) and ``final/`` (merged model, or the adapter) + tune_translator.json."""
    tc = cfg.tune_translator
    model = trainer.model
    final = out / "final"
    peft = hasattr(model, "merge_and_unload")
    if peft:
        with atomic_dir(out / "adapter") as tmp:
            model.save_pretrained(str(tmp))
            tokenizer.save_pretrained(str(tmp))
    with atomic_dir(final) as tmp:
        if peft and tc.merge:
            model = model.merge_and_unload()
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        (tmp / META_NAME).write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return final

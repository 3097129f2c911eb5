"""The configuration of ``lira tune-translator`` (``tune_translator.*``), with the run view its
engine reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from arca.config import ArcaRun, name_problem
from lira.config import check, check_at_least, check_lr


@dataclass
class TuneTranslatorConfig:
    """GRPO fine-tuning of one LLM translator of the pool with Arca's reward (``lira
    tune-translator``; beyond the paper). R = 0.1 (alpha s + beta e + gamma p) + delta sim, with
    the composite zeroed for an empty, copied or untranslated output, minus format_weight x the
    format penalty (length ratio, meta-text, echoed source); sim centred by center_sim."""

    translator: str = ""
    """Name of the LLM translator in translation.llm_translators to tune; empty = the first."""
    name: str = ""
    """Translator id of the tuned model in the store; empty = '<translator>-grpo'."""
    arca_checkpoint: str = ""
    """Trained Arca folder that gives the reward; empty = <output_dir>/arca/final."""
    output: str = ""
    """Output folder (checkpoints, final/ model); empty = <output_dir>/tune_translator/<name>."""
    steps: int = 100
    """GRPO optimisation steps."""
    batch_size: int = 4
    """Source texts per step and process (each sampled num_generations times)."""
    num_generations: int = 4
    """Completions sampled per source (the GRPO group; >= 2)."""
    max_new_tokens: int = 0
    """Longest sampled translation, in tokens; 0 = the translator's own max_new_tokens."""
    temperature: float = 0.5
    """Sampling temperature of the policy's completions (0.5: near the pool's greedy decoding, so
    the format penalty sees the echoes greedy outputs make; at 1.0 it almost never fired)."""
    lr: float = 1e-4
    """AdamW learning rate (1e-4 suits the LoRA default; lower it for lora: false)."""
    lora: bool = True
    """Train peft LoRA adapters; false = all weights."""
    lora_r: int = 16
    """LoRA rank."""
    lora_alpha: int = 32
    """LoRA alpha."""
    lora_dropout: float = 0.0
    """LoRA dropout."""
    merge: bool = True
    """final/ = LoRA merged into the base model; false = peft adapter folder naming the base."""
    kl_beta: float = 0.0
    """KL coefficient against the base model (TRL's beta; 0 = no reference model)."""
    alpha: float = 0.0
    """Reward weight of the critic's semantic score (0 = the critic is not run)."""
    beta: float = 0.0
    """Reward weight of the critic's emotional score."""
    gamma: float = 0.0
    """Reward weight of the critic's pragmatic score."""
    delta: float = 1.0
    """Reward weight of the anchor similarity cos(E_lr(x), E_en(y)) of the Arca checkpoint."""
    center_sim: bool = True
    """Subtract the completion's mean anchor similarity to all training sources from sim (a
    generic English sentence, as similar to every source as to its own, then earns ~0)."""
    format_weight: float = 1.0
    """Weight of the format penalty (in [0, 1]) subtracted from the reward."""
    min_length_ratio: float = 0.3
    """Translations shorter than this x the source (characters) are penalised."""
    max_length_ratio: float = 4.0
    """Translations longer than this x the source (characters) are penalised (widen for CJK)."""
    max_sources: int = 0
    """Cap on the training sources (0 = every non-English train source)."""
    use_vllm: bool = False
    """Generate the completions with vLLM (TRL's colocate mode) instead of transformers."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, slower)."""
    save_steps: int = 50
    """Steps between checkpoints (<output>/checkpoint-N, resumable with --resume)."""
    keep_checkpoints: int = 2
    """Checkpoints kept (the oldest are deleted)."""
    logging_steps: int = 10
    """Steps between logged metrics (reward, anchor_sim, format_penalty, KL)."""

    def __post_init__(self) -> None:
        check_at_least(self, steps=1, batch_size=1)
        check(self.num_generations >= 2, "num_generations", "GRPO needs a group of >= 2")
        check(self.max_new_tokens >= 0, "max_new_tokens", "must be >= 0 (0 = the translator's)")
        check(self.temperature > 0, "temperature", "GRPO samples: must be > 0")
        check_lr(self.lr, "lr")
        check_at_least(self, lora_r=1, kl_beta=0)
        if self.name:
            problem = name_problem(self.name)
            check(problem is None, "name", f"{problem}")
        for k in ("alpha", "beta", "gamma", "delta", "format_weight"):
            check(getattr(self, k) >= 0, k, "reward weights must be >= 0")
        check(
            0 < self.min_length_ratio < self.max_length_ratio,
            "min_length_ratio",
            "needs 0 < min_length_ratio < max_length_ratio",
        )
        check(self.max_sources >= 0, "max_sources", "must be >= 0 (0 = all)")
        check_at_least(self, save_steps=1, keep_checkpoints=1, logging_steps=1)


class TuneTranslatorRun(ArcaRun, Protocol):
    """The parts of a run config ``lira tune-translator`` reads (a ``RunConfig`` is one)."""

    tune_translator: TuneTranslatorConfig

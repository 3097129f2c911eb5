"""Reasoning through a frozen LLM: ``reason.*`` (``lira reason``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from lira.config import check, check_model_ref


@dataclass
class ReasonConfig:
    """Reasoning through a frozen LLM fed [g(x); h(y)] (paper 004 §5.1-5.3, ``lira reason``)."""

    llm: str = "demo:smollm2"
    """The frozen causal LM (Qwen/Qwen3-8B in the paper); Arca must be trained with it as h."""
    arca_checkpoint: str = ""
    """Arca checkpoint folder; empty = <output_dir>/arca/final."""
    tasks: list[str] = field(default_factory=lambda: ["mgsm", "xcsqa"])
    """Reasoning tasks: mgsm, xcsqa."""
    mgsm_path: str = "demo"
    """Folder with mgsm_<lang>.tsv files ('demo' = the hand-written files shipped for tests)."""
    xcsqa_path: str = "demo"
    """Folder with xcsqa_<lang>.jsonl files ('demo' = shipped hand-written files)."""
    languages: list[str] = field(default_factory=lambda: ["de", "es"])
    """Languages evaluated."""
    modes: list[str] = field(
        default_factory=lambda: ["direct", "translate-en", "soft_only", "both"]
    )
    """direct / translate-en are the baselines; both = LiRA."""
    engine: Literal["transformers", "vllm"] = "transformers"
    """transformers: ``generate(inputs_embeds=...)``; vllm: ``prompt_embeds`` (vLLM >= 0.9)."""
    tensor_parallel_size: int = 1
    """GPUs per vLLM engine (engine: vllm)."""
    max_new_tokens: int = 64
    """Generation limit per answer."""
    batch_size: int = 4
    """Prompts per generate call."""
    max_items: int = 0
    """Cap on items per language and task (0 = all)."""
    bootstrap: int = 200
    """Bootstrap resamples for the accuracy intervals."""

    def __post_init__(self) -> None:
        check_model_ref(self.llm, "llm")
        bad = [t for t in self.tasks if t not in ("mgsm", "xcsqa")]
        check(not bad, "tasks", f"unknown {bad}; choose from ['mgsm', 'xcsqa']")
        known = ("direct", "translate-en", "soft_only", "both")
        bad = [m for m in self.modes if m not in known]
        check(not bad, "modes", f"unknown {bad}; choose from {list(known)}")
        check(self.max_new_tokens >= 1, "max_new_tokens", "must be >= 1")
        check(self.batch_size >= 1, "batch_size", "must be >= 1")
        check(self.max_items >= 0, "max_items", "must be >= 0 (0 = all)")

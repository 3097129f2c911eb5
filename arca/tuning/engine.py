"""``lira tune-translator``: GRPO fine-tuning of a pool translator on Arca's reward (beyond the paper).

The reward is :mod:`arca.tuning.reward`'s, the TRL wiring :mod:`arca.tuning.grpo`'s.

Training sources: the non-English *training* sources of the configured data (the ones
``lira translate`` translates; held-out sources are never seen), truncated to
``translation.source_max_chars`` like the pool does. LoRA through peft by default.

Output ``<output>/`` (default ``<output_dir>/tune_translator/<name>``): GRPOTrainer's
``checkpoint-N`` folders (``--resume`` continues from the last one), ``adapter/`` (the LoRA
adapter), ``final/`` (the merged model + tokenizer, or the adapter folder with ``merge: false``;
with ``tune_translator.json`` describing the run), ``translator.yaml`` (the pool entry of the
tuned translator) and ``summary.json``. The tuned translator keeps the base translator's
decoding settings under a new id (``<translator>-grpo``) and model path, so its store rows
never mix with the base translator's (the store key holds both): add it to
``translation.llm_translators`` and both candidate sets coexist.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from contextlib import nullcontext
from pathlib import Path

import torch
import yaml

from arca.model import load_arca
from arca.tuning.config import TuneTranslatorRun
from arca.tuning.grpo import (
    FORMAT,
    build_dataset,
    checkpoints,
    grpo_config,
    line_end_stops,
    load_policy,
    save_final,
)
from arca.tuning.reward import AnchorReward, critic_scorer
from lira.data.splits import load_splits
from lira.errors import MissingFileError, UserInputError
from lira.jsonio import write_json
from lira.prompts import is_completion
from lira.translation.critic import build_critic
from lira.translation.scheduling import check_source
from lira.translation.tuning import base_translator, output_folder, tuned_translator

log = logging.getLogger(__name__)


def training_sources(cfg: TuneTranslatorRun) -> list[tuple[str, str]]:
    """(text, lang) of the non-English training sources, deduplicated, truncated like the pool."""

    seen: dict[tuple[str, str], None] = {}
    for rec in load_splits(cfg.data).train_sources:
        if rec.lang == "en" or not rec.text.strip():
            continue
        text = check_source(rec.text, cfg.translation.source_max_chars)[0]
        seen.setdefault((text, rec.lang), None)
    out = list(seen)
    cap = cfg.tune_translator.max_sources
    return out[:cap] if cap else out


def arca_path(cfg: TuneTranslatorRun) -> Path:
    """``tune_translator.arca_checkpoint`` or ``<output_dir>/arca/final``; must exist."""
    ref = cfg.tune_translator.arca_checkpoint
    path = Path(ref) if ref else Path(cfg.output_dir) / "arca" / "final"
    if not path.is_dir():
        raise MissingFileError(
            f"Arca checkpoint {path} not found; train one with `lira arca CONFIG` or set "
            "tune_translator.arca_checkpoint"
        )
    return path


def run_tune_translator(cfg: TuneTranslatorRun, *, resume: bool = False) -> dict[str, object]:
    """Engine of ``lira tune-translator``: GRPO on Arca's reward; writes ``<output>/final``
    (``resume``: continue from the latest checkpoint-N)."""
    from peft import LoraConfig
    from trl import GRPOTrainer

    tc = cfg.tune_translator
    base = base_translator(cfg)
    tuned = tuned_translator(cfg)
    out = output_folder(cfg)
    arca_dir = arca_path(cfg)
    sources = training_sources(cfg)
    if not sources:
        raise UserInputError(
            "tune-translator: the configured data has no non-English training source "
            f"(data.train_languages = {cfg.data.train_languages})"
        )
    batch = min(tc.batch_size, len(sources))
    if batch < tc.batch_size:
        log.warning(
            "only %d training sources: batch_size %d -> %d", len(sources), tc.batch_size, batch
        )
    out.mkdir(parents=True, exist_ok=True)
    found = checkpoints(out)
    if resume and not found:
        log.warning("--resume: no checkpoint-N in %s; starting fresh", out)
    if not resume:
        for p in found:  # a fresh run must not resume or mix with an older one's checkpoints
            shutil.rmtree(p)
    t0 = time.perf_counter()
    log.info("tune-translator: %s -> %s on %d sources, reward from %s", base.name, tuned.name,
             len(sources), arca_dir)  # fmt: skip
    arca = load_arca(arca_dir)
    if torch.cuda.is_available():
        arca.to("cuda")
    critic = None
    if any(getattr(tc, k) > 0 for k in ("alpha", "beta", "gamma")):
        built = build_critic(cfg.translation.critic, cache_dir=cfg.models.cache_dir)
        if built is None:
            log.warning("critic weights > 0 but translation.critic.kind is none: neutral 5.5")
        else:
            critic = critic_scorer(built)
    reward = AnchorReward(
        arca,
        tc,
        critic,
        reference_sources=[text for text, _ in sources],
        first_line_only=is_completion(base.prompt_version),
    )
    model, tokenizer = load_policy(base, cfg.models.cache_dir)
    peft_config = None
    if tc.lora:
        peft_config = LoraConfig(
            r=tc.lora_r,
            lora_alpha=tc.lora_alpha,
            lora_dropout=tc.lora_dropout,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )
    # TRL reads the stop ids when the trainer is built: a completion prompt stops at its line
    stops = (
        line_end_stops(model, tokenizer) if is_completion(base.prompt_version) else nullcontext()
    )
    with stops:
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=grpo_config(cfg, out, batch),
            train_dataset=build_dataset(sources, base),
            processing_class=tokenizer,
            peft_config=peft_config,
        )
    result = trainer.train(resume_from_checkpoint=True if resume and found else None)
    meta = {
        "format": FORMAT,
        "name": tuned.name,
        "base_translator": dataclasses.asdict(base),
        "arca_checkpoint": str(arca_dir),
        "tune_translator": dataclasses.asdict(tc),
        "steps": int(trainer.state.global_step),
        "lora": tc.lora,
        "merged": bool(tc.lora and tc.merge),
        "sources": len(sources),
    }
    final = save_final(trainer, tokenizer, cfg, out, meta)
    (out / "translator.yaml").write_text(
        "# add to translation.llm_translators (and raise pass_at_k) to use the tuned model\n"
        + yaml.safe_dump([dataclasses.asdict(tuned)], sort_keys=False),
        encoding="utf-8",
    )
    logs = [h for h in trainer.state.log_history if "reward" in h]
    summary = {
        "translator": dataclasses.asdict(tuned),
        "base": base.name,
        "final": str(final),
        "steps": int(trainer.state.global_step),
        "train_loss": float(result.training_loss),
        "reward_first": logs[0]["reward"] if logs else None,
        "reward_last": logs[-1]["reward"] if logs else None,
        "log": logs,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    write_json(out / "summary.json", summary)
    log.info(
        "tune-translator: %d steps in %.0fs; model %s; add %s/translator.yaml's entry to "
        "translation.llm_translators to use it", summary["steps"], summary["seconds"], final, out,
    )  # fmt: skip
    return summary

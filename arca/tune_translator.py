"""``lira tune-translator``: GRPO fine-tuning of a pool translator on Arca's reward (beyond the paper).

Paper 004 trains the Actor to *pick* among fixed candidates with the composite reward of
Eq. 7. Here the same reward trains the *translator* that produces them: TRL's ``GRPOTrainer``
samples ``num_generations`` English translations per training source (the prompt of
:mod:`lira.prompts`, as ``lira translate`` uses it) and each completion y of a source x gets

    R(x, y) = [not empty, not a copy] * (0.1 (alpha s + beta e + gamma p) + delta sim(x, y))
              - format_weight * penalty(x, y)

- sim(x, y) = cos(E_lr(x), E_en(y)) in the anchor space of a trained Arca checkpoint (the
  label-free core; :func:`anchor_similarity`, the quantity Arca's Actor sees as sim_k); with
  ``center_sim`` (default) minus the completion's mean similarity to all training sources,
  sim(x, y) - mean_x' cos(E_lr(x'), E_en(y)) = <e_y, e_x - mu> with unit vectors e and mu the
  mean unit E_lr of the training sources. The plain cosine cannot tell a translation from a
  generic English question (the third tuning run on xquad_minilm learned "What is the purpose
  of the article?"-style outputs: such a question is as close to every source as to its own);
  centred, the generic question earns ~0 (measured on held-out questions: the gold English
  beats that question on 66% of sources plain, 95% centred);
- (s, e, p): the configured critic's scores of the cleaned completion, computed only when one
  of alpha, beta, gamma is > 0 (all 0 by default: one critic call per sample is slow);
- penalty in [0, 1] (:func:`format_check`): the completion is cleaned like a pool candidate
  (:func:`lira.translation.cleanup.clean_translation`); an empty result or a copy of the source
  (the whole source, or a fragment of it at least COPY_MIN_SHARE of its length, e.g. a copy cut
  off by max_new_tokens), or a completion of >= MIN_WORDS words more than SOURCE_WORD_SHARE of
  which are source words (a paraphrase in the source language), gets penalty 1 and no composite
  at all (otherwise a policy could echo the source, which an embedding space may find
  "similar"); meta-text that the cleanup removed (preambles, notes) adds 0.5, a source echoed
  inside the translation adds 0.5, and a length ratio
  len(y) / len(x) (characters) outside [min_length_ratio, max_length_ratio] adds
  min(1, |log2(ratio / nearest bound)|).

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
import json
import logging
import math
import re
import shutil
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import torch
import torch.nn.functional as F
import yaml
from datasets import Dataset
from torch import Tensor, nn
from transformers import PreTrainedTokenizerBase

from arca.config import TuneTranslatorConfig, TuneTranslatorRun
from arca.losses import composite_reward
from arca.model import ArcaModel, load_arca
from lira.checkpoint import atomic_dir, write_json
from lira.data.splits import load_splits
from lira.errors import MissingFileError, UserInputError
from lira.models.generators import load_causal_lm
from lira.prompts import translation_prompt
from lira.translation.cleanup import clean_translation
from lira.translation.config import TranslatorConfig
from lira.translation.critic import Critic, build_critic
from lira.translation.runner import check_source
from lira.translation.translators import chat_messages
from lira.translation.tuning import base_translator, output_folder, tuned_translator
from lira.translation.types import NEUTRAL_SCORE

if TYPE_CHECKING:  # trl loads only when GRPO runs (it is heavy)
    from trl import GRPOConfig, GRPOTrainer

log = logging.getLogger(__name__)

FORMAT = "lira-tuned-translator/1"
META_NAME = "tune_translator.json"
META_PENALTY = 0.5
"""Penalty of a completion from which the cleanup removed meta-text (words, not just quotes)."""
ECHO_PENALTY = 0.5
"""Penalty of a completion that contains the whole source (besides a translation)."""
COPY_MIN_SHARE = 0.5
"""A completion found inside the source and at least this share of its length is a copy (the
first tuning run on xquad_minilm learned such truncated copies when only exact ones counted)."""
SOURCE_WORD_SHARE = 0.75
"""A completion of at least MIN_WORDS words, more than this share of them words of the source,
was not translated (a paraphrase in the source language; numbers do not count as words)."""
MIN_WORDS = 3
"""Completions with fewer words are not checked for source words (a name may be all there is)."""
MIN_ECHO_CHARS = 8
"""Sources shorter than this (normalised) are not checked for an echo (too many false hits)."""


# ------------------------------------------------------------------------------ format penalty
def normalize(text: str) -> str:
    """Case-folded text without punctuation and with single spaces (for copy detection)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(" " if unicodedata.category(c)[0] in "PSZ" else c for c in text)
    return re.sub(r"\s+", " ", text).strip()


@dataclass
class FormatCheck:
    """The cleaned completion and its format penalty; ``hard``: empty, copied or untranslated."""

    text: str
    penalty: float
    reasons: tuple[str, ...] = ()

    @property
    def hard(self) -> bool:
        """True when the completion earns no composite reward (empty, copied, untranslated)."""
        return bool({"empty", "copy", "untranslated"} & set(self.reasons))


def words(normalized: str) -> list[str]:
    """The words of a :func:`normalize`-d text, numbers left out (for the source-word check)."""
    return [w for w in normalized.split() if not w.isdigit()]


def format_check(
    source: str, completion: str, min_ratio: float = 0.3, max_ratio: float = 4.0
) -> FormatCheck:
    """Clean ``completion`` like a pool candidate and rate its form (see the module docstring)."""
    cleaned, removed = clean_translation(completion or "")
    if not normalize(cleaned):
        return FormatCheck("", 1.0, ("empty",))
    src, out = normalize(source), normalize(cleaned)
    if out == src or (len(out) >= COPY_MIN_SHARE * len(src) and out in src):
        return FormatCheck(cleaned, 1.0, ("copy",))
    out_words, src_words = words(out), set(words(src))
    shared = sum(w in src_words for w in out_words)
    if len(out_words) >= MIN_WORDS and shared > SOURCE_WORD_SHARE * len(out_words):
        return FormatCheck(cleaned, 1.0, ("untranslated",))
    penalty, reasons = 0.0, []
    if any(ch.isalnum() for ch in removed):  # quotes alone are harmless
        penalty += META_PENALTY
        reasons.append("meta")
    if len(src) >= MIN_ECHO_CHARS and src in out:
        penalty += ECHO_PENALTY
        reasons.append("echo")
    ratio = len(cleaned) / max(len(source.strip()), 1)
    bound = min(max(ratio, min_ratio), max_ratio)
    if ratio != bound:
        penalty += min(1.0, abs(math.log2(ratio / bound)))
        reasons.append("short" if ratio < bound else "long")
    return FormatCheck(cleaned, min(penalty, 1.0), tuple(reasons))


# ------------------------------------------------------------------------------ reward
@torch.no_grad()
def anchor_similarity(arca: ArcaModel, sources: Sequence[str], outputs: Sequence[str]) -> Tensor:
    """cos(E_lr(x_i), E_en(y_i)) per pair in Arca's anchor space (sim_k of Eq. 6-7): [N] on CPU.

    E_lr = the anchor of g's path, E_en = the fixed target T(y) of h (``objective: d1``) or
    A(P_S(h_tok(y))) through the shared Adaptor (``shared``).
    """
    if not sources:
        return torch.zeros(0)
    e_lr = arca.anchor_lr(arca.pooled_sources(list(sources)))
    e_en = arca.anchor_en(arca.english_inputs(list(outputs)))
    return F.cosine_similarity(e_lr.float(), e_en.to(e_lr.device).float(), dim=-1).cpu()


ScoreFn = Callable[[list[str], list[str], str], list[tuple[float, float, float] | None]]
"""(sources, cleaned translations, language) -> critic (s, e, p) per pair, None = no score."""


def critic_scorer(critic: Critic) -> ScoreFn:
    """A :data:`ScoreFn` around a :class:`lira.translation.critic.Critic`."""

    def score(
        sources: list[str], outputs: list[str], lang: str
    ) -> list[tuple[int, int, int] | None]:
        return [r.scores for r in critic.score(sources, outputs, lang)]

    return score


class RewardParts(TypedDict):
    """One completion's reward and its parts (:meth:`AnchorReward.score`)."""

    reward: float
    sim: float
    margin: float
    scores: list[float]
    penalty: float
    reasons: list[str]
    hard: bool
    text: str


class AnchorReward:
    """TRL reward function: R = 0.1 (alpha s + beta e + gamma p) + delta sim - w penalty.

    Called by ``GRPOTrainer`` with the prompts, the completions and the dataset columns
    ``source`` and ``lang`` (repeated per generation). :meth:`score` does the work on plain
    strings; :meth:`__call__` adapts TRL's arguments and logs ``anchor_sim`` (the plain
    cosine), ``anchor_margin`` (the centred one), ``format_penalty`` and ``no_composite``
    (share of completions with no composite reward). ``reference_sources``: the training
    sources whose mean unit anchor mu centres sim (required with ``cfg.center_sim``).
    """

    __name__ = "arca_anchor"  # TRL's name of the reward in its logs

    def __init__(
        self,
        arca: ArcaModel,
        cfg: TuneTranslatorConfig,
        critic: ScoreFn | None = None,
        reference_sources: Sequence[str] = (),
    ) -> None:
        self.arca, self.cfg, self.critic = arca, cfg, critic
        self._e_lr: dict[str, Tensor] = {}  # sources are a fixed set: memoise E_lr
        self.mean_anchor: Tensor | None = None
        if cfg.center_sim:
            if not reference_sources:
                raise ValueError("tune_translator.center_sim needs the training sources")
            self.mean_anchor = self._anchors(list(reference_sources)).mean(0)

    @torch.no_grad()
    def _anchors(self, sources: list[str]) -> Tensor:
        """Unit E_lr per source, memoised (the sources are a fixed set)."""
        arca = self.arca
        todo = list(dict.fromkeys(s for s in sources if s not in self._e_lr))
        for i in range(0, len(todo), 64):
            chunk = todo[i : i + 64]
            e = F.normalize(arca.anchor_lr(arca.pooled_sources(chunk)).float().cpu(), dim=-1)
            self._e_lr.update(zip(chunk, e))
        return torch.stack([self._e_lr[s] for s in sources])

    def uses_critic(self) -> bool:
        """True when a critic weight is > 0 (the critic then scores every sample)."""
        return any(getattr(self.cfg, k) > 0 for k in ("alpha", "beta", "gamma"))

    @torch.no_grad()
    def similarity(self, sources: Sequence[str], outputs: Sequence[str]) -> tuple[Tensor, Tensor]:
        """(plain, centred) sim per pair: :func:`anchor_similarity` and it minus <e_y, mu>
        (centred = plain without ``center_sim``); E_lr memoised, no growing E_en memo."""
        if not sources:
            return torch.zeros(0), torch.zeros(0)
        arca = self.arca
        e_lr = self._anchors(list(sources))
        e_en = arca.anchor_en(arca.english_inputs(list(outputs)))
        targets = getattr(arca, "_targets", None)
        if isinstance(targets, dict):
            targets.clear()  # every sample is new text: do not keep h's targets of all of them
        e_en = F.normalize(e_en.float().cpu(), dim=-1)
        plain = (e_lr * e_en).sum(-1)
        if self.mean_anchor is None:
            return plain, plain
        return plain, plain - e_en @ self.mean_anchor

    def score(
        self, sources: Sequence[str], langs: Sequence[str], outputs: Sequence[str]
    ) -> list[RewardParts]:
        """Per completion: reward, sim, margin, scores, penalty, reasons, hard and the text."""
        c = self.cfg
        checks = [
            format_check(x, y, c.min_length_ratio, c.max_length_ratio)
            for x, y in zip(sources, outputs)
        ]
        live = [i for i, ch in enumerate(checks) if not ch.hard]
        plain, sims = torch.zeros(len(checks)), torch.zeros(len(checks))
        if live and c.delta > 0:
            plain[live], sims[live] = self.similarity(
                [sources[i] for i in live], [checks[i].text for i in live]
            )
        scores = torch.full((len(checks), 3), NEUTRAL_SCORE)
        if live and self.critic is not None and self.uses_critic():
            for lang in dict.fromkeys(langs[i] for i in live):
                idx = [i for i in live if langs[i] == lang]
                got = self.critic([sources[i] for i in idx], [checks[i].text for i in idx], lang)
                for i, s in zip(idx, got):
                    if s is not None and all(math.isfinite(float(v)) for v in s):
                        scores[i] = torch.tensor([float(v) for v in s])
        composite = composite_reward(scores, sims, c.alpha, c.beta, c.gamma, c.delta)
        out: list[RewardParts] = []
        for i, ch in enumerate(checks):
            r = (0.0 if ch.hard else float(composite[i])) - c.format_weight * ch.penalty
            out.append({
                "reward": r, "sim": float(plain[i]), "margin": float(sims[i]),
                "scores": scores[i].tolist(),
                "penalty": ch.penalty, "reasons": list(ch.reasons), "hard": ch.hard,
                "text": ch.text,
            })  # fmt: skip
        return out

    def __call__(
        self,
        prompts: list[str | list[dict[str, str]]],
        completions: list[str | list[dict[str, str]]],
        source: list[str],
        lang: list[str],
        **kwargs: object,
    ) -> list[float]:
        """TRL's reward-function interface: one float per completion."""
        outputs = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
        parts = self.score(source, lang, outputs)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and parts:
            live = [p for p in parts if not p["hard"]]
            if live:
                log_metric("anchor_sim", sum(p["sim"] for p in live) / len(live))
                log_metric("anchor_margin", sum(p["margin"] for p in live) / len(live))
            log_metric("format_penalty", sum(p["penalty"] for p in parts) / len(parts))
            log_metric("no_composite", 1 - len(live) / len(parts))
        return [p["reward"] for p in parts]


# ------------------------------------------------------------------------------ the run
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


def build_dataset(sources: Sequence[tuple[str, str]], translator: TranslatorConfig) -> Dataset:
    """The GRPO dataset: a chat prompt (the pool's translation prompt) + ``source`` + ``lang``."""
    return Dataset.from_list([
        {
            "prompt": chat_messages(translation_prompt(text, lang, translator.prompt_version)),
            "source": text,
            "lang": lang,
        }
        for text, lang in sources
    ])  # fmt: skip


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


def _load_policy(
    translator: TranslatorConfig, cache_dir: str = ""
) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """(model, tokenizer) of the translator's weights, as the transformers backend loads them."""
    dtype = "auto" if torch.cuda.is_available() else torch.float32  # bf16 is slow on CPUs
    return load_causal_lm(translator.model, cache_dir, dtype=dtype)


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


def _checkpoints(out: Path) -> list[Path]:
    return sorted(
        (p for p in out.glob("checkpoint-*") if p.is_dir() and p.name[11:].isdigit()),
        key=lambda p: int(p.name[11:]),
    )


def _save_final(
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


def run_tune_translator(cfg: TuneTranslatorRun, *, resume: bool = False) -> dict[str, Any]:
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
        log.warning("only %d training sources: batch_size %d -> %d", len(sources), tc.batch_size,
                    batch)  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    found = _checkpoints(out)
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
    reward = AnchorReward(arca, tc, critic, reference_sources=[text for text, _ in sources])
    model, tokenizer = _load_policy(base, cfg.models.cache_dir)
    peft_config = None
    if tc.lora:
        peft_config = LoraConfig(
            r=tc.lora_r,
            lora_alpha=tc.lora_alpha,
            lora_dropout=tc.lora_dropout,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )
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
    final = _save_final(trainer, tokenizer, cfg, out, meta)
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

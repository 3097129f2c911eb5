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
built from it too. Engines are named ``"module:function"`` and imported when their stage runs,
so ``lira --help`` starts without torch.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import time
from argparse import Namespace
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arca.config import ArcaConfig
from evaluators.config import EvalConfig
from lasr.config import LaSRConfig
from lira.baselines.config import BaselinesConfig, flat_baselines
from lira.checkpoint import CheckpointError, write_json
from lira.config import save_config, to_dict
from lira.errors import LiRAError
from lira.reasoning.config import ReasonConfig
from lira.translation.config import TranslationConfig
from pipeline.runconfig import RunConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stage:
    """One stage of the main job and the ``lira`` subcommand that runs it alone."""

    command: str
    """The subcommand (``lira <command> CONFIG``)."""
    engine: str
    """``"module:function"`` taking ``(RunConfig, argparse.Namespace)``."""
    sections: tuple[str, ...]
    """Config sections whose change re-runs this stage (and every later one)."""
    config: type
    """The config section ``lira <command> --help`` documents."""
    summary: str
    """One line for ``--help``."""


STAGES: dict[str, Stage] = {
    "translate": Stage("translate", "arca.engine:run_translate",
                       ("data", "translation"), TranslationConfig,
                       "fill the translation store with K candidates per source text and critic scores"),
    "arca": Stage("arca", "arca.engine:run_arca", ("models", "arca"), ArcaConfig,
                  "train Arca (encoder g, Adaptor, Actor)"),
    "lasr": Stage("lasr", "lasr.engine:run_lasr", ("lasr",), LaSRConfig,
                  "fine-tune LaSR (fusion head, gate and Arca's Adaptor) end to end"),
    "baselines": Stage("baseline", "lira.baselines.engine:run_baselines", ("baselines",),
                       BaselinesConfig, "train the baselines of papers 000-003 on the same data"),
    "compare": Stage("compare", "evaluators.compare:run_compare", ("eval",), EvalConfig,
                     "evaluate the backbone, LiRA and every baseline on the same scenarios"),
    "reason": Stage("reason", "pipeline.reason:run_reason", ("reason",), ReasonConfig,
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


def stage_fingerprint(cfg: RunConfig, stage: str) -> str:
    """Hash of every config section that ``stage`` and the stages before it read."""
    sections: list[str] = ["seed"]
    for name in ORDER[: ORDER.index(stage) + 1]:
        sections += STAGES[name].sections
    data = to_dict(cfg)
    data["baselines"] = flat_baselines(cfg.baselines)  # hashed flat, as before
    blob = json.dumps({k: data[k] for k in sections}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def load_engine(target: str) -> Any:
    """The function a ``"module:function"`` engine name refers to."""
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


def _read_marker(path: Path) -> dict[str, Any]:
    """A stage marker's content; {} when absent or unreadable (the stage then runs again)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, OSError) as e:
        log.warning("stage marker %s is unreadable (%s); the stage runs again", path, e)
        return {}
    return data if isinstance(data, dict) else {}


def run_pipeline(cfg: RunConfig, args: Namespace | None = None) -> dict[str, Any]:
    """Run the configured stages in order, skipping those already finished with this config.

    Under a launcher every process runs the stages (the trainers share the work), except
    :data:`ONE_PROCESS`, which the main process runs alone; the main process writes the run's
    files."""
    out = Path(cfg.output_dir)
    main = main_process()
    (out / "stages").mkdir(parents=True, exist_ok=True)
    record = out / "config.yaml"
    previous = record.read_bytes() if record.is_file() else None
    if main:
        save_config(cfg, record)
    args = args or Namespace(resume=False, import_file=None, translator=None, methods=None)
    timings: dict[str, Any] = {}
    ran = 0
    from lira.models.devices import release_memory  # torch: imported when a stage runs

    for stage in [s for s in ORDER if s in cfg.stages]:
        marker = out / "stages" / f"{stage}.json"
        fingerprint = stage_fingerprint(cfg, stage)
        done = _read_marker(marker)
        if done.get("fingerprint") == fingerprint and not done.get("pending"):
            log.info("stage %s: already done with this config, skipped", stage)
            timings[stage] = "skipped"
            continue
        if stage in ONE_PROCESS and not main:
            log.info("stage %s: left to the main process (it does not split its work)", stage)
            timings[stage] = "main process"
            continue
        if done.get("pending"):
            log.info("stage %s: %s item(s) failed last time; running it again", stage,
                     done["pending"])  # fmt: skip
        log.info("stage %s: starting", stage)
        start = time.perf_counter()
        try:
            result = load_engine(STAGES[stage].engine)(cfg, args)
        except LiRAError as e:
            # Refused (e.g. --resume onto checkpoints of another config, the message names the
            # changed keys and the fix; a damaged checkpoint; nothing translated) before this
            # run finished a stage: config.yaml goes back to the config of the outputs that are
            # still there.
            if not ran and previous is not None and main:
                record.write_bytes(previous)
            if isinstance(e, CheckpointError):
                raise CheckpointError(f"stage {stage}: {e}") from e
            raise
        ran += 1
        release_memory()  # the stage's models, before the next stage loads its own
        seconds = round(time.perf_counter() - start, 1)
        pending = result.get("pending", 0) if isinstance(result, dict) else 0
        if main:
            write_json(marker, {"stage": stage, "fingerprint": fingerprint, "seconds": seconds,
                                "pending": pending})  # fmt: skip
        log.info("stage %s: done in %.1f s", stage, seconds)
        timings[stage] = seconds
    if main:
        write_json(out / "run_summary.json", {"stages": timings})
    return timings

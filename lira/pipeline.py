"""The main job (``lira run``): translate -> Arca -> LaSR -> baselines -> compare [-> reason].

Each stage writes under ``output_dir`` and, when it finishes, a marker
``<output_dir>/stages/<stage>.json`` holding a hash of the configuration the stage depends on.
Re-running the same config skips finished stages; changing a section re-runs the stage that
reads it and every stage after it. A translate stage that left retryable failures (a
translator or critic request that failed) records them as ``pending`` and runs again on the
next ``lira run``, which redoes only those rows. An unreadable marker means "not done". Stage engines are imported lazily so the core package never
imports ``arca``/``lasr`` at module level (data flows lira <- arca <- lasr).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import time
from argparse import Namespace
from pathlib import Path
from typing import Any

from lira.checkpoint import write_json
from lira.config import RunConfig, save_config, to_dict

log = logging.getLogger(__name__)

# stage -> (engine, config sections whose change invalidates the stage)
ENGINES: dict[str, tuple[str, tuple[str, ...]]] = {
    "translate": ("lira.translation.runner:run_translate", ("data", "translation")),
    "arca": ("arca.trainer:run_arca", ("models", "arca")),
    "lasr": ("lasr.trainer:run_lasr", ("lasr",)),
    "baselines": ("lira.baselines.trainer:run_baselines", ("baselines",)),
    "compare": ("evaluators.compare:run_compare", ("eval",)),
    "reason": ("lira.reasoning.runner:run_reason", ("reason",)),
}
ORDER = list(ENGINES)


def stage_fingerprint(cfg: RunConfig, stage: str) -> str:
    """Hash of every config section that ``stage`` and the stages before it read."""
    sections: list[str] = ["seed"]
    for name in ORDER[: ORDER.index(stage) + 1]:
        sections += ENGINES[name][1]
    data = to_dict(cfg)
    blob = json.dumps({k: data[k] for k in sections}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _engine(stage: str) -> Any:
    module, func = ENGINES[stage][0].split(":")
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
    """Run the configured stages in order, skipping those already finished with this config."""
    out = Path(cfg.output_dir)
    (out / "stages").mkdir(parents=True, exist_ok=True)
    save_config(cfg, out / "config.yaml")
    args = args or Namespace(resume=False, import_file=None, translator=None, methods=None)
    timings: dict[str, Any] = {}
    for stage in [s for s in ORDER if s in cfg.stages]:
        marker = out / "stages" / f"{stage}.json"
        fingerprint = stage_fingerprint(cfg, stage)
        done = _read_marker(marker)
        if done.get("fingerprint") == fingerprint and not done.get("pending"):
            log.info("stage %s: already done with this config, skipped", stage)
            timings[stage] = "skipped"
            continue
        if done.get("pending"):
            log.info("stage %s: %s item(s) failed last time; running it again", stage,
                     done["pending"])  # fmt: skip
        log.info("stage %s: starting", stage)
        start = time.perf_counter()
        result = _engine(stage)(cfg, args)
        seconds = round(time.perf_counter() - start, 1)
        pending = result.get("pending", 0) if isinstance(result, dict) else 0
        write_json(marker, {"stage": stage, "fingerprint": fingerprint, "seconds": seconds,
                            "pending": pending})  # fmt: skip
        log.info("stage %s: done in %.1f s", stage, seconds)
        timings[stage] = seconds
    write_json(out / "run_summary.json", {"stages": timings})
    return timings

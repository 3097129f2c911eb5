"""The main job (``lira run``): translate -> Arca -> LaSR -> baselines -> compare [-> reason].

Each stage writes under ``output_dir`` and, when it finishes, a marker
``<output_dir>/stages/<stage>.json`` holding a hash of the configuration the stage depends on.
Re-running the same config skips finished stages; changing a section re-runs the stage that
reads it and every stage after it. Stage engines are imported lazily so the core package never
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
        if marker.is_file() and json.loads(marker.read_text())["fingerprint"] == fingerprint:
            log.info("stage %s: already done with this config, skipped", stage)
            timings[stage] = "skipped"
            continue
        log.info("stage %s: starting", stage)
        start = time.perf_counter()
        _engine(stage)(cfg, args)
        seconds = round(time.perf_counter() - start, 1)
        write_json(marker, {"stage": stage, "fingerprint": fingerprint, "seconds": seconds})
        log.info("stage %s: done in %.1f s", stage, seconds)
        timings[stage] = seconds
    write_json(out / "run_summary.json", {"stages": timings})
    return timings

"""Run fingerprints: which config a checkpoint was trained with.

Every checkpoint of the Arca, LaSR and baseline trainers holds its run fingerprint
(:data:`FINGERPRINT_FILE`, :func:`run_fingerprint`: the config values that shaped it);
``--resume`` continues a checkpoint only when it matches the config (:func:`check_fingerprint`),
and a fresh run first removes a previous run's checkpoints (:func:`clear_previous_run`).
The ``models.*`` and ``translation.*`` values that count are picked by :func:`models_fields` and
:func:`translation_fields`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from lira.checkpoint.folders import clean_stale, step_dirs
from lira.errors import CheckpointError

if TYPE_CHECKING:
    from lira.translation.config import ModelsRun, PoolRun

log = logging.getLogger(__name__)

FINGERPRINT_FILE = "run_fingerprint.json"
"""Written into every checkpoint: the config values that shaped the training it holds."""
FINGERPRINT_FORMAT = "lira-fingerprint/1"
_RUNTIME_KEYS = frozenset(
    {
        "base_url",
        "api_key_env",
        "batch_size",
        "max_concurrency",
        "timeout_s",
        "max_retries",
        "tensor_parallel_size",
    }
)
"""Translator / critic fields that change how fast candidates come, not which ones."""


def _flatten(obj: object, prefix: str, out: dict[str, object]) -> dict[str, object]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, (list, tuple)) and any(isinstance(v, dict) for v in obj):
        for i, v in enumerate(obj):
            _flatten(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = list(obj) if isinstance(obj, tuple) else obj
    return out


def run_fingerprint(
    stage: str, sections: Mapping[str, object], skip: Iterable[str] = ()
) -> dict[str, object]:
    """``{"format", "stage", "hash", "config"}`` of the config values that shape ``stage``.

    ``sections`` maps a name to a config dataclass or mapping; ``config`` is the flattened
    ``{dotted key: value}`` (minus the dotted keys in ``skip``), ``hash`` a short digest of it.
    """
    flat: dict[str, object] = {}
    for name, sec in sections.items():
        _flatten(asdict(sec) if hasattr(sec, "__dataclass_fields__") else sec, name, flat)
    skipped = set(skip)
    flat = {k: v for k, v in sorted(flat.items()) if k not in skipped}
    blob = json.dumps(flat, sort_keys=True, default=str)
    digest = hashlib.sha256(blob.encode()).hexdigest()[:16]
    return {"format": FINGERPRINT_FORMAT, "stage": stage, "hash": digest, "config": flat}


def models_fields(cfg: ModelsRun) -> dict[str, object]:
    """``models.*`` without the fields that only say where models are cached."""
    d = asdict(cfg.models)
    for k in ("cache_dir", "encoder_cache"):
        d.pop(k, None)
    return d


def translation_fields(cfg: PoolRun) -> dict[str, object]:
    """The ``translation.*`` values that decide the training candidates and their scores: the
    active translators (pass@k) and the critic, without endpoints, keys and batch sizes."""
    tc = cfg.translation

    def plain(obj: object) -> dict[str, object]:
        return {k: v for k, v in asdict(obj).items() if k not in _RUNTIME_KEYS}

    return {
        "pass_at_k": tc.pass_at_k,
        "num_candidates": tc.num_candidates,
        "store": tc.store,
        "source_max_chars": tc.source_max_chars,
        "active": [plain(t) for t in tc.active_translators()],
        "critic": plain(tc.critic),
    }


def config_fingerprint(
    stage: str,
    cfg: PoolRun,
    sections: Sequence[str],
    skip: Iterable[str] = (),
    **extra: object,
) -> dict[str, object]:
    """The run fingerprint (:func:`lira.checkpoint.fingerprint.run_fingerprint`) of ``stage`` over
    the named ``sections`` of ``cfg`` (``models`` less its cache settings, ``translation`` less its
    runtime fields, any other by name) and the ``extra`` sections given as values."""
    parts: dict[str, object] = {}
    for name in sections:
        if name == "models":
            parts[name] = models_fields(cfg)
        elif name == "translation":
            parts[name] = translation_fields(cfg)
        else:
            parts[name] = getattr(cfg, name)
    return run_fingerprint(stage, {**parts, **extra}, tuple(skip))


def write_fingerprint(folder: str | Path, fingerprint: Mapping[str, object]) -> None:
    """Store ``fingerprint`` in a checkpoint folder being written (inside ``atomic_dir``)."""
    (Path(folder) / FINGERPRINT_FILE).write_text(
        json.dumps(fingerprint, indent=1), encoding="utf-8"
    )


def read_fingerprint(folder: str | Path) -> dict[str, object] | None:
    """The fingerprint stored in a checkpoint folder; None when absent or unreadable."""
    path = Path(folder) / FINGERPRINT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    ok = isinstance(data, dict) and isinstance(data.get("config"), dict) and "hash" in data
    return data if ok else None


def fingerprint_changes(
    old: Mapping[str, object], new: Mapping[str, object], limit: int = 6
) -> str:
    """``key: old -> new`` for the config values that differ (at most ``limit`` named)."""
    a, b = old.get("config", {}), new.get("config", {})
    keys = sorted(k for k in set(a) | set(b) if a.get(k, "<unset>") != b.get(k, "<unset>"))
    parts = [f"{k}: {a.get(k, '<unset>')!r} -> {b.get(k, '<unset>')!r}" for k in keys[:limit]]
    if len(keys) > limit:
        parts.append(f"and {len(keys) - limit} more")
    return "; ".join(parts) or "a value outside the compared keys"


def check_fingerprint(folder: str | Path, fingerprint: Mapping[str, object], what: str) -> None:
    """Refuse (``CheckpointError``) to resume ``folder`` unless it was written with the same
    training config as ``fingerprint``; the message names the changed keys and the fix."""
    folder = Path(folder)
    saved = read_fingerprint(folder)
    fix = (
        "run without --resume to start over (the old checkpoints are then removed), or use a "
        f"new --output-dir, or delete {folder.parent}"
    )
    if saved is None:
        raise CheckpointError(
            f"cannot resume {what} from {folder}: it has no readable {FINGERPRINT_FILE} (written "
            "by an older LiRA version or another program), so it cannot be checked against this "
            f"config; {fix}"
        )
    if saved["hash"] != fingerprint["hash"]:
        raise CheckpointError(
            f"cannot resume {what} from {folder}: it was trained with another config "
            f"({fingerprint_changes(saved, fingerprint)}); resuming would mix two runs. To "
            f"continue the old run, restore its config; otherwise {fix}"
        )


def clear_previous_run(
    root: str | Path, fingerprint: Mapping[str, object], what: str
) -> list[Path]:
    """Remove the ``step-*`` folders a previous run left under ``root`` before a fresh run.

    A fresh run starts at step 0: older checkpoints (of this config or another) would otherwise
    outrank its own when pruning and be picked up by a later ``--resume``. Logged.
    """
    root = Path(root)
    clean_stale(root)
    old = step_dirs(root)
    if not old:
        return []
    same = sum(1 for p in old if (read_fingerprint(p) or {}).get("hash") == fingerprint["hash"])
    for p in old:
        shutil.rmtree(p, ignore_errors=True)
    log.warning(
        "%s: fresh run (no --resume): removed %d checkpoint(s) of a previous run from %s "
        "(%d with this config, %d with another or none); pass --resume to continue a run",
        what,
        len(old),
        root,
        same,
        len(old) - same,
    )
    return old

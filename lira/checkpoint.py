"""Atomic, self-describing checkpoint folders and exact-resume training state.

A checkpoint is written into a temporary sibling folder and renamed into place, so a run
killed at any moment leaves either the previous checkpoint or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

STEP_PREFIX = "step-"


@contextmanager
def atomic_dir(final: str | Path) -> Iterator[Path]:
    """Yield a temporary folder that replaces ``final`` only once the block succeeds."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
        old = final.parent / f".{final.name}.old-{os.getpid()}"
        if final.exists():
            final.rename(old)
        tmp.rename(final)
        if old.exists():
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json(path: str | Path, data: Any) -> None:
    """Write JSON atomically (temp file + rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False), encoding="utf-8")
    os.replace(tmp, path)


def rng_state() -> dict[str, Any]:
    """The Python, NumPy and torch RNG states (to restore on resume)."""
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the states captured by :func:`rng_state`."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def step_dir(root: str | Path, step: int) -> Path:
    """The folder of the checkpoint taken after ``step`` optimisation steps."""
    return Path(root) / f"{STEP_PREFIX}{step:08d}"


def latest_checkpoint(root: str | Path) -> Path | None:
    """The most recent complete ``step-*`` folder under ``root`` (None if there is none)."""
    root = Path(root)
    if not root.is_dir():
        return None
    steps = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(STEP_PREFIX))
    return steps[-1] if steps else None


def read_meta(path: str | Path, config_name: str, fmt: str, missing: str) -> dict[str, Any]:
    """The JSON metadata of a self-describing checkpoint folder, checked for its format.

    ``missing`` completes the error raised when ``path`` has no ``config_name``.
    """
    cfg_file = Path(path) / config_name
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{path} is not {missing}")
    meta = json.loads(cfg_file.read_text(encoding="utf-8"))
    if meta.get("format") != fmt:
        raise ValueError(f"{cfg_file}: unknown format {meta.get('format')!r}, expected {fmt}")
    return meta

"""``demo:<name>`` model references: the names, their build versions and the cache they resolve to.

:func:`resolve_model` turns ``demo:<name>`` into a local folder, built on first use. Builds are
written into a temporary folder and renamed into place (a crashed build never leaves half a
model), serialised between processes by a lock file, and stamped with their :data:`VERSIONS`
entry so stale caches rebuild.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from lira.demo.builders import (
    SEED,
    build_backbone,
    build_chunked,
    build_gemma3,
    build_gemma3_gguf,
    build_mt5,
    build_qwen3_lm,
    build_smollm2,
)
from lira.demo.marian import build_marian
from lira.demo.packages import minilm_folder
from lira.errors import UserInputError

logger = logging.getLogger(__name__)

VERSIONS = {
    "mt5": 2,
    "backbone": 1,
    "marian": 5,
    "qwen3-lm": 1,
    "smollm2": 1,
    "gemma3": 1,
    "gemma3-gguf": 1,
    "qwen25-1.5b": 1,
    "embeddinggemma": 1,
    "mpnet": 1,
}
"""Build version of each demo model: bump one when its builder changes, and cached folders
with another stamp are rebuilt."""
STAMP = "lira-demo.json"


BUILDERS: dict[str, Callable[[Path], None]] = {
    "mt5": build_mt5,
    "backbone": build_backbone,
    "marian": build_marian,
    "qwen3-lm": build_qwen3_lm,
    "smollm2": build_smollm2,
    "gemma3": build_gemma3,
    "gemma3-gguf": build_gemma3_gguf,
    "qwen25-1.5b": build_chunked("qwen25-1.5b"),
    "embeddinggemma": build_chunked("embeddinggemma"),
    "mpnet": build_chunked("mpnet"),
}
"""Demo models built into the cache (``minilm`` is used in place from its package)."""
NAMES = (
    "mt5",
    "backbone",
    "marian",
    "qwen3-lm",
    "minilm",
    "smollm2",
    "gemma3",
    "gemma3-gguf",
    "qwen25-1.5b",
    "embeddinggemma",
    "mpnet",
)


# --------------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """``$LIRA_CACHE`` or ``~/.cache/lira``."""
    env = os.environ.get("LIRA_CACHE", "")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "lira"


def is_current(folder: Path, name: str) -> bool:
    """True when ``folder`` holds a build of demo model ``name`` stamped with its current version."""
    stamp = folder / STAMP
    if not stamp.is_file():
        return False
    try:
        meta = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return meta.get("name") == name and meta.get("version") == VERSIONS[name]


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """An exclusive inter-process lock on ``path`` (no-op where ``fcntl`` is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def _own_rng() -> Iterator[None]:
    """Run a builder (which seeds globally) and restore Python's, NumPy's and torch's RNG state."""
    import numpy as np
    import torch

    py, npy = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(py)
            np.random.set_state(npy)


def _build(name: str, root: Path) -> Path:
    """Build ``name`` into ``root/name`` atomically unless a current build is already there."""
    final = root / name
    if is_current(final, name):
        return final
    with _lock(root / f".{name}.lock"):
        if is_current(final, name):  # built by another process while we waited
            return final
        tmp = root / f".{name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        start = time.perf_counter()
        logger.info("building demo model %s into %s", name, final)
        try:
            with _own_rng():  # a cold cache must not change the caller's random stream
                BUILDERS[name](tmp)
            meta = {"name": name, "version": VERSIONS[name], "seed": SEED}
            (tmp / STAMP).write_text(json.dumps(meta, indent=2), encoding="utf-8")
            old = root / f".{name}.old-{os.getpid()}"
            if final.exists():
                final.rename(old)
            tmp.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        logger.info("built demo model %s in %.1f s", name, time.perf_counter() - start)
    return final


def unknown_demo(ref: str) -> str | None:
    """Why ``demo:<name>`` names no demo model (one line listing the names), else None; None
    for any reference that is not a demo alias."""
    if not ref.startswith("demo:") or ref[len("demo:") :] in NAMES:
        return None
    return f"unknown demo model {ref!r}; choose from " + ", ".join(f"demo:{n}" for n in NAMES)


def _check_name(name: str) -> None:
    problem = unknown_demo(f"demo:{name}")
    if problem:
        raise UserInputError(problem)


def demo_folder(name: str, cache_dir: str | Path = "") -> Path:
    """The folder of demo model ``name``, built and cached on first use."""
    _check_name(name)
    if name == "minilm":
        return minilm_folder()
    root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    return _build(name, root)


def build_version(ref: str) -> int | None:
    """The build version (:data:`VERSIONS`) of a ``demo:<name>`` model; None for other refs."""
    return VERSIONS.get(ref[len("demo:") :]) if ref.startswith("demo:") else None


def resolve_model(ref: str, cache_dir: str = "") -> str:
    """``demo:<name>`` -> its local folder (built if missing); any other reference unchanged."""
    if ref.startswith("demo:"):
        return str(demo_folder(ref[len("demo:") :], cache_dir))
    return ref


def build_demo_models(cache_dir: str = "", names: list[str] | None = None) -> dict[str, Path]:
    """Build (or find cached) every demo model in ``names`` (all by default)."""
    names = list(NAMES) if names is None else names
    for name in names:
        _check_name(name)
    return {name: demo_folder(name, cache_dir) for name in names}

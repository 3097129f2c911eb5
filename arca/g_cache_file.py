"""The frozen-g cache's file, without torch: where it lives, its one-line errors, and the check
that ``lira`` runs before the engines load (issue 60, item 7: a damaged cache was reported only
after torch and the models, 13-25 s in)."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from lira.errors import LiRAError

CACHE_FILE = Path("cache") / "g_embeddings.sqlite"
"""Where a run keeps the frozen-g cache, relative to its output directory."""


class GCacheError(LiRAError, RuntimeError):
    """The frozen-g cache cannot be opened or written (full disk, a file in the way, damage)."""


def cache_path(output_dir: str | Path) -> Path:
    """``<output_dir>/cache/g_embeddings.sqlite``."""
    return Path(output_dir) / CACHE_FILE


def cache_error(path: Path, e: BaseException) -> GCacheError:
    """The one-line error for ``e`` on the cache at ``path``, with the fix."""
    text, code = str(e), getattr(e, "errno", None)
    if code in (errno.EEXIST, errno.ENOTDIR):
        fix = f"a file stands where the folder {path.parent} goes: move it away"
    elif code in (errno.ENOSPC, errno.EDQUOT) or "disk is full" in text:
        fix = "free disk space, or set models.encoder_cache: false (g is then run every time)"
    else:
        fix = "delete the file (it is rebuilt) or set models.encoder_cache: false"
    return GCacheError(f"frozen-g cache {path}: {' '.join(text.split())[:300]}; {fix}")


def check_cache_file(path: Path) -> None:
    """Raise :class:`GCacheError` when the existing cache at ``path`` is not a readable SQLite
    file (garbage, or cut short: SQLite checks the page count against the size on its first
    read). Reads the schema only (milliseconds); a lock held by a live writer is not damage."""
    if not path.is_file():
        return
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        if "locked" not in str(e):
            raise cache_error(path, e) from None

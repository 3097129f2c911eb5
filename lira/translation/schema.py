"""The translation store's SQLite file: its tables, columns and version, and the checks that
refuse any other file.

A file that is not a LiRA store (another program's SQLite database, a corrupt or truncated
file, a newer schema) raises :class:`StoreError` naming the file and the fix; the file is
never modified in that case. SQLite's own errors (a full disk, a locked or read-only file)
become a :class:`StoreError` with the fix too (:func:`store_error`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from lira.errors import LiRAError

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS translations (
    key TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    lang TEXT NOT NULL,
    translator TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    params TEXT NOT NULL,
    source_id TEXT,
    raw TEXT,
    text TEXT,
    removed TEXT,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error TEXT,
    retry INTEGER NOT NULL DEFAULT 0,
    truncated INTEGER NOT NULL DEFAULT 0,
    semantic INTEGER,
    emotional INTEGER,
    pragmatic INTEGER,
    critic_id TEXT,
    critic_status TEXT CHECK (critic_status IN ('ok', 'failed', 'none') OR critic_status IS NULL),
    critic_raw TEXT,
    critic_error TEXT,
    gen_seconds REAL,
    critic_seconds REAL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS by_translator ON translations (translator, lang);
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE IF NOT EXISTS leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL);
"""
TABLES = {"translations", "meta", "leases"}
COLUMNS = (
    "key", "source", "lang", "translator", "prompt_version", "params", "source_id", "raw", "text",
    "removed", "status", "error", "retry", "truncated", "semantic", "emotional", "pragmatic",
    "critic_id", "critic_status", "critic_raw", "critic_error", "gen_seconds", "critic_seconds",
    "created",
)  # fmt: skip
"""The columns of table ``translations``, in the order of :data:`SCHEMA`."""
SQLITE_MAGIC = b"SQLite format 3\x00"

SQLValue = str | int | float | bytes | None
"""A value SQLite stores in a column."""


class StoreError(LiRAError):
    """The translation store file is unusable (not SQLite, corrupt, foreign, full, newer)."""


def store_error(path: Path, e: Exception) -> StoreError:
    """SQLite's error ``e`` on the store at ``path`` as a :class:`StoreError` with its fix."""
    msg = str(e)
    if "full" in msg or "disk I/O" in msg:
        fix = "free disk space (or move translation.store elsewhere) and run again"
    elif "locked" in msg or "busy" in msg:
        fix = "another process holds the store too long; wait for it or use another store"
    elif "readonly" in msg or "read-only" in msg:
        fix = "make the file and its folder writable, or set translation.store elsewhere"
    else:
        fix = (
            "the file is damaged or not a LiRA store: move it away (the next run starts a "
            "new store) or set translation.store to another file"
        )
    return StoreError(f"translation store {path}: {msg}; {fix}")


def check_file(p: Path) -> None:
    """Refuse a path that is a folder or a non-SQLite file before SQLite touches it."""
    for parent in reversed(p.parents):
        if parent.exists() and not parent.is_dir():
            raise StoreError(
                f"translation store {p}: {parent} is a file, not a folder; move it away or "
                "set translation.store to a path in a folder"
            )
    if p.is_dir():
        raise StoreError(f"translation store {p} is a folder; set translation.store to a file path")
    if not p.is_file() or p.stat().st_size == 0:
        return
    with open(p, "rb") as f:
        head = f.read(len(SQLITE_MAGIC))
    if head != SQLITE_MAGIC:
        raise StoreError(
            f"translation store {p} is not an SQLite database (corrupt or another kind of "
            "file); move it away (the next run starts a new store) or set translation.store "
            "to another file"
        )


def check_schema(conn: sqlite3.Connection, path: Path) -> set[str]:
    """Refuse another program's database or a store of a newer/incompatible schema.

    Returns the tables of the store that exist (none for a new store).
    """
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return tables  # a new store
    if "translations" not in tables or "meta" not in tables:
        others = sorted(tables - TABLES)[:5]
        raise StoreError(
            f"translation store {path} is an SQLite database of another program "
            f"(tables {others}, no LiRA 'translations' table); it was not modified. Set "
            "translation.store to a new file"
        )
    cols = {r[1] for r in conn.execute("PRAGMA table_info(translations)")}
    missing = [c for c in COLUMNS if c not in cols]
    if missing:
        raise StoreError(
            f"translation store {path}: table 'translations' lacks columns {missing}; "
            "it is not a LiRA store of this version. Set translation.store to a new file"
        )
    row = conn.execute("SELECT v FROM meta WHERE k = 'schema_version'").fetchone()
    try:
        version = int(row[0]) if row else SCHEMA_VERSION
    except (TypeError, ValueError):
        version = -1
    if version != SCHEMA_VERSION:
        raise StoreError(
            f"translation store {path} has schema version {row[0] if row else None!r}; "
            f"this LiRA reads version {SCHEMA_VERSION}. Use the LiRA version that wrote it "
            "or set translation.store to a new file"
        )
    return tables & TABLES


def create_schema(conn: sqlite3.Connection) -> None:
    """Create the tables (those missing) and record :data:`SCHEMA_VERSION` (in a transaction
    the caller holds)."""
    for statement in SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute(
        "INSERT OR IGNORE INTO meta (k, v) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
    )

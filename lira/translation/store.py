"""Crash-safe SQLite translation store (paper 004 offline translation; docs/design.md "Data flow").

One row per (source text, source language, translator id, prompt version, decoding
parameters), keyed by the sha256 of those five fields (:func:`store_key`). Rows are written in
transactions of ``commit_every`` rows (WAL journal), so a process killed at any moment —
``kill -9`` included — leaves only whole rows; a restart asks :meth:`TranslationStore.missing`
and generates only what is absent. Identical source texts share one key, so they are
translated once.

A row holds the raw candidate, the cleaned candidate, the removed meta-text, the critic scores
(or the critic's failure and raw output), a status (``ok``/``failed``) with its error, a
``truncated`` flag and timings. Failed rows with ``retry=1`` (timeouts, exceptions) are
generated again on the next run; permanent failures (empty source) are not. Rows whose critic
failed are scored again on the next run (:meth:`TranslationStore.needs_critic`).

Several processes may fill one store at once: a process *leases* the keys it is about to
generate or score (table ``leases``: key, owner = host:pid:start:token, expiry) in one
transaction, and the others skip leased keys (:meth:`TranslationStore.claim`). A lease ends when its rows
are written (:meth:`TranslationStore.release`), when it expires (``lease_ttl_s`` after its
owner's last renewal: a live store renews its leases in a background thread), or at once when
its owner was a process of this host that no longer runs (kill -9).

Stores filled apart (``lira translate --shard i/n`` on several nodes) are combined with
:meth:`TranslationStore.merge_from`: one transaction per merged store, same key -> one row.

A file that is not a LiRA store (another program's SQLite database, a corrupt or truncated
file, a newer schema) raises :class:`StoreError` naming the file and the fix; the file is
never modified in that case.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from lira.data.io import lone_surrogate
from lira.demo.references import build_version
from lira.errors import LiRAError, UserInputError
from lira.translation.config import TranslatorConfig
from lira.translation.types import Candidate

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1

_SCHEMA = """
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
_TABLES = {"translations", "meta", "leases"}
_COLUMNS = (
    "key", "source", "lang", "translator", "prompt_version", "params", "source_id", "raw", "text",
    "removed", "status", "error", "retry", "truncated", "semantic", "emotional", "pragmatic",
    "critic_id", "critic_status", "critic_raw", "critic_error", "gen_seconds", "critic_seconds",
    "created",
)  # fmt: skip
LEASE_TTL_S = 120.0
"""Lifetime of a lease; a live process renews its leases every ``LEASE_TTL_S / 4`` seconds, so
only a dead (or another host's killed) process's leases expire."""
SQLITE_MAGIC = b"SQLite format 3\x00"

F = TypeVar("F", bound=Callable[..., Any])
SQLValue = str | int | float | bytes | None
"""A value SQLite stores in a column."""


def _proc_start(pid: int) -> str:
    """The start time of process ``pid`` (Linux clock ticks), or '' where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2 :].split()[19]
    except (OSError, ValueError, IndexError):
        return ""


class StoreError(LiRAError):
    """The translation store file is unusable (not SQLite, corrupt, foreign, full, newer)."""


def _guard(fn: F) -> F:
    """Turn SQLite's corruption / disk errors into a StoreError naming the store file."""

    @functools.wraps(fn)
    def wrapper(self: TranslationStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.DatabaseError as e:
            if type(e) not in (sqlite3.DatabaseError, sqlite3.OperationalError):
                raise  # ProgrammingError, IntegrityError, ...: a bug, not the file
            raise self._error(e) from e

    return wrapper  # type: ignore[return-value]


REFERENCE_PROMPT = "reference"
"""Prompt version of imported (human / pre-computed) translations."""


def translator_signature(t: TranslatorConfig) -> tuple[str, str]:
    """(prompt version, canonical JSON of the decoding parameters) of a translator."""
    if t.kind == "reference":
        return REFERENCE_PROMPT, "{}"
    params = {
        "kind": t.kind,
        "model": t.model,
        "temperature": t.temperature,
        "top_p": t.top_p if t.temperature > 0 else 1.0,
        "max_new_tokens": t.max_new_tokens,
        "lang_codes": dict(sorted(t.lang_codes.items())),
    }
    build = build_version(t.model)
    if build is not None:  # a rebuilt demo model never reuses the old build's candidates
        params["demo_build"] = build
    return t.prompt_version, json.dumps(params, sort_keys=True, separators=(",", ":"))


def store_key(text: str, lang: str, translator: str, prompt_version: str, params: str) -> str:
    """sha256 of (source text, source language, translator id, prompt version, params)."""
    blob = json.dumps([text, lang, translator, prompt_version, params], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def valid_scores(scores: Sequence[object]) -> bool:
    """True when critic scores (semantic, emotional, pragmatic) are integers in 1-10."""
    return len(scores) == 3 and all(
        isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 10 for v in scores
    )


def key_for(text: str, lang: str, t: TranslatorConfig) -> str:
    """The store key of ``text`` translated by translator config ``t``."""
    return store_key(text, lang, t.name, *translator_signature(t))


@dataclass
class Row:
    """One store row to write (see the module docstring for the columns)."""

    source: str
    lang: str
    translator: TranslatorConfig
    raw: str | None = None
    text: str | None = None
    removed: str = ""
    status: str = "ok"
    error: str | None = None
    retry: bool = False
    truncated: bool = False
    gen_seconds: float = 0.0
    source_id: str | None = None
    extra: dict[str, SQLValue] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Store key of this row."""
        return key_for(self.source, self.lang, self.translator)


class TranslationStore:
    """SQLite store of translation candidates and critic scores (WAL, transactional)."""

    def __init__(
        self,
        path: str | Path,
        commit_every: int = 16,
        lease_ttl_s: float = LEASE_TTL_S,
        any_thread: bool = False,
    ) -> None:
        """Open (or create) the store at ``path``; ``any_thread``: the connection may be used
        from another thread than this one (one thread at a time)."""
        self.path = Path(path)
        self.commit_every = commit_every
        self.lease_ttl_s = lease_ttl_s
        self.corrupt_scores = 0
        """Candidates read with critic scores outside 1-10 (used unscored; see candidates)."""
        self.rows_committed = 0
        """Rows :meth:`write_rows` committed through this connection (so far)."""
        pid = os.getpid()
        self.owner = f"{socket.gethostname()}:{pid}:{_proc_start(pid)}:{uuid.uuid4().hex[:8]}"
        self._heartbeat: tuple[threading.Event, threading.Thread] | None = None
        self._check_file()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.conn = sqlite3.connect(
                str(self.path), timeout=60.0, isolation_level=None, check_same_thread=not any_thread
            )
        except sqlite3.Error as e:
            raise self._error(e) from e
        try:
            if self._check_schema() < _TABLES:  # a new store, or one from before leases
                with self._transaction():  # check + create atomically (others may open too)
                    self._check_schema()
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            self.conn.execute(statement)
                    self.conn.execute(
                        "INSERT OR IGNORE INTO meta (k, v) VALUES ('schema_version', ?)",
                        (str(SCHEMA_VERSION),),
                    )
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as e:
            self.conn.close()
            raise self._error(e) from e
        except StoreError:
            self.conn.close()
            raise

    # ------------------------------------------------------------------ checks
    def _error(self, e: Exception) -> StoreError:
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
        return StoreError(f"translation store {self.path}: {msg}; {fix}")

    def _check_file(self) -> None:
        """Refuse a path that is a folder or a non-SQLite file before SQLite touches it."""
        p = self.path
        for parent in reversed(p.parents):
            if parent.exists() and not parent.is_dir():
                raise StoreError(
                    f"translation store {p}: {parent} is a file, not a folder; move it away or "
                    "set translation.store to a path in a folder"
                )
        if p.is_dir():
            raise StoreError(
                f"translation store {p} is a folder; set translation.store to a file path"
            )
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

    def _check_schema(self) -> set[str]:
        """Refuse another program's database or a store of a newer/incompatible schema.

        Returns the tables of the store that exist (none for a new store).
        """
        tables = {
            r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if not tables:
            return tables  # a new store
        if "translations" not in tables or "meta" not in tables:
            others = sorted(tables - _TABLES)[:5]
            raise StoreError(
                f"translation store {self.path} is an SQLite database of another program "
                f"(tables {others}, no LiRA 'translations' table); it was not modified. Set "
                "translation.store to a new file"
            )
        cols = {r[1] for r in self.conn.execute("PRAGMA table_info(translations)")}
        missing = [c for c in _COLUMNS if c not in cols]
        if missing:
            raise StoreError(
                f"translation store {self.path}: table 'translations' lacks columns {missing}; "
                "it is not a LiRA store of this version. Set translation.store to a new file"
            )
        row = self.conn.execute("SELECT v FROM meta WHERE k = 'schema_version'").fetchone()
        try:
            version = int(row[0]) if row else SCHEMA_VERSION
        except (TypeError, ValueError):
            version = -1
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"translation store {self.path} has schema version {row[0] if row else None!r}; "
                f"this LiRA reads version {SCHEMA_VERSION}. Use the LiRA version that wrote it "
                "or set translation.store to a new file"
            )
        return tables & _TABLES

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the connection (the WAL is checkpointed by SQLite); stop renewing leases."""
        if self._heartbeat is not None:
            self._heartbeat[0].set()
            self._heartbeat[1].join()
            self._heartbeat = None
        self.conn.close()

    def __enter__(self) -> TranslationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writes
    @_guard
    def write_rows(self, rows: Sequence[Row]) -> int:
        """Insert or replace ``rows`` in transactions of ``commit_every``; returns the count."""
        now = time.time()
        for i in range(0, len(rows), self.commit_every):
            chunk = rows[i : i + self.commit_every]
            values = []
            for r in chunk:
                pv, params = translator_signature(r.translator)
                values.append(
                    (
                        store_key(r.source, r.lang, r.translator.name, pv, params),
                        r.source,
                        r.lang,
                        r.translator.name,
                        pv,
                        params,
                        r.source_id,
                        r.raw,
                        r.text,
                        r.removed,
                        r.status,
                        r.error,
                        int(r.retry),
                        int(r.truncated),
                        r.gen_seconds,
                        now,
                    )
                )
            with self._transaction():
                self.conn.executemany(
                    "INSERT OR REPLACE INTO translations (key, source, lang, translator, "
                    "prompt_version, params, source_id, raw, text, removed, status, error, retry, "
                    "truncated, gen_seconds, created) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    values,
                )
            self.rows_committed += len(chunk)
        return len(rows)

    @_guard
    def write_scores(self, updates: Sequence[tuple[str, dict[str, SQLValue]]]) -> int:
        """Set critic columns: ``updates`` = [(key, {semantic, emotional, pragmatic,
        critic_id, critic_status, critic_raw, critic_error, critic_seconds})]."""
        cols = (
            "semantic",
            "emotional",
            "pragmatic",
            "critic_id",
            "critic_status",
            "critic_raw",
            "critic_error",
            "critic_seconds",
        )
        sql = f"UPDATE translations SET {', '.join(c + ' = ?' for c in cols)} WHERE key = ?"
        for i in range(0, len(updates), self.commit_every):
            chunk = updates[i : i + self.commit_every]
            with self._transaction():
                self.conn.executemany(sql, [(*(u.get(c) for c in cols), k) for k, u in chunk])
        return len(updates)

    def _transaction(self) -> _Tx:
        return _Tx(self.conn)

    # ------------------------------------------------------------------ reads
    @_guard
    def _rows(self, keys: Sequence[str], columns: str) -> dict[str, tuple]:
        out: dict[str, tuple] = {}
        uniq = list(dict.fromkeys(keys))
        for i in range(0, len(uniq), 500):
            part = uniq[i : i + 500]
            q = f"SELECT key, {columns} FROM translations WHERE key IN ({','.join('?' * len(part))})"
            for row in self.conn.execute(q, part):
                out[row[0]] = row[1:]
        return out

    def missing(self, texts: Sequence[str], lang: str, translator: TranslatorConfig) -> list[str]:
        """Distinct texts (first-seen order) with no row, or a retryable failed row."""
        keys = {t: key_for(t, lang, translator) for t in dict.fromkeys(texts)}
        found = self._rows(list(keys.values()), "status, retry")
        return [
            t
            for t, k in keys.items()
            if k not in found or (found[k][0] == "failed" and found[k][1] == 1)
        ]

    def needs_critic(
        self, texts: Sequence[str], lang: str, translator: TranslatorConfig, critic_id: str
    ) -> list[tuple[str, str, str]]:
        """(key, source, cleaned candidate) of ok rows not yet scored by ``critic_id``, whose
        score by ``critic_id`` failed (request error, unusable reply), or whose stored scores
        are corrupt (outside 1-10, see :func:`valid_scores`): those are scored again."""
        keys = [key_for(t, lang, translator) for t in dict.fromkeys(texts)]
        cols = "source, text, status, critic_id, critic_status, semantic, emotional, pragmatic"
        found = self._rows(keys, cols)
        return [
            (k, r[0], r[1])
            for k in keys
            if (r := found.get(k)) is not None
            and r[2] == "ok"
            and (
                r[3] != critic_id or r[4] == "failed" or (r[4] == "ok" and not valid_scores(r[5:]))
            )
        ]

    def states(self, keys: Sequence[str], columns: str) -> dict[str, tuple]:
        """{key: values of ``columns``} of the rows that exist (to notice concurrent writes)."""
        return self._rows(keys, columns)

    # ------------------------------------------------------------------ leases
    @staticmethod
    def _stale(owner: str, expires: float, now: float) -> bool:
        """True when a lease expired or its owner, a process of this host, no longer runs.

        ``owner`` is ``host:pid:start:token``; ``start`` (the process start time) tells a
        reused pid (e.g. pid 1 in a restarted container) from the process that took the lease.
        """
        if expires <= now:
            return True
        parts = owner.split(":")
        if len(parts) < 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
            return False
        pid, start = int(parts[1]), parts[2] if len(parts) >= 4 else ""
        if pid == os.getpid():
            return bool(start) and start != _proc_start(pid)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:  # exists but belongs to another user
            pass
        current = _proc_start(pid)
        return bool(start and current and current != start)

    def _renew_leases(self, stop: threading.Event) -> None:
        """Heartbeat thread: push this owner's lease expiry forward until ``stop`` is set."""
        every = max(self.lease_ttl_s / 4, 0.01)
        conn = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
        try:
            while not stop.wait(every):
                try:
                    conn.execute(
                        "UPDATE leases SET expires = ? WHERE owner = ?",
                        (time.time() + self.lease_ttl_s, self.owner),
                    )
                except sqlite3.Error as e:  # the main thread reports store errors
                    log.debug("lease renewal failed: %s", e)
        finally:
            conn.close()

    @_guard
    def claim(self, keys: Sequence[str], namespace: str = "gen") -> list[str]:
        """Lease the ``keys`` no other live process holds (one transaction); returns them.

        ``namespace`` separates leases of different work on the same row (``gen``, ``critic``).
        """
        uniq = list(dict.fromkeys(keys))
        if not uniq:
            return []
        now = time.time()
        names = {f"{namespace}:{k}": k for k in uniq}
        got: list[str] = []
        with self._transaction():
            held: dict[str, tuple[str, float]] = {}
            lease_keys = list(names)
            for i in range(0, len(lease_keys), 500):
                part = lease_keys[i : i + 500]
                q = f"SELECT key, owner, expires FROM leases WHERE key IN ({','.join('?' * len(part))})"
                for k, owner, expires in self.conn.execute(q, part):
                    held[k] = (owner, expires)
            rows = []
            for name, key in names.items():
                h = held.get(name)
                if h is None or h[0] == self.owner or self._stale(h[0], h[1], now):
                    rows.append((name, self.owner, now + self.lease_ttl_s))
                    got.append(key)
            self.conn.executemany(
                "INSERT OR REPLACE INTO leases (key, owner, expires) VALUES (?, ?, ?)", rows
            )
        if got and self._heartbeat is None:
            stop = threading.Event()
            thread = threading.Thread(target=self._renew_leases, args=(stop,), daemon=True)
            thread.start()
            self._heartbeat = (stop, thread)
        return got

    @_guard
    def release(self, keys: Sequence[str], namespace: str = "gen") -> None:
        """End this process's leases on ``keys`` (their rows are written)."""
        names = [f"{namespace}:{k}" for k in dict.fromkeys(keys)]
        with self._transaction():
            self.conn.executemany(
                "DELETE FROM leases WHERE key = ? AND owner = ?", [(n, self.owner) for n in names]
            )

    @_guard
    def leased_elsewhere(self, keys: Sequence[str], namespace: str = "gen") -> list[str]:
        """The ``keys`` another live process holds a lease on now."""
        now = time.time()
        names = {f"{namespace}:{k}": k for k in dict.fromkeys(keys)}
        out = []
        lease_keys = list(names)
        for i in range(0, len(lease_keys), 500):
            part = lease_keys[i : i + 500]
            q = f"SELECT key, owner, expires FROM leases WHERE key IN ({','.join('?' * len(part))})"
            for k, owner, expires in self.conn.execute(q, part):
                if owner != self.owner and not self._stale(owner, expires, now):
                    out.append(names[k])
        return out

    def candidates(
        self, texts: Sequence[str], lang: str, translators: Sequence[TranslatorConfig]
    ) -> list[list[Candidate]]:
        """Per text, the cleaned ok candidates (translator order) with critic scores or None."""
        per_t: list[dict[str, tuple]] = []
        keys_per_t: list[list[str]] = []
        for t in translators:
            keys = [key_for(x, lang, t) for x in texts]
            keys_per_t.append(keys)
            per_t.append(
                self._rows(keys, "text, status, critic_status, semantic, emotional, pragmatic")
            )
        out: list[list[Candidate]] = []
        corrupt = 0
        for i in range(len(texts)):
            cands = []
            for t, keys, found in zip(translators, keys_per_t, per_t):
                r = found.get(keys[i])
                if r is None or r[1] != "ok" or r[0] is None:
                    continue
                scores = None
                if r[2] == "ok" and valid_scores(r[3:6]):
                    scores = (int(r[3]), int(r[4]), int(r[5]))
                elif r[2] == "ok":
                    corrupt += 1
                cands.append(Candidate(translator=t.name, text=r[0], scores=scores))
            out.append(cands)
        if corrupt:
            self.corrupt_scores += corrupt
            log.warning(
                "translation store %s: %d candidate(s) have critic scores outside 1-10 (a "
                "corrupt or edited row); they are used without scores, and the next `lira "
                "translate` scores them again",
                self.path,
                corrupt,
            )
        return out

    @_guard
    def row(self, text: str, lang: str, translator: TranslatorConfig) -> dict[str, SQLValue] | None:
        """The full row of one (text, lang, translator) as a dict, or None."""
        cur = self.conn.execute(
            "SELECT * FROM translations WHERE key = ?", (key_for(text, lang, translator),)
        )
        r = cur.fetchone()
        return None if r is None else dict(zip([d[0] for d in cur.description], r))

    @_guard
    def count(self, translator: str | None = None, status: str | None = None) -> int:
        """Number of rows, optionally for one translator and/or status."""
        q, args = "SELECT COUNT(*) FROM translations WHERE 1=1", []
        if translator is not None:
            q, args = q + " AND translator = ?", [*args, translator]
        if status is not None:
            q, args = q + " AND status = ?", [*args, status]
        return int(self.conn.execute(q, args).fetchone()[0])

    # ------------------------------------------------------------------ merges
    @_guard
    def live_leases(self) -> int:
        """Leases held by a live process (a process may still be filling this store)."""
        now = time.time()
        rows = self.conn.execute("SELECT owner, expires FROM leases").fetchall()
        return sum(not self._stale(owner, expires, now) for owner, expires in rows)

    @_guard
    def merge_from(self, other: TranslationStore) -> dict[str, int]:
        """Copy the rows of ``other`` (e.g. a shard store) into this store, in one transaction.

        Rows are keyed by content (:func:`store_key`): a key absent here is ``added``; one with
        the same content (timings and ``created`` aside) is a ``duplicate`` and skipped; one
        whose content differs is a ``conflict`` and the preferred row is kept (:func:`_preferred`:
        ok over failed, scored over unscored, then the earlier one, then a content order), so
        the result does not depend on the merge order and merging again changes nothing
        (``replaced`` counts conflicts the incoming row won). Leases are not copied.
        """
        stats = {"rows": 0, "added": 0, "duplicates": 0, "conflicts": 0, "replaced": 0}
        cols = ", ".join(_COLUMNS)
        insert = (
            f"INSERT OR REPLACE INTO translations ({cols}) "
            f"VALUES ({', '.join('?' * len(_COLUMNS))})"
        )
        with self._transaction():
            cur = other.conn.execute(f"SELECT {cols} FROM translations ORDER BY key")
            while batch := cur.fetchmany(500):
                q = f"SELECT {cols} FROM translations WHERE key IN ({','.join('?' * len(batch))})"
                here = {r[0]: r for r in self.conn.execute(q, [r[0] for r in batch])}
                write = []
                for r in batch:
                    mine = here.get(r[0])
                    if mine is None:
                        stats["added"] += 1
                        write.append(r)
                    elif _content(mine) == _content(r):
                        stats["duplicates"] += 1
                    else:
                        stats["conflicts"] += 1
                        if _preferred(r) > _preferred(mine):
                            stats["replaced"] += 1
                            write.append(r)
                stats["rows"] += len(batch)
                self.conn.executemany(insert, write)
        return stats

    # ------------------------------------------------------------------ imports
    def add_reference(
        self,
        translator: str | TranslatorConfig,
        items: Iterable[tuple[str, str, str, str | None]],
    ) -> int:
        """Store pre-computed translations ``(source, lang, translation, source_id)`` as
        candidates of a ``reference`` translator (no cleanup, no generation)."""
        t = (
            translator
            if isinstance(translator, TranslatorConfig)
            else reference_translator(translator)
        )
        rows = [
            Row(source=s, lang=lang, translator=t, raw=y, text=y.strip(), source_id=sid)
            for s, lang, y, sid in items
        ]
        return self.write_rows(rows)

    def import_jsonl(self, path: str | Path, translator_name: str | None = None) -> int:
        """Import a JSONL file of translations (the paper's offline-translation path).

        Each line: ``source_id`` (or ``id``), ``source_text`` (or ``source``), ``source_lang``
        (or ``lang``), ``translation`` and ``translator`` (overridden by ``translator_name``).
        A malformed line raises naming the file, line number and the missing field.
        """
        by_name: dict[str, list[tuple[str, str, str, str | None]]] = {}
        fix = "fix the line and import again (nothing was imported)"
        with open(path, "rb") as f:
            for n, raw_line in enumerate(f, 1):
                try:
                    line = raw_line.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise UserInputError(
                        f"{path}:{n}: invalid UTF-8 at byte {e.start} of the line; {fix}"
                    ) from None
                if not line.strip():
                    continue
                try:
                    d = json.loads(line)
                except (ValueError, RecursionError) as e:
                    raise UserInputError(f"{path}:{n}: not valid JSON ({e}); {fix}") from None
                if not isinstance(d, dict):
                    raise UserInputError(
                        f"{path}:{n}: expected a JSON object, got {type(d).__name__}; {fix}"
                    )
                bad = lone_surrogate(d)
                if bad:
                    raise UserInputError(
                        f"{path}:{n}: field {bad[0].lstrip('.')!r} holds a lone surrogate at "
                        f"character {bad[1]} (a \\ud800-\\udfff escape, not valid Unicode); {fix}"
                    )

                def get(*names: str, d: dict = d, n: int = n) -> object:
                    for name in names:
                        if d.get(name) not in (None, ""):
                            return d[name]
                    raise UserInputError(
                        f"{path}:{n}: missing field {names[0]!r} (or {names[1:]}); {fix}"
                    )

                name = str(translator_name or get("translator", "translator_name"))
                sid = d.get("source_id", d.get("id"))
                item = (
                    str(get("source_text", "source", "text")),
                    str(get("source_lang", "lang")),
                    str(get("translation", "target")),
                    None if sid is None else str(sid),
                )
                by_name.setdefault(name, []).append(item)
        total = 0
        start = self.rows_committed
        try:
            for name, items in by_name.items():
                total += self.add_reference(name, items)
                log.info("imported %d translations of %r from %s", len(items), name, path)
        except StoreError as e:  # a full disk: say what is already in the store
            done = self.rows_committed - start
            rows = sum(len(v) for v in by_name.values())
            raise StoreError(
                f"{e} ({done} of the {rows} rows of {path} were committed before it stopped; "
                "importing the file again replaces them, it does not add them twice)"
            ) from None
        return total


def reference_translator(name: str) -> TranslatorConfig:
    """A ``reference`` translator config (imported, never generated) named ``name``."""
    return TranslatorConfig(name=name, kind="reference", role="mt")


_VOLATILE = {"created", "gen_seconds", "critic_seconds"}
_CONTENT_IDX = [i for i, c in enumerate(_COLUMNS) if c not in _VOLATILE]


def _content(row: Sequence[SQLValue]) -> tuple[SQLValue, ...]:
    """A full row (``_COLUMNS`` order) without its timings: what a merge compares."""
    return tuple(row[i] for i in _CONTENT_IDX)


def _preferred(row: Sequence[Any]) -> tuple:
    """Sort key of a merge conflict; the larger row wins: ok, then scored, then earlier."""
    r = dict(zip(_COLUMNS, row))
    return (
        r["status"] == "ok",
        r["critic_status"] == "ok",
        r["critic_status"] is not None,
        -float(r["created"]),
        json.dumps(_content(row), ensure_ascii=False, default=str),
    )


class _Tx:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error) on an autocommit connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.conn.execute("ROLLBACK" if exc_type is not None else "COMMIT")

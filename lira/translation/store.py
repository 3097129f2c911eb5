"""Crash-safe SQLite translation store (DESIGN "Data flow" 1; paper 004 "offline translation").

One row per (source text, source language, translator id, prompt version, decoding
parameters), keyed by the sha256 of those five fields (:func:`store_key`). Rows are written in
transactions of ``commit_every`` rows (WAL journal), so a process killed at any moment —
``kill -9`` included — leaves only whole rows; a restart asks :meth:`TranslationStore.missing`
and generates only what is absent. Identical source texts share one key, so they are
translated once.

A row holds the raw candidate, the cleaned candidate, the removed meta-text, the critic scores
(or the critic's failure and raw output), a status (``ok``/``failed``) with its error, a
``truncated`` flag and timings. Failed rows with ``retry=1`` (timeouts, exceptions) are
generated again on the next run; permanent failures (empty source) are not.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lira.config import TranslatorConfig
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
"""

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
    return t.prompt_version, json.dumps(params, sort_keys=True, separators=(",", ":"))


def store_key(text: str, lang: str, translator: str, prompt_version: str, params: str) -> str:
    """sha256 of (source text, source language, translator id, prompt version, params)."""
    blob = json.dumps([text, lang, translator, prompt_version, params], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


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
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Store key of this row."""
        return key_for(self.source, self.lang, self.translator)


class TranslationStore:
    """SQLite store of translation candidates and critic scores (WAL, transactional)."""

    def __init__(self, path: str | Path, commit_every: int = 16) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.commit_every = commit_every
        self.conn = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.executescript(_SCHEMA)
        self.conn.execute(
            "INSERT OR IGNORE INTO meta (k, v) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the connection (the WAL is checkpointed by SQLite)."""
        self.conn.close()

    def __enter__(self) -> TranslationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writes
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
        return len(rows)

    def write_scores(self, updates: Sequence[tuple[str, dict[str, Any]]]) -> int:
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
        """(key, source, cleaned candidate) of ok rows not yet scored by ``critic_id``."""
        keys = [key_for(t, lang, translator) for t in dict.fromkeys(texts)]
        found = self._rows(keys, "source, text, status, critic_id")
        return [
            (k, r[0], r[1])
            for k in keys
            if (r := found.get(k)) is not None and r[2] == "ok" and r[3] != critic_id
        ]

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
        for i in range(len(texts)):
            cands = []
            for t, keys, found in zip(translators, keys_per_t, per_t):
                r = found.get(keys[i])
                if r is None or r[1] != "ok" or r[0] is None:
                    continue
                scores = (int(r[3]), int(r[4]), int(r[5])) if r[2] == "ok" else None
                cands.append(Candidate(translator=t.name, text=r[0], scores=scores))
            out.append(cands)
        return out

    def row(self, text: str, lang: str, translator: TranslatorConfig) -> dict[str, Any] | None:
        """The full row of one (text, lang, translator) as a dict, or None."""
        cur = self.conn.execute(
            "SELECT * FROM translations WHERE key = ?", (key_for(text, lang, translator),)
        )
        r = cur.fetchone()
        return None if r is None else dict(zip([d[0] for d in cur.description], r))

    def count(self, translator: str | None = None, status: str | None = None) -> int:
        """Number of rows, optionally for one translator and/or status."""
        q, args = "SELECT COUNT(*) FROM translations WHERE 1=1", []
        if translator is not None:
            q, args = q + " AND translator = ?", [*args, translator]
        if status is not None:
            q, args = q + " AND status = ?", [*args, status]
        return int(self.conn.execute(q, args).fetchone()[0])

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
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    d = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{n}: not valid JSON ({e})") from None

                def get(*names: str, d: dict = d, n: int = n) -> Any:
                    for name in names:
                        if d.get(name) not in (None, ""):
                            return d[name]
                    raise ValueError(f"{path}:{n}: missing field {names[0]!r} (or {names[1:]})")

                name = translator_name or get("translator", "translator_name")
                sid = d.get("source_id", d.get("id"))
                item = (
                    str(get("source_text", "source", "text")),
                    str(get("source_lang", "lang")),
                    str(get("translation", "target")),
                    None if sid is None else str(sid),
                )
                by_name.setdefault(name, []).append(item)
        total = 0
        for name, items in by_name.items():
            total += self.add_reference(name, items)
            log.info("imported %d translations of %r from %s", len(items), name, path)
        return total


def reference_translator(name: str) -> TranslatorConfig:
    """A ``reference`` translator config (imported, never generated) named ``name``."""
    return TranslatorConfig(name=name, kind="reference", role="mt")


class _Tx:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error) on an autocommit connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.conn.execute("ROLLBACK" if exc_type is not None else "COMMIT")

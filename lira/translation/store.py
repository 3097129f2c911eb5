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

Beside this module: the file's tables and the checks that refuse any other file
(:mod:`lira.translation.schema`, :class:`~lira.translation.schema.StoreError`); the leases that
let several processes fill one store at once (:mod:`lira.translation.leases`,
:meth:`TranslationStore.claim`); merging stores filled apart (:mod:`lira.translation.merge`,
:meth:`TranslationStore.merge_from`); reading a JSONL file of pre-computed translations
(:mod:`lira.translation.jsonl_import`, :meth:`TranslationStore.import_jsonl`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from lira.demo.references import build_version
from lira.sqlite_wal import Transaction, use_wal
from lira.translation import leases
from lira.translation.config import TranslatorConfig
from lira.translation.jsonl_import import Reference, read_translations
from lira.translation.merge import merge_rows
from lira.translation.schema import (
    TABLES,
    SQLValue,
    StoreError,
    check_file,
    check_schema,
    create_schema,
    store_error,
)
from lira.translation.types import Candidate

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


def _guard(
    fn: Callable[Concatenate[TranslationStore, P], R],
) -> Callable[Concatenate[TranslationStore, P], R]:
    """Turn SQLite's corruption / disk errors into a StoreError naming the store file."""

    @functools.wraps(fn)
    def wrapper(self: TranslationStore, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.DatabaseError as e:
            if type(e) not in (sqlite3.DatabaseError, sqlite3.OperationalError):
                raise  # ProgrammingError, IntegrityError, ...: a bug, not the file
            raise store_error(self.path, e) from e

    return wrapper


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
        lease_ttl_s: float = leases.LEASE_TTL_S,
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
        self.owner = leases.lease_owner()
        """The owner name of this connection's leases (``host:pid:start:token``)."""
        self._heartbeat: leases.Heartbeat | None = None
        check_file(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.conn = sqlite3.connect(
                str(self.path), timeout=60.0, isolation_level=None, check_same_thread=not any_thread
            )
        except sqlite3.Error as e:
            raise store_error(self.path, e) from e
        try:
            if check_schema(self.conn, self.path) < TABLES:  # new, or without the leases table
                with self._transaction():  # check + create atomically (others may open too)
                    check_schema(self.conn, self.path)
                    create_schema(self.conn)
            use_wal(self.conn)
            self.conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as e:
            self.conn.close()
            raise store_error(self.path, e) from e
        except StoreError:
            self.conn.close()
            raise

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the connection (the WAL is checkpointed by SQLite); stop renewing leases."""
        if self._heartbeat is not None:
            self._heartbeat.stop()
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

    def _transaction(self) -> Transaction:
        """A write transaction on this connection."""
        return Transaction(self.conn)

    # ------------------------------------------------------------------ reads
    @_guard
    def _rows(self, keys: Sequence[str], columns: str) -> dict[str, tuple[SQLValue, ...]]:
        """{key: values of ``columns``} of the rows of ``keys`` that exist."""
        out: dict[str, tuple[SQLValue, ...]] = {}
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

    def states(self, keys: Sequence[str], columns: str) -> dict[str, tuple[SQLValue, ...]]:
        """{key: values of ``columns``} of the rows that exist (to notice concurrent writes)."""
        return self._rows(keys, columns)

    # ------------------------------------------------------------------ leases
    @_guard
    def claim(self, keys: Sequence[str], namespace: str = "gen") -> list[str]:
        """Lease the ``keys`` no other live process holds (one transaction); returns them.

        ``namespace`` separates leases of different work on the same row (``gen``, ``critic``).
        """
        if not keys:
            return []
        with self._transaction():
            got = leases.take(self.conn, keys, namespace, self.owner, self.lease_ttl_s)
        if got and self._heartbeat is None:
            self._heartbeat = leases.Heartbeat(self.path, lambda: self.owner, self.lease_ttl_s)
        return got

    @_guard
    def release(self, keys: Sequence[str], namespace: str = "gen") -> None:
        """End this process's leases on ``keys`` (their rows are written)."""
        with self._transaction():
            leases.drop(self.conn, keys, namespace, self.owner)

    @_guard
    def leased_elsewhere(self, keys: Sequence[str], namespace: str = "gen") -> list[str]:
        """The ``keys`` another live process holds a lease on now."""
        return leases.held_elsewhere(self.conn, keys, namespace, self.owner)

    @_guard
    def live_leases(self) -> int:
        """Leases held by a live process (a process may still be filling this store)."""
        return leases.live_count(self.conn)

    def candidates(
        self, texts: Sequence[str], lang: str, translators: Sequence[TranslatorConfig]
    ) -> list[list[Candidate]]:
        """Per text, the cleaned ok candidates (translator order) with critic scores or None."""
        per_t: list[dict[str, tuple[SQLValue, ...]]] = []
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

    @_guard
    def translators(self, status: str = "ok") -> list[str]:
        """The names of the translators with at least one row of ``status`` (sorted)."""
        q = "SELECT DISTINCT translator FROM translations WHERE status = ? ORDER BY translator"
        return [str(r[0]) for r in self.conn.execute(q, (status,)).fetchall()]

    # ------------------------------------------------------------------ merges
    @_guard
    def merge_from(self, other: TranslationStore) -> dict[str, int]:
        """Copy the rows of ``other`` (e.g. a shard store) into this store, in one transaction.

        Rows are keyed by content (:func:`store_key`): a key absent here is ``added``; one with
        the same content (timings and ``created`` aside) is a ``duplicate`` and skipped; one
        whose content differs is a ``conflict`` and the preferred row is kept
        (:func:`~lira.translation.merge.preferred`: ok over failed, scored over unscored, then
        the earlier one, then a content order), so the result does not depend on the merge
        order and merging again changes nothing (``replaced`` counts conflicts the incoming row
        won). Leases are not copied.
        """
        with self._transaction():
            return merge_rows(self.conn, other.conn)

    # ------------------------------------------------------------------ imports
    def add_reference(
        self,
        translator: str | TranslatorConfig,
        items: Iterable[Reference],
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
        A malformed line raises naming the file, line number and the missing field
        (:func:`~lira.translation.jsonl_import.read_translations`); nothing is stored then.
        """
        by_name = read_translations(path, translator_name)
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

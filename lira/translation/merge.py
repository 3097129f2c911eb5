"""Merging translation stores filled apart (``lira translate --shard i/n`` on several nodes).

:func:`merge_rows` copies one store's rows into another: rows are keyed by content
(:func:`~lira.translation.store.store_key`), so the same key is one row; a conflict (same key,
other content) keeps the preferred row (:func:`preferred`), so the result does not depend on
the merge order and merging again changes nothing. Leases are not copied.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from lira.translation.schema import COLUMNS, SQLValue

VOLATILE = {"created", "gen_seconds", "critic_seconds"}
"""Columns a merge does not compare: when a row was made and how long it took."""
_CONTENT_IDX = [i for i, c in enumerate(COLUMNS) if c not in VOLATILE]


def content(row: Sequence[SQLValue]) -> tuple[SQLValue, ...]:
    """A full row (:data:`~lira.translation.schema.COLUMNS` order) without its timings: what a
    merge compares."""
    return tuple(row[i] for i in _CONTENT_IDX)


def preferred(row: Sequence[SQLValue]) -> tuple[bool, bool, bool, float, str]:
    """Sort key of a merge conflict; the larger row wins: ok, then scored, then earlier."""
    r = dict(zip(COLUMNS, row))
    return (
        r["status"] == "ok",
        r["critic_status"] == "ok",
        r["critic_status"] is not None,
        -float(r["created"]),  # type: ignore[arg-type]  # REAL NOT NULL
        json.dumps(content(row), ensure_ascii=False, default=str),
    )


def merge_rows(into: sqlite3.Connection, source: sqlite3.Connection) -> dict[str, int]:
    """Copy the rows of ``source`` into ``into`` (the caller holds ``into``'s transaction).

    A key absent from ``into`` is ``added``; one with the same :func:`content` is a
    ``duplicate`` and skipped; one whose content differs is a ``conflict`` and the
    :func:`preferred` row is kept (``replaced`` counts conflicts the incoming row won).
    """
    stats = {"rows": 0, "added": 0, "duplicates": 0, "conflicts": 0, "replaced": 0}
    cols = ", ".join(COLUMNS)
    insert = (
        f"INSERT OR REPLACE INTO translations ({cols}) VALUES ({', '.join('?' * len(COLUMNS))})"
    )
    cur = source.execute(f"SELECT {cols} FROM translations ORDER BY key")
    while batch := cur.fetchmany(500):
        q = f"SELECT {cols} FROM translations WHERE key IN ({','.join('?' * len(batch))})"
        here = {r[0]: r for r in into.execute(q, [r[0] for r in batch])}
        write = []
        for r in batch:
            mine = here.get(r[0])
            if mine is None:
                stats["added"] += 1
                write.append(r)
            elif content(mine) == content(r):
                stats["duplicates"] += 1
            else:
                stats["conflicts"] += 1
                if preferred(r) > preferred(mine):
                    stats["replaced"] += 1
                    write.append(r)
        stats["rows"] += len(batch)
        into.executemany(insert, write)
    return stats

"""use_wal: WAL switched on while other processes open the same new file (the frozen-g cache
and the translation store under a launcher)."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import time
from pathlib import Path

import pytest

from arca.g_cache import GEmbeddingCache
from lira.sqlite_wal import Transaction, use_wal


class Refusing:
    """A real connection whose first ``refusals`` WAL switches answer ``error``, as SQLite does
    when another process switches the same new file at that moment."""

    def __init__(self, path: Path, refusals: int, error: str = "database is locked") -> None:
        self.conn, self.refusals, self.error, self.calls = sqlite3.connect(path), refusals, error, 0

    def execute(self, sql: str, /) -> object:
        self.calls += 1
        if self.calls <= self.refusals:
            raise sqlite3.OperationalError(self.error)
        return self.conn.execute(sql)


def mode(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])


def test_a_locked_switch_is_tried_again_until_it_takes(tmp_path):
    conn = Refusing(tmp_path / "a.sqlite", refusals=3)
    use_wal(conn, poll_s=0.001)
    assert conn.calls == 4 and mode(tmp_path / "a.sqlite") == "wal"


def test_other_errors_and_a_lock_past_the_timeout_are_raised(tmp_path):
    conn = Refusing(tmp_path / "b.sqlite", refusals=1, error="disk I/O error")
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        use_wal(conn)
    assert conn.calls == 1
    conn = Refusing(tmp_path / "c.sqlite", refusals=10**6)
    t0 = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        use_wal(conn, timeout_s=0.05, poll_s=0.001)
    assert 0.05 <= time.monotonic() - t0 < 5 and mode(tmp_path / "c.sqlite") != "wal"


def _open_cache(path: str, start: float, out: mp.Queue) -> None:
    while time.time() < start:  # both processes open the new file at the same moment
        pass
    try:
        GEmbeddingCache(path).close()
        out.put("ok")
    except Exception as e:  # the test reports it
        out.put(f"{type(e).__name__}: {e}")


@pytest.mark.slow
def test_two_processes_open_a_new_frozen_g_cache_together(tmp_path):
    # before: 13 of 200 such openings failed with "database is locked" (a crashed rank)
    ctx = mp.get_context("fork")
    for trial in range(60):
        out: mp.Queue = ctx.Queue()
        start = time.time() + 0.05
        path = str(tmp_path / f"g{trial}.sqlite")
        procs = [ctx.Process(target=_open_cache, args=(path, start, out)) for _ in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [out.get(timeout=5) for _ in procs] == ["ok", "ok"], trial


def test_a_transaction_takes_the_write_lock_first_commits_and_rolls_back(tmp_path):
    """Transaction (the store's writes, the frozen-g cache's schema): the write lock is held from
    the start, a clean exit commits, an error rolls back and is raised as it was."""
    path = tmp_path / "t.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE t (v INTEGER)")
    other = sqlite3.connect(path, timeout=0)
    with Transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")  # before any write of ours reached the file
    assert other.execute("SELECT v FROM t").fetchall() == [(1,)]
    with pytest.raises(ValueError, match="mine"), Transaction(conn):
        conn.execute("INSERT INTO t VALUES (2)")
        raise ValueError("mine")
    assert other.execute("SELECT v FROM t").fetchall() == [(1,)]
    # SQLite may end the transaction itself (a damaged file): the error is the caller's, not
    # "cannot rollback - no transaction is active"
    with pytest.raises(ValueError, match="mine"), Transaction(conn):
        conn.execute("INSERT INTO t VALUES (3)")
        conn.execute("ROLLBACK")
        raise ValueError("mine")
    assert not conn.in_transaction
    assert other.execute("SELECT v FROM t").fetchall() == [(1,)]

"""SQLite shared by the translation store and the frozen-g cache: the write-ahead log, switched
on safely while other processes open the same file, and a write transaction."""

from __future__ import annotations

import sqlite3
import time
from typing import Protocol


class Executes(Protocol):
    """What :func:`use_wal` needs of a connection."""

    def execute(self, sql: str, /) -> object:
        """Run one statement."""
        ...


def use_wal(conn: Executes, timeout_s: float = 60.0, poll_s: float = 0.02) -> None:
    """Switch ``conn``'s file to WAL, retrying for up to ``timeout_s`` while another connection
    holds it. SQLite answers "database is locked" at once, without its busy timeout, when two
    processes switch a new file together: 1 to 2 of 400 two-process openings of the frozen-g
    cache failed so, each a crashed rank under ``accelerate launch``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
            time.sleep(poll_s)


class Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, or ``ROLLBACK`` on error where SQLite has not rolled back
    already (a damaged file can end the transaction itself): the write lock is taken first."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.conn.execute("COMMIT")
        elif self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

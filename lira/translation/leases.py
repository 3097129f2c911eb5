"""Leases on translation store rows, so that several processes fill one store at once.

A process *leases* the keys it is about to generate or score (table ``leases``: key, owner =
``host:pid:start:token``, expiry) in one transaction, and the others skip leased keys
(:meth:`~lira.translation.store.TranslationStore.claim`). A lease ends when its rows are
written (:meth:`~lira.translation.store.TranslationStore.release`), when it expires
(:data:`LEASE_TTL_S` after its owner's last renewal: a live store renews its leases in a
:class:`Heartbeat` thread), or at once when its owner was a process of this host that no
longer runs (kill -9, :func:`stale`).

A lease's key is ``<namespace>:<store key>``: the namespace (``gen``, ``critic``) separates
leases of different work on the same row.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

LEASE_TTL_S = 120.0
"""Lifetime of a lease; a live process renews its leases every ``LEASE_TTL_S / 4`` seconds, so
only a dead (or another host's killed) process's leases expire."""


def proc_start(pid: int) -> str:
    """The start time of process ``pid`` (Linux clock ticks), or '' where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2 :].split()[19]
    except (OSError, ValueError, IndexError):
        return ""


def lease_owner() -> str:
    """This process's owner name for its leases: ``host:pid:start:token``."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{proc_start(pid)}:{uuid.uuid4().hex[:8]}"


def stale(owner: str, expires: float, now: float) -> bool:
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
        return bool(start) and start != proc_start(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists but belongs to another user
        pass
    current = proc_start(pid)
    return bool(start and current and current != start)


def _held(conn: sqlite3.Connection, lease_keys: list[str]) -> dict[str, tuple[str, float]]:
    """{lease key: (owner, expiry)} of the ``lease_keys`` leased now (live or stale)."""
    held: dict[str, tuple[str, float]] = {}
    for i in range(0, len(lease_keys), 500):
        part = lease_keys[i : i + 500]
        q = f"SELECT key, owner, expires FROM leases WHERE key IN ({','.join('?' * len(part))})"
        for k, owner, expires in conn.execute(q, part):
            held[k] = (owner, expires)
    return held


def take(
    conn: sqlite3.Connection, keys: Sequence[str], namespace: str, owner: str, ttl_s: float
) -> list[str]:
    """Lease for ``owner`` the distinct ``keys`` no other live process holds; returns them
    (the caller holds the transaction)."""
    now = time.time()
    names = {f"{namespace}:{k}": k for k in dict.fromkeys(keys)}
    held = _held(conn, list(names))
    rows, got = [], []
    for name, key in names.items():
        h = held.get(name)
        if h is None or h[0] == owner or stale(h[0], h[1], now):
            rows.append((name, owner, now + ttl_s))
            got.append(key)
    conn.executemany("INSERT OR REPLACE INTO leases (key, owner, expires) VALUES (?, ?, ?)", rows)
    return got


def drop(conn: sqlite3.Connection, keys: Sequence[str], namespace: str, owner: str) -> None:
    """End ``owner``'s leases on ``keys`` (the caller holds the transaction)."""
    names = [f"{namespace}:{k}" for k in dict.fromkeys(keys)]
    conn.executemany("DELETE FROM leases WHERE key = ? AND owner = ?", [(n, owner) for n in names])


def held_elsewhere(
    conn: sqlite3.Connection, keys: Sequence[str], namespace: str, owner: str
) -> list[str]:
    """The ``keys`` another live process than ``owner`` holds a lease on now."""
    now = time.time()
    names = {f"{namespace}:{k}": k for k in dict.fromkeys(keys)}
    held = _held(conn, list(names))
    return [
        names[k] for k, (o, expires) in held.items() if o != owner and not stale(o, expires, now)
    ]


def live_count(conn: sqlite3.Connection) -> int:
    """Leases held by a live process (a process may still be filling this store)."""
    now = time.time()
    rows = conn.execute("SELECT owner, expires FROM leases").fetchall()
    return sum(not stale(owner, expires, now) for owner, expires in rows)


class Heartbeat:
    """A thread that pushes an owner's lease expiry forward every ``ttl_s / 4`` seconds, on its
    own connection to the store at ``path``, until :meth:`stop`."""

    def __init__(self, path: Path, owner: Callable[[], str], ttl_s: float) -> None:
        """Start renewing the leases of ``owner()`` (read at each renewal)."""
        self.path, self.owner, self.ttl_s = path, owner, ttl_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        every = max(self.ttl_s / 4, 0.01)
        conn = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
        try:
            while not self._stop.wait(every):
                try:
                    conn.execute(
                        "UPDATE leases SET expires = ? WHERE owner = ?",
                        (time.time() + self.ttl_s, self.owner()),
                    )
                except sqlite3.Error as e:  # the main thread reports store errors
                    log.debug("lease renewal failed: %s", e)
        finally:
            conn.close()

    def stop(self) -> None:
        """Stop renewing and wait for the thread to end."""
        self._stop.set()
        self._thread.join()

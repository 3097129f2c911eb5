"""Helpers of the tests that run ``accelerate launch`` with 2 CPU processes."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port nobody listens on now (tests that launch run side by side)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def failure(stderr: str, limit: int = 8000) -> str:
    """A launched run's stderr from its first traceback on (the rank that failed first), so
    the assertion message shows the cause rather than the launcher's summary."""
    start = stderr.find("Traceback")
    return stderr[max(start, 0) :][:limit] + ("\n[...]\n" + stderr[-2000:] if start > 0 else "")

"""Helpers of the tests that run ``accelerate launch`` with 2 CPU processes."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port nobody listens on now (tests that launch run side by side)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])

"""Logging helpers shared by every stage: a warning said once per run, not once per stage."""

from __future__ import annotations

import logging

_SAID: set[tuple[str, str]] = set()
"""(logger name, formatted message) of the warnings already emitted in this process."""


def warn_once(logger: logging.Logger, msg: str, *args: object) -> bool:
    """``logger.warning(msg, *args)`` the first time this message is formatted in the process
    (``lira run`` loads the data once per stage); True when it was emitted."""
    key = (logger.name, msg % args if args else msg)
    if key in _SAID:
        logger.debug("%s (said before)", key[1])
        return False
    _SAID.add(key)
    logger.warning("%s", key[1])
    return True

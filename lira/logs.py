"""Logging helpers shared by every stage: a warning said once per run, not once per stage."""

from __future__ import annotations

import logging

_SAID: set[tuple[str, str]] = set()
"""(logger name, formatted message) of the warnings already emitted in this process."""


def warn_once(
    logger: logging.Logger, msg: str, *args: object, level: int = logging.WARNING
) -> bool:
    """``logger.log(level, msg, *args)`` the first time this message is formatted in the
    process (``lira run`` loads the data once per stage); True when it was emitted."""
    key = (logger.name, msg % args if args else msg)
    if key in _SAID:
        logger.debug("%s (said before)", key[1])
        return False
    _SAID.add(key)
    logger.log(level, "%s", key[1])
    return True


class Expected(logging.Filter):
    """Drops the records of one logger whose message holds ``marker`` (a warning the config
    makes expected), counting them in :attr:`dropped`."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker, self.dropped = marker, 0

    def filter(self, record: logging.LogRecord) -> bool:
        """False (drop) for a record that holds the marker."""
        if self.marker in record.getMessage():
            self.dropped += 1
            return False
        return True

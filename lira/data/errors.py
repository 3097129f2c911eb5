"""The one error type of the data layer: it names the file, the record and the field."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("lira.data")


class DataError(ValueError):
    """A malformed record: missing field, empty text, unknown id, bad JSON or invalid UTF-8."""

    def __init__(self, path: str | Path, record: int | str, field: str, why: str) -> None:
        self.path, self.record, self.field = str(path), record, field
        super().__init__(f"{path}: record {record}: field '{field}': {why}")


class Dropper:
    """Raises :class:`DataError` or, when ``drop`` is set, counts and logs the skipped record."""

    def __init__(self, drop: bool) -> None:
        self.drop = drop
        self.count = 0

    def __call__(self, error: DataError) -> None:
        """Handle one malformed record."""
        if not self.drop:
            raise error
        self.count += 1
        log.debug("dropped malformed record: %s", error)

    def report(self, what: str) -> int:
        """Log how many records were dropped and return the count."""
        if self.count:
            log.warning(
                "%s: dropped %d malformed record(s) (drop_malformed=true)", what, self.count
            )
        return self.count

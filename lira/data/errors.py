"""The one error type of the data layer: it names the file, the record, the field and the fix."""

from __future__ import annotations

import logging
from pathlib import Path

from lira.errors import LiRAError

log = logging.getLogger("lira.data")

DROP_FIX = "fix the record, or set data.drop_malformed: true to skip malformed records"
"""The fix printed with a malformed record."""


class DataError(LiRAError, ValueError):
    """A malformed record: missing field, empty text, unknown id, bad JSON or invalid UTF-8.

    ``record`` None means the whole file (e.g. no usable record at all).
    """

    def __init__(
        self, path: str | Path, record: int | str | None, field: str, why: str, fix: str = DROP_FIX
    ) -> None:
        self.path, self.record, self.field = str(path), record, field
        where = f"{path}: " if record is None else f"{path}: record {record}: field '{field}': "
        super().__init__(f"{where}{why}; {fix}" if fix else f"{where}{why}")


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


class Unique:
    """Remembers ids of one file; a repeated id is a DataError naming both records."""

    def __init__(self, path: str | Path, field: str) -> None:
        self.path, self.field = path, field
        self.first: dict[str, int | str] = {}

    def check(self, value: str, record: int | str) -> None:
        """Record ``value`` seen at ``record``; raise if it was seen before."""
        if value in self.first:
            raise DataError(
                self.path,
                record,
                self.field,
                f"duplicate id {value!r} (first at record {self.first[value]})",
                "make ids unique, or set data.drop_malformed: true to keep the first one",
            )
        self.first[value] = record

"""Reading JSON, JSON Lines and delimited files with errors that name file and record."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lira.data.errors import DataError, Dropper


def read_text(path: str | Path) -> str:
    """Read a UTF-8 file; invalid UTF-8 is a DataError naming the byte offset."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataError(
            path, f"line {line}", "<bytes>", f"invalid UTF-8 at byte {e.start}"
        ) from None


def read_records(path: str | Path, drop: Dropper) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based record number, mapping) from a JSON array or a JSON Lines file."""
    text = read_text(path)
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError(path, f"line {e.lineno}", "<json>", e.msg) from None
        for i, rec in enumerate(data, start=1):
            if not isinstance(rec, dict):
                drop(DataError(path, i, "<record>", "expected a JSON object"))
                continue
            yield i, rec
        return
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            drop(DataError(path, i, "<json>", e.msg))
            continue
        if not isinstance(rec, dict):
            drop(DataError(path, i, "<record>", "expected a JSON object"))
            continue
        yield i, rec


def read_table(path: str | Path, drop: Dropper) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, row) from a CSV/TSV file with a header (delimiter from the suffix)."""
    path = Path(path)
    delimiter = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    reader = csv.DictReader(read_text(path).splitlines(), delimiter=delimiter)
    for i, row in enumerate(reader, start=2):
        if None in row:
            drop(DataError(path, i, "<row>", "more columns than the header"))
            continue
        yield i, row


def field_text(rec: dict[str, Any], name: str, path: str | Path, record: int | str) -> str:
    """The non-empty string field ``name`` of a record, else a DataError."""
    if name not in rec or rec[name] is None:
        raise DataError(path, record, name, "missing")
    value = str(rec[name])
    if not value.strip():
        raise DataError(path, record, name, "empty or whitespace-only text")
    return value

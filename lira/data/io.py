"""Reading JSON, JSON Lines and delimited files with errors that name file and record."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lira.data.errors import DataError, Dropper
from lira.errors import MissingFileError

UTF8_FIX = "save the file as UTF-8"
JSON_FIX = "the file is truncated or not JSON: restore or regenerate it"
SURROGATE_FIX = "remove the \\ud800-\\udfff escape or write the character it was meant to be"


def read_bytes(path: str | Path) -> bytes:
    """The bytes of a data file; a missing path is a MissingFileError naming it."""
    path = Path(path)
    if not path.is_file():
        what = "a folder, not a file" if path.is_dir() else "not found"
        raise MissingFileError(f"data file {path}: {what}; check data.path and data.format")
    return path.read_bytes()


def data_folder(path: str | Path, kind: str, holds: str) -> Path:
    """``path`` when it is a folder; else a MissingFileError naming it (missing, or a file
    where ``kind`` wants a folder that holds ``holds``) and the fix."""
    path = Path(path)
    if path.is_dir():
        return path
    what = "is a file, not a folder" if path.exists() else "does not exist"
    raise MissingFileError(
        f"{kind} folder {path} {what}; set data.path to the folder that holds {holds} "
        "(or data.format to the data's format)"
    )


def _decode(raw: bytes, path: Path, record: int | str | None = None) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        rec = f"line {line}" if record is None else record
        raise DataError(
            path, rec, "<bytes>", f"invalid UTF-8 at byte {e.start}", UTF8_FIX
        ) from None


def read_text(path: str | Path) -> str:
    """Read a UTF-8 file; invalid UTF-8 is a DataError naming the line and byte offset."""
    return _decode(read_bytes(path), Path(path))


def lone_surrogate(obj: object, where: str = "") -> tuple[str, int] | None:
    """(JSON path, character index) of the first string in ``obj`` (keys included) holding a
    lone UTF-16 surrogate, which JSON's ``\\ud800`` escapes can produce but no text encodes;
    None when there is none."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError as e:
            return where or "<text>", e.start
        return None
    if isinstance(obj, dict):
        for k, v in obj.items():
            found = lone_surrogate(k, f"{where}<key>") or lone_surrogate(v, f"{where}.{k}")
            if found:
                return found
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found = lone_surrogate(v, f"{where}[{i}]")
            if found:
                return found
    return None


def _surrogate_error(path: str | Path, record: int | str, found: tuple[str, int]) -> DataError:
    field, at = found
    return DataError(
        path,
        record,
        field.lstrip("."),
        f"holds a lone surrogate at character {at} (not valid Unicode)",
        SURROGATE_FIX,
    )


def parse_json(text: str, path: str | Path) -> Any:
    """A whole-file JSON document; invalid or truncated JSON is a DataError naming the line,
    a string with a lone surrogate one naming where it sits."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(path, f"line {e.lineno}", "<json>", e.msg, JSON_FIX) from None
    except (ValueError, RecursionError) as e:  # e.g. a 5000-digit number, nesting too deep
        raise DataError(path, None, "<json>", f"unreadable JSON ({e})", JSON_FIX) from None
    found = lone_surrogate(data)
    if found:
        raise _surrogate_error(path, "<document>", found)
    return data


def read_records(path: str | Path, drop: Dropper) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based record number, mapping) from a JSON array or a JSON Lines file."""
    path = Path(path)
    raw = read_bytes(path)
    if raw.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"[":
        data = parse_json(_decode(raw, path), path)
        if not isinstance(data, list):
            raise DataError(path, None, "<json>", "expected a JSON array of objects", JSON_FIX)
        for i, rec in enumerate(data, start=1):
            if not isinstance(rec, dict):
                drop(DataError(path, i, "<record>", "expected a JSON object"))
                continue
            yield i, rec
        return
    for i, line_bytes in enumerate(raw.split(b"\n"), start=1):
        if not line_bytes.strip():
            continue
        try:
            line = _decode(line_bytes, path, i)
        except DataError as e:
            drop(e)
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            drop(DataError(path, i, "<json>", e.msg))
            continue
        except (ValueError, RecursionError) as e:
            drop(DataError(path, i, "<json>", f"unreadable JSON ({e})"))
            continue
        if not isinstance(rec, dict):
            drop(DataError(path, i, "<record>", "expected a JSON object"))
            continue
        found = lone_surrogate(rec)
        if found:
            drop(_surrogate_error(path, i, found))
            continue
        yield i, rec


def read_table(path: str | Path, drop: Dropper) -> Iterator[tuple[int, dict[str, str | None]]]:
    """Yield (line number, row) from a CSV/TSV file with a header (delimiter from the suffix)."""
    path = Path(path)
    delimiter = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    reader = csv.DictReader(read_text(path).splitlines(), delimiter=delimiter)
    i = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            i = reader.line_num
            drop(DataError(path, i, "<row>", f"unreadable row ({e})"))
            continue
        i = reader.line_num
        if None in row:
            drop(DataError(path, i, "<row>", "more columns than the header"))
            continue
        yield i, row


def field_text(rec: Mapping[str, object], name: str, path: str | Path, record: int | str) -> str:
    """The non-empty string field ``name`` of a record (an integer id is accepted), else a
    DataError."""
    if name not in rec or rec[name] is None:
        raise DataError(path, record, name, "missing")
    value = rec[name]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataError(path, record, name, f"expected a string, got {type(value).__name__}")
    value = str(value)
    if not value.strip():
        raise DataError(path, record, name, "empty or whitespace-only text")
    return value

"""Strict JSON files, written atomically and read with one clear error; every layer may use it.

:func:`write_json` writes into a temporary sibling (``.<name>.tmp-<pid>@<host>``) and renames it
into place, so a killed write leaves the previous file or the new one; NaN and ±inf become
null (:func:`json_safe`), never bare ``NaN``. :func:`read_json` names the file and the fix when
it is missing, not UTF-8 or not JSON.
"""

from __future__ import annotations

import json
import math
import os
import socket
from pathlib import Path
from typing import Any

import numpy as np

from lira.errors import CheckpointError, MissingFileError


def writer_tag() -> str:
    """``<pid>@<host>``: the suffix of this process's temporary files and folders."""
    return f"{os.getpid()}@{socket.gethostname()}"


def json_safe(obj: object) -> object:
    """``obj`` with NaN/±inf floats replaced by None and NumPy scalars/arrays made plain."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, np.generic):
        return json_safe(obj.item())
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def dumps_json(data: object, indent: int | None = 2) -> str:
    """Strict JSON text of ``data`` (non-finite floats become null, never bare NaN)."""
    return json.dumps(json_safe(data), indent=indent, sort_keys=False, allow_nan=False)


def write_json(path: str | Path, data: object) -> None:
    """Write strict JSON atomically (temp file + rename); NaN/inf are written as null."""
    path = Path(path)
    text = dumps_json(data)
    tmp = path.with_name(f".{path.name}.tmp-{writer_tag()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_json(path: str | Path, what: str = "file", fix: str = "") -> Any:
    """Parse a JSON file; a missing, non-UTF-8 or invalid file raises naming it and the fix."""
    path = Path(path)
    fix = fix or "restore it, or delete the folder that holds it and run the stage again"
    if not path.is_file():
        raise MissingFileError(f"{what} {path} does not exist; {fix}")
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{what} {path} is not UTF-8 (byte {e.start}); {fix}") from None
    except (ValueError, RecursionError) as e:
        raise CheckpointError(f"{what} {path} is not valid JSON ({e}); {fix}") from None


def read_json_object(path: str | Path, what: str = "file", fix: str = "") -> dict[str, Any]:
    """:func:`read_json` of a file that must hold a JSON object; anything else raises naming it."""
    data = read_json(path, what, fix)
    if not isinstance(data, dict):
        fix = fix or "restore it, or delete the folder that holds it and run the stage again"
        raise CheckpointError(f"{what} {path} is not a JSON object; {fix}")
    return data

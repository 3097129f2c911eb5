"""Checkpoint manifests and integrity: what a saved folder holds and whether it is intact.

Before a folder is renamed into place, :func:`~lira.checkpoint.folders.atomic_dir` writes a
manifest (:data:`MANIFEST`: every file but the model card :data:`CARD`, its size and its
sha256); :func:`checkpoint_problem` says why a folder does not match it (size or checksum), why
its JSON / safetensors files do not parse or which of its tensors holds NaN/inf. A folder without
a manifest, whose manifest lacks a file's sha256, or that holds a file its manifest does not
list, is damaged (LiRA never writes one): the manifest is the list of what loads. The card, which
sentence-transformers rewrites when it saves and no loader reads, hidden files
(``.gitattributes``, a hub download's ``.cache/``) and sub-folders' own manifests (checked when
that sub-folder loads) are not listed. :func:`read_meta` reads the metadata
of a self-describing model folder and checks its format (a ``models.cache_dir`` it names is only
read: :mod:`lira.checkpoint.cache_dir`).
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lira.checkpoint.cache_dir import read_only_cache_dir
from lira.errors import CheckpointError, MissingFileError
from lira.jsonio import read_json

MANIFEST = "lira_manifest.json"
"""Written by :func:`~lira.checkpoint.folders.atomic_dir`: {"format", "files": {relative path:
size in bytes}, "sha256": {relative path: hex digest}} (manifests of format 1 have no
"sha256")."""
MANIFEST_FORMAT = "lira-manifest/2"
CARD = "README.md"
"""A folder's model card: documentation that no loader reads, so it is left out of the manifest
and never checked (sentence-transformers writes its own card over it when it saves a model)."""


def sha256_file(path: str | Path) -> str:
    """The hex sha256 of a file's bytes (read in 1 MiB chunks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(folder: str | Path) -> dict[str, int]:
    """Record every file of ``folder`` but the card (relative path -> size, and its sha256) in
    :data:`MANIFEST`; returns the sizes."""
    folder = Path(folder)
    skip = {folder / MANIFEST, folder / CARD}
    paths = [p for p in sorted(folder.rglob("*")) if p.is_file() and p not in skip]
    files = {p.relative_to(folder).as_posix(): p.stat().st_size for p in paths}
    sums = {p.relative_to(folder).as_posix(): sha256_file(p) for p in paths}
    doc = {"format": MANIFEST_FORMAT, "files": files, "sha256": sums}
    (folder / MANIFEST).write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return files


def nonfinite_tensor(path: str | Path) -> str | None:
    """The name of the first floating-point tensor of a ``.safetensors`` file that holds NaN or
    inf (None when all are finite); read one tensor at a time."""
    import torch
    from safetensors import safe_open

    with safe_open(str(path), framework="pt", device="cpu") as f:
        for name in f.keys():
            t = f.get_tensor(name)
            if (t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t).all()):
                return name
    return None


def safetensors_problem(path: Path) -> str | None:
    """Why a .safetensors file is damaged (header or size), None when it looks whole."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return f"{path.name} is truncated ({size} bytes)"
            (n,) = struct.unpack("<Q", head)
            if n > size - 8 or n > 100_000_000:
                return f"{path.name} has a damaged header"
            header = json.loads(f.read(n).decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as e:
        return f"{path.name} has a damaged header ({type(e).__name__})"
    if not isinstance(header, dict):
        return f"{path.name} has a damaged header"
    end = 0
    for k, v in header.items():
        if k == "__metadata__":
            continue
        try:
            end = max(end, int(v["data_offsets"][1]))
        except (TypeError, KeyError, IndexError, ValueError):
            return f"{path.name} has a damaged header (tensor {k!r})"
    if 8 + n + end != size:
        return f"{path.name} has {size} bytes, its header describes {8 + n + end}"
    return None


def unlisted_file(folder: Path, listed: set[str]) -> str | None:
    """The first file under ``folder`` (relative path) that ``listed`` lacks, skipping the model
    card, hidden paths and sub-folders' own :data:`MANIFEST`; None when every file is listed."""
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        hidden = any(part.startswith(".") for part in rel.split("/"))
        if (
            p.name != MANIFEST
            and rel != CARD
            and not hidden
            and rel not in listed
            and not p.is_dir()
        ):
            return rel
    return None


def checkpoint_problem(folder: str | Path, verify: bool = False) -> str | None:
    """Why ``folder`` is not a complete checkpoint, or None when it looks intact.

    Checks the manifest (every listed file present with its size and sha256, every file
    present listed: :func:`unlisted_file`), that every JSON file parses and that every safetensors file's header matches its size. Cheap: no hashing.
    With ``verify`` (before a checkpoint is trusted: resume, load) also every file's sha256
    against the manifest and that every floating-point tensor is finite.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return "not a folder"
    mf = folder / MANIFEST
    if not mf.is_file():  # every folder LiRA writes has one: its absence hides any damage
        return f"{MANIFEST} is missing" if any(folder.iterdir()) else "empty folder"
    try:
        doc = json.loads(mf.read_text(encoding="utf-8"))
        items = [(str(k), int(v)) for k, v in doc["files"].items()]
        sums = {str(k): str(v) for k, v in doc["sha256"].items()}
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError, RecursionError):
        return f"{MANIFEST} is damaged"
    for rel, size in items:
        if rel == CARD:  # older manifests list the card: it may have been rewritten since
            continue
        p = folder / rel
        if not p.is_file():
            return f"{rel} is missing"
        if p.stat().st_size != size:
            return f"{rel} has {p.stat().st_size} bytes, the manifest says {size}"
        if rel not in sums:
            return f"{rel} has no sha256 in {MANIFEST}"
    extra = unlisted_file(folder, {rel for rel, _ in items})
    if extra is not None:
        return f"{extra} is not listed in {MANIFEST} (LiRA did not write it, so it is never loaded)"
    if verify:
        for rel, digest in sums.items():
            if rel != CARD and (folder / rel).is_file() and sha256_file(folder / rel) != digest:
                return f"{rel} does not match its sha256 in {MANIFEST} (its bytes changed)"
    for p in sorted(folder.rglob("*")):
        if not p.is_file():
            continue
        if p.suffix == ".json":
            try:
                json.loads(p.read_bytes().decode("utf-8"))
            except (ValueError, UnicodeDecodeError, RecursionError):
                return f"{p.relative_to(folder)} is not valid JSON"
        elif p.suffix == ".safetensors":
            why = safetensors_problem(p)
            if why:
                return why
            if verify:
                try:
                    bad = nonfinite_tensor(p)
                except Exception as e:  # SafetensorError, ValueError, ... from damaged bytes
                    return f"{p.relative_to(folder)} cannot be read ({type(e).__name__})"
                if bad is not None:
                    return f"{p.relative_to(folder)}: tensor {bad!r} holds NaN or inf"
    return None


def read_meta(
    path: str | Path,
    config_name: str,
    fmt: str,
    missing: str,
    retired: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The JSON metadata of a self-describing checkpoint folder, checked for its format.

    ``missing`` completes the error raised when ``path`` has no ``config_name``; ``retired``
    maps older formats of this kind of folder to what changed and the fix, for their error.
    """
    path = Path(path)
    cfg_file = path / config_name
    if not path.exists():
        raise MissingFileError(f"model folder {path} does not exist; it should be {missing}")
    if not cfg_file.is_file():
        raise MissingFileError(f"{path} is not {missing}")
    meta = read_json(
        cfg_file,
        "model metadata",
        f"the folder {path} is damaged: save or train it again (or restore {config_name})",
    )
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        if retired and got in retired:
            raise CheckpointError(f"{path} is a {got} model folder: {retired[got]}")
        raise CheckpointError(
            f"{cfg_file}: unknown format {got!r}, expected {fmt}; point to a folder saved by "
            "this LiRA version"
        )
    return read_only_cache_dir(meta, path)

"""Atomic, self-describing checkpoint folders and exact-resume training state, safe to load.

A checkpoint is written into a temporary sibling folder (``.<name>.tmp-<pid>@<host>``) and
renamed into place, so a run killed at any moment leaves either the previous checkpoint or
the new one, never half of one. Before the rename, :func:`atomic_dir` writes a manifest
(``lira_manifest.json``: every file, its size and its sha256); :func:`latest_checkpoint` skips
a folder whose files do not match it (size or checksum), whose JSON / safetensors files do not
parse or whose tensors hold NaN/inf, says so, and falls back to the previous intact one, after
removing the temporary folders of saves that were killed (:func:`clean_stale`); when no folder
is intact it raises. A disk that fills up during a save is one :class:`CheckpointError` naming
the folder and the space needed.

Trainer state (optimizer state dicts, counters, histories, RNG states) is stored with
:func:`save_state` as ``<name>.safetensors`` (every tensor) + ``<name>.json`` (everything else),
and read back with :func:`load_state`: neither format can run code, unlike pickle /
``torch.load(weights_only=False)``. :func:`load_torch_safe` reads a legacy ``.pt`` file with
``weights_only=True`` only. Damaged or missing files raise :class:`CheckpointError` (or
:class:`~lira.errors.MissingFileError`) naming the file and the fix.

Every checkpoint of the Arca, LaSR and baseline trainers also holds its run fingerprint
(:data:`FINGERPRINT_FILE`, :func:`run_fingerprint`: the config values that shaped it);
``--resume`` continues a checkpoint only when it matches the config (:func:`check_fingerprint`),
and a fresh run first removes a previous run's checkpoints (:func:`clear_previous_run`).

A folder without a manifest, or whose manifest lacks a file's sha256, is damaged (LiRA never
writes one). One run writes into an output folder at a time: :func:`run_lock` holds
``fcntl.flock`` on :data:`RUN_LOCK` there, and a second run stops naming the holder's pid.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import logging
import math
import os
import random
import re
import shutil
import socket
import struct
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lira.errors import LiRAError, MissingFileError

if TYPE_CHECKING:
    from torch import Tensor

    from lira.translation.config import ModelsRun, PoolRun

log = logging.getLogger(__name__)

STEP_PREFIX = "step-"
MANIFEST = "lira_manifest.json"
"""Written by :func:`atomic_dir`: {"format", "files": {relative path: size in bytes},
"sha256": {relative path: hex digest}} (manifests of format 1 have no "sha256")."""
MANIFEST_FORMAT = "lira-manifest/2"
STATE_FORMAT = "lira-state/1"
STATE_NAME = "trainer_state"

_ACTIVE: set[Path] = set()
"""Temporary folders this process is writing now (never cleaned as stale)."""
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)(?:@(?P<host>.+))?$")


class CheckpointError(LiRAError, ValueError):
    """A checkpoint or metadata file is damaged, incomplete, unsafe or of another format."""


def state_mismatch(path: str | Path, what: str, error: Exception) -> CheckpointError:
    """The error for a trainer state at ``path`` that does not fit the model being resumed."""
    return CheckpointError(
        f"{path}: the {what} trainer state does not fit this model ({type(error).__name__}: "
        f"{str(error)[:200]}); delete this checkpoint to resume from the previous one, or run "
        "without --resume"
    )


# --------------------------------------------------------------------------------------------
# Atomic folders and files
# --------------------------------------------------------------------------------------------


def _tag() -> str:
    return f"{os.getpid()}@{socket.gethostname()}"


@contextmanager
def atomic_dir(final: str | Path, manifest: bool = True) -> Iterator[Path]:
    """Yield a temporary folder that replaces ``final`` only once the block succeeds.

    With ``manifest`` the folder gets :data:`MANIFEST` (file sizes) before it is renamed. What
    killed saves left beside ``final`` is handled first (:func:`clean_stale`), so a final folder
    outside a checkpoint root (``<output_dir>/lira-model``) leaves no ``.tmp-`` folder either.
    """
    final = Path(final)
    for p in (*reversed(final.parents), final):
        if p.exists() and not p.is_dir():
            raise CheckpointError(
                f"cannot save {final}: {p} is a file, not a folder; move or delete it (or choose "
                "another --output-dir)"
            )
    final.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(final.parent)
    tmp = final.parent / f".{final.name}.tmp-{_tag()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    _ACTIVE.add(tmp.resolve())
    try:
        yield tmp
        if manifest:
            write_manifest(tmp)
        old = final.parent / f".{final.name}.old-{_tag()}"
        if final.is_symlink():  # replaced by the real folder; what it points to stays untouched
            log.warning("%s was a symbolic link (to %s); it is replaced by the saved folder",
                        final, os.readlink(final))  # fmt: skip
        if final.exists() or final.is_symlink():
            final.rename(old)
        tmp.rename(final)
        if old.is_symlink() or old.is_file():
            old.unlink()
        elif old.exists():
            shutil.rmtree(old)
    except BaseException as e:
        written = _tree_size(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        if _disk_full(e):
            raise disk_full(final, written + getattr(e, "needed", 0)) from None
        raise
    finally:
        _ACTIVE.discard(tmp.resolve())


RUN_LOCK = ".lira-run.lock"
"""The file in an output folder that a writing run holds locked (``fcntl.flock``, released by
the kernel when the process ends, also on kill -9); it holds the holder's pid and command."""
_HELD: dict[Path, tuple[int, int]] = {}
"""Output folders this process holds locked: {folder: (file descriptor, depth)}."""


class RunLockedError(LiRAError, RuntimeError):
    """Another process is writing into the same output folder."""


def output_folder_problem(folder: str | Path) -> str | None:
    """Why ``folder`` cannot be an output folder (it or a parent is a file), else None."""
    folder = Path(folder)
    for p in (*reversed(folder.parents), folder):
        if p.exists() and not p.is_dir():
            what = "is a file" if p == folder else f"is under {p}, which is a file"
            return (
                f"output folder {folder} {what}, not a folder; choose another --output-dir "
                f"(or move {p} away)"
            )
    return None


@contextmanager
def run_lock(folder: str | Path, what: str) -> Iterator[None]:
    """Hold ``folder``'s :data:`RUN_LOCK` while a run writes into it (re-entrant in one
    process; only the main process of a multi-process launch takes it).

    A second run into the same folder stops at once with :class:`RunLockedError` naming the
    holder's pid: two runs would delete each other's checkpoints and overwrite the final
    model. The kernel releases the lock when the holder ends, however it ends.
    """
    import fcntl

    folder = Path(folder)
    if int(os.environ.get("RANK", "0") or 0) != 0:  # ranks > 0 run under rank 0's lock
        yield
        return
    problem = output_folder_problem(folder)
    if problem:
        raise CheckpointError(problem)
    folder.mkdir(parents=True, exist_ok=True)
    key = folder.resolve()
    if key in _HELD:
        fd, depth = _HELD[key]
        _HELD[key] = (fd, depth + 1)
        try:
            yield
        finally:
            fd, depth = _HELD[key]
            _HELD[key] = (fd, depth - 1)
        return
    fd = os.open(folder / RUN_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").split("\n")
        os.close(fd)
        pid = holder[0].strip() or "unknown"
        doing = f" (`{holder[1].strip()}`)" if len(holder) > 1 and holder[1].strip() else ""
        raise RunLockedError(
            f"{folder} is in use by another LiRA run, pid {pid}{doing}: two runs into one "
            "output folder overwrite each other's checkpoints; wait for it to end (or stop "
            "it), or choose another --output-dir"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{what}\n".encode(), 0)
    except OSError:  # a full disk: the lock itself still holds
        pass
    _HELD[key] = (fd, 1)
    try:
        yield
    finally:
        del _HELD[key]
        os.close(fd)  # releases the flock


class DiskFullError(OSError):
    """A file could not be written because the disk is full; ``needed``: its size in bytes."""

    def __init__(self, path: str | Path, needed: int) -> None:
        super().__init__(errno.ENOSPC, "No space left on device", str(path))
        self.needed = needed


def _tree_size(folder: Path) -> int:
    """Bytes of the files under ``folder`` (0 when it is gone)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def _disk_full(e: BaseException) -> bool:
    """True for a failed write because the disk or the quota is full (an OSError, or the
    SafetensorError that safetensors raises for it)."""
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(e)
    return type(e).__name__ == "SafetensorError" and (
        "No space left" in text or "os error 28" in text or "StorageFull" in text
    )


def disk_full(final: str | Path, written: int = 0) -> CheckpointError:
    """The one-line error for a save of ``final`` that ran out of disk space: the folder, the
    free space and the space needed (the previous checkpoint's size, else what was written)."""
    final = Path(final)
    previous = [p for p in (final, *step_dirs(final.parent)) if p.is_dir()]
    need = max([written, *(_tree_size(p) for p in previous)])
    try:
        free = shutil.disk_usage(final.parent).free
    except OSError:
        free = 0
    needs = (
        f"the checkpoint needs about {human_size(need)}"
        if need
        else "the disk filled before its first file was written"
    )
    return CheckpointError(
        f"cannot save {final}: no space left on device ({human_size(free)} free, {needs}); "
        "free disk space or choose another --output-dir"
    )


def human_size(n: float) -> str:
    """``n`` bytes as ``12 bytes``, ``3.4 KiB``, ``5.6 MiB`` or ``7.8 GiB`` (never ``0.0 MiB``)."""
    if n < 1024:
        return f"{int(n)} bytes"
    for unit in ("KiB", "MiB"):
        n /= 1024
        if n < 1024:
            return f"{n:.1f} {unit}"
    return f"{n / 1024:.1f} GiB"


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
    tmp = path.with_name(f".{path.name}.tmp-{_tag()}")
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


# --------------------------------------------------------------------------------------------
# Manifests and integrity
# --------------------------------------------------------------------------------------------


def sha256_file(path: str | Path) -> str:
    """The hex sha256 of a file's bytes (read in 1 MiB chunks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(folder: str | Path) -> dict[str, int]:
    """Record every file of ``folder`` (relative path -> size, and its sha256) in
    :data:`MANIFEST`; returns the sizes."""
    folder = Path(folder)
    paths = [p for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST]
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


def _safetensors_problem(path: Path) -> str | None:
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


def checkpoint_problem(folder: str | Path, verify: bool = False) -> str | None:
    """Why ``folder`` is not a complete checkpoint, or None when it looks intact.

    Checks the manifest (every listed file present with its size), that every JSON file
    parses and that every safetensors file's header matches its size. Cheap: no hashing.
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
        p = folder / rel
        if not p.is_file():
            return f"{rel} is missing"
        if p.stat().st_size != size:
            return f"{rel} has {p.stat().st_size} bytes, the manifest says {size}"
        if rel not in sums:
            return f"{rel} has no sha256 in {MANIFEST}"
    if verify:
        for rel, digest in sums.items():
            if (folder / rel).is_file() and sha256_file(folder / rel) != digest:
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
            why = _safetensors_problem(p)
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


# --------------------------------------------------------------------------------------------
# Step folders: latest, stale leftovers, pruning
# --------------------------------------------------------------------------------------------


def step_dir(root: str | Path, step: int) -> Path:
    """The folder of the checkpoint taken after ``step`` optimisation steps."""
    return Path(root) / f"{STEP_PREFIX}{step:08d}"


def step_of(path: str | Path) -> int | None:
    """The step number of a ``step-*`` folder (None for other names)."""
    name = Path(path).name
    rest = name[len(STEP_PREFIX) :] if name.startswith(STEP_PREFIX) else ""
    return int(rest) if rest.isdigit() else None


def step_dirs(root: str | Path) -> list[Path]:
    """Every ``step-*`` folder under ``root``, oldest first (by step number)."""
    root = Path(root)
    if not root.is_dir():
        return []
    steps = [p for p in root.iterdir() if p.is_dir() and step_of(p) is not None]
    return sorted(steps, key=lambda p: step_of(p) or 0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by another user
        return True
    return True


def clean_stale(root: str | Path) -> list[str]:
    """Remove what saves killed mid-way left in ``root``; returns the names handled.

    ``.<name>.tmp-<pid>`` folders/files of processes of this host that no longer run (or of
    this process, when not being written) are deleted. A kill between the two renames of
    :func:`atomic_dir` leaves ``<name>`` absent: the complete new version (tmp) or else the
    previous one (``.old-``) is renamed back into place.
    """
    root = Path(root)
    if not root.is_dir():
        return []
    host = socket.gethostname()
    stale = []
    for p in root.iterdir():
        m = _LEFTOVER.match(p.name)
        if m is None or (m["host"] and m["host"] != host) or p.resolve() in _ACTIVE:
            continue
        pid = int(m["pid"])
        if pid != os.getpid() and _alive(pid):
            continue
        stale.append((p, m))
    handled = []
    for p, m in sorted(stale, key=lambda x: x[1]["kind"] != "old"):  # .old- first
        if not p.exists():
            continue
        final = root / m["name"]
        if m["kind"] == "old" and not final.exists():
            suffix = p.name[p.name.rindex(".old-") + len(".old-") :]
            tmp = root / f".{m['name']}.tmp-{suffix}"
            if tmp.is_dir() and checkpoint_problem(tmp) is None:
                tmp.rename(final)
                log.warning("recovered %s from an interrupted save (new version)", final)
            else:
                p.rename(final)
                log.warning("recovered %s from an interrupted save (previous version)", final)
                handled.append(p.name)
                continue
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        log.info("removed %s left by an interrupted save", p)
        handled.append(p.name)
    return handled


def latest_checkpoint(root: str | Path, clean: bool = True) -> Path | None:
    """The most recent intact ``step-*`` folder under ``root`` (None if there is none).

    Each is verified (sizes, sha256, parsing, finite tensors: :func:`checkpoint_problem`); a
    damaged or incomplete one is skipped with a warning naming the reason, and the previous one
    tried. When there are ``step-*`` folders but none is intact, CheckpointError. With
    ``clean`` the leftovers of killed saves are removed first.
    """
    root = Path(root)
    if not root.is_dir():
        return None
    if clean:
        clean_stale(root)
    damaged = []
    for p in reversed(step_dirs(root)):
        why = checkpoint_problem(p, verify=True)
        if why is None:
            if damaged:
                log.warning("resuming from %s, the newest intact checkpoint", p.name)
            return p
        damaged.append(f"{p.name}: {why}")
        log.warning("checkpoint %s is damaged or incomplete (%s); trying the previous one", p, why)
    if damaged:
        raise CheckpointError(
            f"no intact checkpoint to resume under {root} ({'; '.join(damaged[:3])}"
            f"{'; …' if len(damaged) > 3 else ''}); delete {root} and run without --resume to "
            "start over"
        )
    return None


def prune_checkpoints(root: str | Path, keep: int, protect: str | Path | None = None) -> list[Path]:
    """Delete all but the ``keep`` newest intact ``step-*`` folders (and any damaged older one).

    ``protect`` (e.g. the folder just saved) is never deleted. Returns the deleted folders.
    """
    steps = step_dirs(root)
    keep_set: set[Path] = set()
    for p in reversed(steps):
        if len(keep_set) >= keep:
            break
        if checkpoint_problem(p) is None:
            keep_set.add(p)
    if protect is not None:
        keep_set.add(Path(protect))
    newest_kept = max((step_of(p) or 0 for p in keep_set), default=-1)
    removed = []
    for p in steps:
        if p in keep_set or (step_of(p) or 0) > newest_kept:
            continue  # never delete a folder newer than what is kept (it may be being checked)
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
    return removed


# --------------------------------------------------------------------------------------------
# Trainer state without pickle
# --------------------------------------------------------------------------------------------

_RESERVED = ("__tensor__", "__ndarray__", "__np__", "__float__", "__tuple__", "__dict__",
             "__bytes__")  # fmt: skip


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _encode(obj: object, tensors: dict[str, Tensor], where: str, seen: set[int]) -> object:
    import torch

    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else {"__float__": repr(float(obj))}
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        t = t.cpu() if t.device.type != "cpu" else t
        ptr = t.untyped_storage().data_ptr() if t.numel() else None
        if not t.is_contiguous() or (ptr is not None and ptr in seen):
            t = t.contiguous().clone()  # safetensors refuses views and shared storage
        if ptr is not None:
            seen.add(t.untyped_storage().data_ptr())
        name = f"t{len(tensors)}"
        tensors[name] = t
        return {"__tensor__": name}
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise TypeError(f"{where}: object arrays cannot be stored safely")
        a = np.ascontiguousarray(obj)
        return {"__ndarray__": a.dtype.str, "shape": list(a.shape), "data": _b64(a.tobytes())}
    if isinstance(obj, np.generic):
        return {"__np__": obj.dtype.str, "data": _b64(obj.tobytes())}
    if isinstance(obj, (bytes, bytearray)):
        return {"__bytes__": _b64(bytes(obj))}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, tensors, f"{where}[{i}]", seen)
                              for i, v in enumerate(obj)]}  # fmt: skip
    if isinstance(obj, list):
        return [_encode(v, tensors, f"{where}[{i}]", seen) for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and k not in _RESERVED for k in obj):
            return {k: _encode(v, tensors, f"{where}[{k!r}]", seen) for k, v in obj.items()}
        return {"__dict__": [[_encode(k, tensors, f"{where} key", seen),
                              _encode(v, tensors, f"{where}[{k!r}]", seen)]
                             for k, v in obj.items()]}  # fmt: skip
    raise TypeError(
        f"{where}: cannot store a {type(obj).__name__} safely; use tensors, NumPy arrays, "
        "numbers, strings, bytes, lists, tuples and dicts"
    )


def _decode(obj: object, tensors: dict[str, Tensor], where: str) -> object:
    if isinstance(obj, list):
        return [_decode(v, tensors, where) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__tensor__" in obj:
        name = obj["__tensor__"]
        if name not in tensors:
            raise CheckpointError(f"{where}: tensor {name!r} is missing from the tensor file")
        return tensors[name]
    if "__ndarray__" in obj:
        flat = np.frombuffer(base64.b64decode(obj["data"]), dtype=np.dtype(obj["__ndarray__"]))
        return flat.reshape(obj["shape"]).copy()
    if "__np__" in obj:
        return np.frombuffer(base64.b64decode(obj["data"]), dtype=np.dtype(obj["__np__"]))[0]
    if "__float__" in obj:
        return float(obj["__float__"])
    if "__bytes__" in obj:
        return base64.b64decode(obj["__bytes__"])
    if "__tuple__" in obj:
        return tuple(_decode(v, tensors, where) for v in obj["__tuple__"])
    if "__dict__" in obj:
        return {_as_key(_decode(k, tensors, where)): _decode(v, tensors, where)
                for k, v in obj["__dict__"]}  # fmt: skip
    return {k: _decode(v, tensors, where) for k, v in obj.items()}


def _as_key(k: object) -> object:
    return tuple(_as_key(x) for x in k) if isinstance(k, list) else k


def save_state(folder: str | Path, state: object, name: str = STATE_NAME) -> None:
    """Write ``state`` as ``<name>.safetensors`` (tensors) + ``<name>.json`` (the rest).

    ``state`` may nest dicts (any hashable keys, e.g. optimizer ``state_dict()``), lists,
    tuples, numbers (NaN/inf kept), strings, bytes, torch tensors (any device; loaded on CPU)
    and NumPy arrays/scalars (e.g. :func:`rng_state`). Nothing in it can run code on load.
    """
    from safetensors.torch import save_file

    folder = Path(folder)
    tensors: dict[str, Tensor] = {}
    doc = {"format": STATE_FORMAT, "state": _encode(state, tensors, "state", set())}
    bad = _nonfinite_names(tensors)
    if bad:
        where = _tensor_paths(doc["state"], "state", {})
        raise CheckpointError(
            f"refusing to save a trainer state with NaN or inf in "
            f"{', '.join(where.get(n, n) for n in bad[:3])}: training diverged; lower the "
            "learning rate (or resume from the last checkpoint)"
        )
    try:
        save_file(tensors, str(folder / f"{name}.safetensors"), metadata={"format": STATE_FORMAT})
    except Exception as e:
        if _disk_full(e):
            need = sum(t.numel() * t.element_size() for t in tensors.values())
            raise DiskFullError(folder / f"{name}.safetensors", need) from None
        raise
    (folder / f"{name}.json").write_text(json.dumps(doc, allow_nan=False), encoding="utf-8")


def _nonfinite_names(tensors: Mapping[str, Tensor]) -> list[str]:
    """The names of the floating-point tensors that hold NaN or inf."""
    import torch

    return [
        k
        for k, t in tensors.items()
        if (t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t).all())
    ]


def _tensor_paths(obj: object, where: str, out: dict[str, str]) -> dict[str, str]:
    """{tensor name: where it sits in the state} of an encoded state (for messages)."""
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            _tensor_paths(v, f"{where}[{i}]", out)
    elif isinstance(obj, dict):
        if "__tensor__" in obj:
            out[str(obj["__tensor__"])] = where
        for k, v in obj.items():
            if k in ("__tuple__", "__dict__"):
                _tensor_paths(v, where, out)
            elif not k.startswith("__"):
                _tensor_paths(v, f"{where}[{k!r}]", out)
    return out


def load_state(folder: str | Path, name: str = STATE_NAME) -> Any:
    """Read what :func:`save_state` wrote (tensors on CPU); damage raises CheckpointError."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(folder)
    fix = (
        f"the checkpoint {folder} is damaged: delete it to resume from the previous one, or "
        "start without --resume"
    )
    doc = read_json(folder / f"{name}.json", "trainer state", fix)
    if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT or "state" not in doc:
        raise CheckpointError(
            f"{folder / f'{name}.json'}: not a LiRA trainer state (format "
            f"{doc.get('format') if isinstance(doc, dict) else None!r}, expected {STATE_FORMAT}); "
            f"{fix}"
        )
    tf = folder / f"{name}.safetensors"
    if not tf.is_file():
        raise MissingFileError(f"trainer state {tf} does not exist; {fix}")
    try:
        tensors = load_file(str(tf), device="cpu")
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{tf} is not a readable safetensors file ({e}); {fix}") from None
    bad = _nonfinite_names(tensors)
    if bad:
        raise CheckpointError(f"{tf}: tensor {bad[0]!r} holds NaN or inf; {fix}")
    try:
        return _decode(doc["state"], tensors, str(folder / f"{name}.json"))
    except CheckpointError:
        raise
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise CheckpointError(f"{folder / f'{name}.json'} is damaged ({e}); {fix}") from None


def load_safetensors(path: str | Path, device: str = "cpu") -> dict[str, Tensor]:
    """The tensors of a ``.safetensors`` file; a missing or damaged file names itself and the fix."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"weights file {path} does not exist; save or train the model again")
    why = _safetensors_problem(path)
    try:
        if why is None:
            tensors = load_file(str(path), device=device)
            bad = _nonfinite_names(tensors)
            if not bad:
                return tensors
            why = f"tensor {bad[0]!r} holds NaN or inf"
    except (SafetensorError, OSError, ValueError) as e:
        why = str(e)
    raise CheckpointError(
        f"weights file {path} is damaged ({why}); restore it, or save or train the model again"
    )


def load_torch_safe(path: str | Path) -> Any:
    """A legacy ``.pt`` file read with ``torch.load(weights_only=True)`` (no code can run)."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path} does not exist")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # UnpicklingError, RuntimeError, EOFError, ... from untrusted bytes
        raise CheckpointError(
            f"{path} cannot be loaded safely ({type(e).__name__}: {str(e)[:200]}); it holds "
            "objects other than tensors and plain containers (or is damaged). LiRA never "
            "unpickles such files: delete the checkpoint and train without --resume"
        ) from None


def rng_state() -> dict[str, object]:
    """The Python, NumPy and torch RNG states (to restore on resume)."""
    import torch

    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the states captured by :func:`rng_state` (also after save/load_state)."""
    import torch

    py, ns = state["python"], state["numpy"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    np.random.set_state(tuple(ns) if isinstance(ns, list) else ns)
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# --------------------------------------------------------------------------------------------
# Self-describing folders
# --------------------------------------------------------------------------------------------


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
    return meta


# --------------------------------------------------------------------------------------------
# Run fingerprints: which config a checkpoint was trained with (shared by the Arca, LaSR and
# baseline trainers: ``--resume`` refuses a checkpoint of another config)
# --------------------------------------------------------------------------------------------

FINGERPRINT_FILE = "run_fingerprint.json"
"""Written into every checkpoint: the config values that shaped the training it holds."""
FINGERPRINT_FORMAT = "lira-fingerprint/1"
_RUNTIME_KEYS = frozenset({"base_url", "api_key_env", "batch_size", "max_concurrency",
                           "timeout_s", "max_retries", "tensor_parallel_size"})  # fmt: skip
"""Translator / critic fields that change how fast candidates come, not which ones."""


def _flatten(obj: object, prefix: str, out: dict[str, object]) -> dict[str, object]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, (list, tuple)) and any(isinstance(v, dict) for v in obj):
        for i, v in enumerate(obj):
            _flatten(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = list(obj) if isinstance(obj, tuple) else obj
    return out


def run_fingerprint(
    stage: str, sections: Mapping[str, object], skip: Iterable[str] = ()
) -> dict[str, object]:
    """``{"format", "stage", "hash", "config"}`` of the config values that shape ``stage``.

    ``sections`` maps a name to a config dataclass or mapping; ``config`` is the flattened
    ``{dotted key: value}`` (minus the dotted keys in ``skip``), ``hash`` a short digest of it.
    """
    flat: dict[str, object] = {}
    for name, sec in sections.items():
        _flatten(asdict(sec) if hasattr(sec, "__dataclass_fields__") else sec, name, flat)
    skipped = set(skip)
    flat = {k: v for k, v in sorted(flat.items()) if k not in skipped}
    blob = json.dumps(flat, sort_keys=True, default=str)
    digest = hashlib.sha256(blob.encode()).hexdigest()[:16]
    return {"format": FINGERPRINT_FORMAT, "stage": stage, "hash": digest, "config": flat}


def models_fields(cfg: ModelsRun) -> dict[str, object]:
    """``models.*`` without the fields that only say where models are cached."""
    d = asdict(cfg.models)
    for k in ("cache_dir", "encoder_cache"):
        d.pop(k, None)
    return d


def translation_fields(cfg: PoolRun) -> dict[str, object]:
    """The ``translation.*`` values that decide the training candidates and their scores: the
    active translators (pass@k) and the critic, without endpoints, keys and batch sizes."""
    tc = cfg.translation

    def plain(obj: object) -> dict[str, object]:
        return {k: v for k, v in asdict(obj).items() if k not in _RUNTIME_KEYS}

    return {
        "pass_at_k": tc.pass_at_k,
        "num_candidates": tc.num_candidates,
        "store": tc.store,
        "source_max_chars": tc.source_max_chars,
        "active": [plain(t) for t in tc.active_translators()],
        "critic": plain(tc.critic),
    }


def write_fingerprint(folder: str | Path, fingerprint: Mapping[str, object]) -> None:
    """Store ``fingerprint`` in a checkpoint folder being written (inside ``atomic_dir``)."""
    (Path(folder) / FINGERPRINT_FILE).write_text(json.dumps(fingerprint, indent=1),
                                                 encoding="utf-8")  # fmt: skip


def read_fingerprint(folder: str | Path) -> dict[str, object] | None:
    """The fingerprint stored in a checkpoint folder; None when absent or unreadable."""
    path = Path(folder) / FINGERPRINT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    ok = isinstance(data, dict) and isinstance(data.get("config"), dict) and "hash" in data
    return data if ok else None


def fingerprint_changes(
    old: Mapping[str, object], new: Mapping[str, object], limit: int = 6
) -> str:
    """``key: old -> new`` for the config values that differ (at most ``limit`` named)."""
    a, b = old.get("config", {}), new.get("config", {})
    keys = sorted(k for k in set(a) | set(b) if a.get(k, "<unset>") != b.get(k, "<unset>"))
    parts = [f"{k}: {a.get(k, '<unset>')!r} -> {b.get(k, '<unset>')!r}" for k in keys[:limit]]
    if len(keys) > limit:
        parts.append(f"and {len(keys) - limit} more")
    return "; ".join(parts) or "a value outside the compared keys"


def check_fingerprint(folder: str | Path, fingerprint: Mapping[str, object], what: str) -> None:
    """Refuse (``CheckpointError``) to resume ``folder`` unless it was written with the same
    training config as ``fingerprint``; the message names the changed keys and the fix."""
    folder = Path(folder)
    saved = read_fingerprint(folder)
    fix = (
        "run without --resume to start over (the old checkpoints are then removed), or use a "
        f"new --output-dir, or delete {folder.parent}"
    )
    if saved is None:
        raise CheckpointError(
            f"cannot resume {what} from {folder}: it has no readable {FINGERPRINT_FILE} (written "
            "by an older LiRA version or another program), so it cannot be checked against this "
            f"config; {fix}"
        )
    if saved["hash"] != fingerprint["hash"]:
        raise CheckpointError(
            f"cannot resume {what} from {folder}: it was trained with another config "
            f"({fingerprint_changes(saved, fingerprint)}); resuming would mix two runs. To "
            f"continue the old run, restore its config; otherwise {fix}"
        )


def clear_previous_run(
    root: str | Path, fingerprint: Mapping[str, object], what: str
) -> list[Path]:
    """Remove the ``step-*`` folders a previous run left under ``root`` before a fresh run.

    A fresh run starts at step 0: older checkpoints (of this config or another) would otherwise
    outrank its own when pruning and be picked up by a later ``--resume``. Logged.
    """
    root = Path(root)
    clean_stale(root)
    old = step_dirs(root)
    if not old:
        return []
    same = sum(1 for p in old if (read_fingerprint(p) or {}).get("hash") == fingerprint["hash"])
    for p in old:
        shutil.rmtree(p, ignore_errors=True)
    log.warning(
        "%s: fresh run (no --resume): removed %d checkpoint(s) of a previous run from %s "
        "(%d with this config, %d with another or none); pass --resume to continue a run",
        what, len(old), root, same, len(old) - same,
    )  # fmt: skip
    return old


def all_finite(*values: object) -> bool:
    """True when every value (tensor, number or None = finite) is finite: the trainers skip a
    step otherwise, so no NaN/inf reaches the weights, the optimizer state or a checkpoint."""
    import torch

    for v in values:
        if v is None:
            continue
        t = v.detach() if isinstance(v, torch.Tensor) else torch.as_tensor(v, dtype=torch.float64)
        if not bool(torch.isfinite(t).all()):
            return False
    return True

"""Atomic checkpoint folders and the ``step-*`` folders of a run: latest, leftovers, pruning.

A checkpoint is written into a temporary sibling folder (``.<name>.tmp-<pid>@<host>``) and
renamed into place, so a run killed at any moment leaves either the previous checkpoint or
the new one, never half of one. Before the rename, :func:`atomic_dir` writes a manifest
(:mod:`lira.checkpoint.manifest`); :func:`latest_checkpoint` skips a folder that does not match
it, says so, and falls back to the previous intact one, after removing the temporary folders of
saves that were killed (:func:`clean_stale`); when no folder is intact it raises. A disk that
fills up during a save is one :class:`~lira.errors.CheckpointError` naming the folder and the
space needed.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lira.checkpoint.manifest import checkpoint_problem, write_manifest
from lira.errors import CheckpointError
from lira.jsonio import writer_tag

log = logging.getLogger(__name__)

STEP_PREFIX = "step-"
_ACTIVE: set[Path] = set()
"""Temporary folders this process is writing now (never cleaned as stale)."""
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)(?:@(?P<host>.+))?$")


@contextmanager
def atomic_dir(final: str | Path, manifest: bool = True) -> Iterator[Path]:
    """Yield a temporary folder that replaces ``final`` only once the block succeeds.

    With ``manifest`` the folder gets :data:`~lira.checkpoint.manifest.MANIFEST` (file sizes)
    before it is renamed. What killed saves left beside ``final`` is handled first
    (:func:`clean_stale`), so a final folder outside a checkpoint root
    (``<output_dir>/lira-model``) leaves no ``.tmp-`` folder either.
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
    tmp = final.parent / f".{final.name}.tmp-{writer_tag()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    _ACTIVE.add(tmp.resolve())
    try:
        yield tmp
        if manifest:
            write_manifest(tmp)
        old = final.parent / f".{final.name}.old-{writer_tag()}"
        if final.is_symlink():  # replaced by the real folder; what it points to stays untouched
            log.warning(
                "%s was a symbolic link (to %s); it is replaced by the saved folder",
                final,
                os.readlink(final),
            )
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
        if is_disk_full(e):
            raise disk_full(final, written + getattr(e, "needed", 0)) from None
        raise
    finally:
        _ACTIVE.discard(tmp.resolve())


def final_name(folder: str | Path) -> str:
    """The name ``folder`` has once :func:`atomic_dir` renames it into place: ``<name>`` for the
    ``.<name>.tmp-<pid>@<host>`` folder this process is writing, else its own name."""
    folder = Path(folder).absolute()
    m = _LEFTOVER.match(folder.name)
    if m is not None and m["kind"] == "tmp" and folder.resolve() in _ACTIVE:
        return m["name"]
    return folder.name


class DiskFullError(OSError):
    """A file could not be written because the disk is full; ``needed``: its size in bytes."""

    def __init__(self, path: str | Path, needed: int) -> None:
        super().__init__(errno.ENOSPC, "No space left on device", str(path))
        self.needed = needed


def _tree_size(folder: Path) -> int:
    """Bytes of the files under ``folder`` (0 when it is gone)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def is_disk_full(e: BaseException) -> bool:
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

    Each is verified (sizes, sha256, parsing, finite tensors:
    :func:`~lira.checkpoint.manifest.checkpoint_problem`); a damaged or incomplete one is skipped
    with a warning naming the reason, and the previous one tried. When there are ``step-*``
    folders but none is intact, CheckpointError. With ``clean`` the leftovers of killed saves
    are removed first.
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

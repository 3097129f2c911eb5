"""One run per output folder: the run lock.

One run writes into an output folder at a time: :func:`run_lock` holds ``fcntl.flock`` on
:data:`RUN_LOCK` there, and a second run stops naming the holder's pid.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lira.errors import CheckpointError, LiRAError

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

"""A planted checkpoint: legacy-named pickle files that would run code if unpickled."""

from __future__ import annotations

import pickle
from pathlib import Path

from lira.checkpoint.manifest import write_manifest


class _Payload:
    """Unpickling this writes a marker file (what a planted checkpoint would do with os.system)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


def plant_pickles(folder: Path, marker: Path) -> None:
    """Legacy-named pickle files in a checkpoint folder (manifest updated, so it looks whole)."""
    for name in ("trainer_state.pt", "rng.pt"):
        (folder / name).write_bytes(pickle.dumps(_Payload(marker)))
    write_manifest(folder)

"""What ``lira`` checks before the engines import torch and load the models, so that a wrong
model path is one line in a second rather than after the imports and the data (issue 60,
item 7).

:func:`preflight` checks the model references the command loads (:func:`models_used`): an
unknown ``demo:`` alias or a local folder that does not exist (:func:`lira.model_paths.
check_model_ref`, the same errors the loaders raise). The CLI takes the run lock before the
engines are imported, so a second run into a folder in use stops as fast. Reading the data
needs no torch either: a command that reads ``data.*`` (:func:`reads_data`) reads it first
(:func:`lira.data.splits.load_splits_early`, handed on to the engine), so a bad record stops it
as fast too. ``--resume`` of an Arca or LaSR checkpoint written under another config is refused
from its saved fingerprint (:func:`check_resume`: the trainer's own check, run earlier). A
damaged frozen-g cache is found by reading its schema (:func:`arca.g_cache_file.check_cache_file`).
"""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Callable
from pathlib import Path

from arca.config import arca_fingerprint
from arca.g_cache_file import cache_path, check_cache_file
from lasr.config import lasr_fingerprint
from lira.checkpoint.fingerprint import check_fingerprint, read_fingerprint
from lira.checkpoint.folders import step_dirs
from lira.errors import LiRAError
from lira.model_paths import check_model_ref
from pipeline.runconfig import RunConfig

BOTH = ("backbone", "encoder")
LOADS: dict[str, tuple[str, ...]] = {
    "arca": BOTH,
    "lasr": BOTH,
    "ablate": BOTH,
    "baseline": ("backbone",),
    "baselines": ("backbone",),
    "compare": ("backbone",),
}
"""Command (or stage of ``lira run``) -> the ``models.*`` it loads."""
SUGGEST = {"backbone": "minilm", "encoder": "mt5"}
"""The demo model each error suggests (as the loaders do)."""


def models_used(cfg: RunConfig, command: str) -> list[str]:
    """The ``models.*`` keys (backbone, encoder) that ``lira <command>`` loads."""
    keys: set[str] = set(LOADS.get(command, ()))
    if command == "run":
        keys = {k for stage in cfg.stages for k in LOADS.get(stage, ())}
    if command == "eval" and not cfg.eval.model:  # the bare backbone is evaluated
        keys.add("backbone")
    return [k for k in BOTH if k in keys]


def preflight(cfg: RunConfig, command: str) -> None:
    """The user errors of ``lira <command>`` found without torch: a model reference that
    names no demo model, or a local folder that does not exist (one line naming the key), and
    a frozen-g cache in ``output_dir`` that is not a readable SQLite file (the file and the fix)."""
    used = models_used(cfg, command)
    for key in used:
        try:
            check_model_ref(getattr(cfg.models, key), SUGGEST[key])
        except LiRAError as e:
            raise type(e)(f"models.{key}: {e}") from None
    if "encoder" in used and cfg.models.encoder_cache:
        check_cache_file(cache_path(cfg.output_dir))


READS_DATA = ("translate", "arca", "lasr", "eval")
"""Commands that read ``data.*`` whatever they find (less the options of :func:`reads_data`).
Not ``baseline``: it first refuses, naming the key, a data format it cannot train on (and reads
none when ``--resume`` finds every method done)."""


def reads_data(args: Namespace) -> bool:
    """Whether ``lira <args.command>`` reads ``data.*`` for sure: not with ``--mteb`` (MTEB tasks
    instead), ``--import`` or ``--merge`` (the store only)."""
    if args.command not in READS_DATA:
        return False
    other = getattr(args, "mteb", None) or getattr(args, "import_file", None)
    return not (other or getattr(args, "merge", None) is not None)


RESUMES: dict[str, tuple[str, Callable[[RunConfig], dict[str, object]], str]] = {
    "arca": ("arca", arca_fingerprint, "Arca"),
    "lasr": ("lasr", lasr_fingerprint, "LaSR"),
}
"""Command -> (its checkpoints' folder under ``output_dir``, its run fingerprint, its name in
errors), as its trainer resumes them. The baselines' fingerprint names each method's
negatives, read from the method object (torch): ``lira baseline --resume`` checks it later."""


def check_resume(cfg: RunConfig, command: str) -> None:
    """``lira <command> --resume``: refuse a checkpoint written under another config, from the
    newest ``step-*`` folder's saved fingerprint (the trainer repeats the check on the intact
    one it loads; one without a readable fingerprint is left to it)."""
    if command not in RESUMES:
        return
    folder, fingerprint, what = RESUMES[command]
    for step in reversed(step_dirs(Path(cfg.output_dir) / folder)):
        if read_fingerprint(step) is not None:
            check_fingerprint(step, fingerprint(cfg), what)
            return

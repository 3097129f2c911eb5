"""What ``lira`` checks before the engines import torch and load the models, so that a wrong
model path is one line in a second rather than after the imports and the data (issue 60,
item 7).

:func:`preflight` checks the model references the command loads (:func:`models_used`): an
unknown ``demo:`` alias or a local folder that does not exist (:func:`lira.model_paths.
check_model_ref`, the same errors the loaders raise). The CLI takes the run lock before the
engines are imported, so a second run into a folder in use stops as fast.
"""

from __future__ import annotations

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
    names no demo model, or a local folder that does not exist (one line naming the key)."""
    for key in models_used(cfg, command):
        try:
            check_model_ref(getattr(cfg.models, key), SUGGEST[key])
        except LiRAError as e:
            raise type(e)(f"models.{key}: {e}") from None

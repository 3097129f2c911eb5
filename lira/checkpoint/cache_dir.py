"""A saved folder's ``models.cache_dir``: read where it already holds the demo models, never
written.

``lira_config.json`` and ``arca_config.json`` record the ``models`` section of the run that
saved them, ``cache_dir`` included: where that machine built its ``demo:<name>`` models. A
folder one did not make could name any absolute path there, and loading it would build demo
models into that path. :func:`read_only_cache_dir` keeps the saved ``cache_dir`` only when the
section names demo models and every one is already built there (a LiRA demo cache, which loading
then only reads); otherwise the loader's own cache decides (``$LIRA_CACHE``, else
``~/.cache/lira``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

# the stamp check of a built demo model (lira.demo owns the stamp format)
from lira.demo.references import is_current

log = logging.getLogger(__name__)

DEMO = "demo:"


def demo_names(models: dict[str, Any]) -> list[str]:
    """The demo models a ``models`` section names that live in a cache (``demo:minilm`` is
    used in place from its package)."""
    refs = [v for v in models.values() if isinstance(v, str) and DEMO in v]
    names = [ref.split(DEMO, 1)[1] for ref in refs]
    return [n for n in names if n != "minilm"]


def read_only_cache_dir(meta: dict[str, Any], path: Path) -> dict[str, Any]:
    """``meta`` (a folder's metadata) with ``models.cache_dir`` emptied unless the section names
    demo models and every one is already built there."""
    models = meta.get("models")
    if not isinstance(models, dict) or not models.get("cache_dir"):
        return meta
    root, names = Path(str(models["cache_dir"])).expanduser(), demo_names(models)
    if names and all(is_current(root / name, name) for name in names):
        return meta
    log.info(
        "%s: models.cache_dir %s does not hold the demo models it names; they are read or "
        "built in your own cache ($LIRA_CACHE, else ~/.cache/lira), never there",
        path,
        str(models["cache_dir"])[:200],
    )
    return {**meta, "models": {**models, "cache_dir": ""}}

"""Run any ``encode(texts, langs, kind, batch_size)`` encoder on an ``mteb`` task (lazy import)."""

from __future__ import annotations

from typing import Any

import numpy as np


class MTEBEncoder:
    """Wraps a LiRA-style encoder into the ``encode(sentences, **kwargs)`` form mteb calls."""

    def __init__(self, encoder: Any, lang: str | None = None, batch_size: int = 32) -> None:
        self.encoder, self.lang, self.batch_size = encoder, lang, batch_size

    def encode(self, sentences: list[str], **kwargs: Any) -> np.ndarray:
        """Encode ``sentences``; mteb's ``prompt_type`` picks query vs document."""
        ptype = str(kwargs.get("prompt_type") or "query")
        kind = "document" if ("doc" in ptype or "passage" in ptype) else "query"
        langs = [self.lang] * len(sentences) if self.lang else None
        bs = int(kwargs.get("batch_size", self.batch_size))
        return self.encoder.encode(list(sentences), langs=langs, kind=kind, batch_size=bs)


def run_mteb_task(encoder: Any, task_name: str, output_folder: str, lang: str | None = None) -> Any:
    """Evaluate ``encoder`` on the mteb task ``task_name`` (its data must be available locally)."""
    try:
        import mteb
    except ImportError as exc:
        raise ImportError(
            "mteb is not installed; install it (`pip install mteb`) to run MTEB tasks"
        ) from exc
    tasks = mteb.get_tasks(tasks=[task_name])
    return mteb.MTEB(tasks=tasks).run(MTEBEncoder(encoder, lang), output_folder=output_folder)

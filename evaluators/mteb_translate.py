"""The engine of ``lira translate --mteb``.

Translation: ``lira translate CONFIG --mteb TASK[,TASK…]`` (:func:`translate_tasks`) fills the
store with the pass@k candidates of every non-English text exactly as the adapter will pass it,
so ``lira eval|compare --mteb`` then finds them (LiRA evaluates online: a text still missing
is translated by the pool first).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from evaluators.mteb_eval import run_mteb
from evaluators.mteb_tasks import load_tasks
from lira.jsonio import write_json
from lira.translation.config import PoolRun
from lira.translation.engine import check_translated, fill_store

if TYPE_CHECKING:  # mteb is optional (the ``mteb`` extra): its types for annotations only
    from mteb.abstasks import AbsTask

log = logging.getLogger(__name__)


class _Recorder:
    """An evaluators-protocol encoder that keeps (text, lang) and returns random unit vectors."""

    def __init__(self) -> None:
        self.sources: dict[str, list[str]] = defaultdict(list)
        self.rng = np.random.default_rng(0)

    def encode(
        self, texts: Sequence[str], langs: Sequence[str] | None = None, kind: str = "query",
        batch_size: int = 32,
    ) -> np.ndarray:  # fmt: skip
        """[N, 8] random unit rows; records each text under its language."""
        for text, lang in zip(texts, langs or ["xx"] * len(texts)):
            self.sources[lang].append(text)
        z = self.rng.standard_normal((len(texts), 8)).astype(np.float32)
        return z / np.linalg.norm(z, axis=1, keepdims=True)


def task_sources(tasks: list[AbsTask], work_dir: str | Path) -> dict[str, list[str]]:
    """{lang: texts} exactly as the adapter gives them to a model on ``tasks`` (mteb runs once
    with random vectors), without English and unknown-language texts (never translated)."""
    rec = _Recorder()
    run_mteb({"sources": rec}, tasks, Path(work_dir) / "sources", batch_size=256)
    return {
        lang: list(dict.fromkeys(t)) for lang, t in rec.sources.items() if lang not in ("en", "xx")
    }


def translate_tasks(cfg: PoolRun, *, mteb: str, mteb_data: str | None = None) -> dict[str, object]:
    """``lira translate CONFIG --mteb TASK[,TASK…]``: fill the run's translation store with the
    pass@k candidates and critic scores of every non-English text of the tasks, so a LiRA model
    evaluated on them later (``lira eval|compare --mteb``) finds them offline."""

    out = Path(cfg.output_dir)
    tasks = load_tasks(mteb, mteb_data, work_dir=out / "mteb")
    sources = task_sources(tasks, out / "mteb")
    log.info("mteb: %d texts to translate (%s)", sum(len(t) for t in sources.values()),
             ", ".join(f"{k}: {len(v)}" for k, v in sorted(sources.items())))  # fmt: skip
    summary = fill_store(cfg, sources)
    summary["mteb_tasks"] = [t.metadata.name for t in tasks]
    write_json(out / "translate_mteb_summary.json", summary)
    print(
        f"translated the MTEB texts into {summary['store']} ({summary['generated']} generated, "
        f"{summary['reused']} reused, {summary['failed']} failed)"
    )
    check_translated(summary, cfg, out / "translate_mteb_summary.json")
    return summary

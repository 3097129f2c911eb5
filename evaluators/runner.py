"""Evaluate encoders on the scenarios of a parallel retrieval set (``lira eval``).

An encoder is anything with ``encode(texts, langs=None, kind="query"|"document",
batch_size=32) -> np.ndarray`` (rows L2-normalised): a Backbone, a baseline checkpoint, a
LiRAModel. Every text is encoded once per method (embeddings cached by (kind, id)).
Single-reference scenarios report cfg.metrics (+ nDCG@1 for the paper-003 ones); Multi reports
Complete@10, Max@R and Max@R_norm (per-query form; the from-mean form is added as
``max@r_norm(mean)``). Every value comes with a bootstrap 95% interval over queries, per
language and pooled over languages (language ``all``).
"""

from __future__ import annotations

import json
import logging
from argparse import Namespace
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from evaluators.bootstrap import bootstrap_ci
from evaluators.inclination import max_at_r_norm, max_at_r_norm_from_mean
from evaluators.leaderboard import Row, write_leaderboard
from evaluators.retrieval import ir_metrics, ranks_of, run_from_search, search
from evaluators.scenarios import Scenario, build_scenarios
from lira.config import EvalConfig, RunConfig
from lira.data.types import Record
from lira.data.xquad_r import XQuADR

log = logging.getLogger(__name__)
PAPER_003 = ("multi-1", "mono-same", "mono-cross")


class EmbeddingCache:
    """Encodes each (kind, record id) once for one encoder."""

    def __init__(self, encoder: Any, batch_size: int) -> None:
        self.encoder = encoder
        self.batch_size = batch_size
        self.vectors: dict[tuple[str, str], np.ndarray] = {}

    def __call__(self, records: list[Record], kind: str) -> np.ndarray:
        """[N, d] embeddings of ``records`` (encoding only those not seen before)."""
        todo = [r for r in records if (kind, r.id) not in self.vectors]
        if todo:
            vecs = self.encoder.encode(
                [r.text for r in todo],
                langs=[r.lang for r in todo],
                kind=kind,
                batch_size=self.batch_size,
            )
            for r, v in zip(todo, np.asarray(vecs, dtype=np.float32)):
                self.vectors[(kind, r.id)] = v
        return np.stack([self.vectors[(kind, r.id)] for r in records])


def scenario_values(
    sc: Scenario, cache: EmbeddingCache, metrics: list[str], chunk_size: int
) -> dict[str, list[float]]:
    """Per-query values of every metric of one scenario."""
    q = cache(sc.queries, "query")
    d = cache(sc.docs, "document")
    doc_ids = [r.id for r in sc.docs]
    qids = [r.id for r in sc.queries]
    out: dict[str, list[float]] = {}
    if sc.multi_reference:
        pos = {did: i for i, did in enumerate(doc_ids)}
        targets = [[pos[t] for t in sc.qrels[qid]] for qid in qids]
        max_rs = [max(r) for r in ranks_of(q, d, targets, chunk_size)]
        n_rel = len(sc.qrels[qids[0]])
        out["complete@10"] = [100.0 * (m <= 10) for m in max_rs]
        out["max@r"] = [float(m) for m in max_rs]
        out["max@r_norm"] = [max_at_r_norm(m, len(doc_ids), n_rel) for m in max_rs]
        wanted = ["ndcg@10"]
    else:
        wanted = list(dict.fromkeys(metrics + (["ndcg@1"] if sc.name in PAPER_003 else [])))
    scores, idx = search(q, d, k=100, chunk_size=chunk_size)
    per_query = ir_metrics(run_from_search(qids, doc_ids, scores, idx), sc.qrels, wanted)
    for m, values in per_query.items():
        out[m] = [values[qid] for qid in qids]
    return out


def evaluate_encoders(
    encoders: dict[str, Any],
    dataset: XQuADR,
    qids: list[str],
    languages: list[str],
    cfg: EvalConfig,
    task: str = "xquad-r",
) -> list[Row]:
    """Leaderboard rows for every method x scenario x language (+ pooled language 'all')."""
    scenarios = build_scenarios(dataset, list(cfg.scenarios), languages, qids)
    rows: list[Row] = []
    for method, encoder in encoders.items():
        cache = EmbeddingCache(encoder, cfg.batch_size)
        pooled: dict[tuple[str, str], list[float]] = defaultdict(list)
        for sc in scenarios:
            values = scenario_values(sc, cache, list(cfg.metrics), cfg.chunk_size)
            for metric, vals in values.items():
                rows.append(_row(method, task, sc.name, sc.language, metric, vals, cfg))
                pooled[(sc.name, metric)] += vals
            if sc.multi_reference:
                n_rel = len(next(iter(sc.qrels.values())))
                v = max_at_r_norm_from_mean(values["max@r"], len(sc.docs), n_rel)
                rows.append(_fixed(method, task, sc.name, sc.language, "max@r_norm(mean)", v))
            log.info("%s %s %s done", method, sc.name, sc.language)
        for (name, metric), vals in pooled.items():
            rows.append(_row(method, task, name, "all", metric, vals, cfg))
    return rows


def _row(method: str, task: str, scenario: str, lang: str, metric: str, vals: list[float],
         cfg: EvalConfig) -> Row:  # fmt: skip
    mean, lo, hi = bootstrap_ci(vals, cfg.bootstrap, seed=cfg.seed)
    return {"method": method, "task": task, "scenario": scenario, "language": lang,
            "metric": metric, "value": mean, "ci_low": lo, "ci_high": hi}  # fmt: skip


def _fixed(method: str, task: str, scenario: str, lang: str, metric: str, value: float) -> Row:
    return {"method": method, "task": task, "scenario": scenario, "language": lang,
            "metric": metric, "value": value, "ci_low": value, "ci_high": value}  # fmt: skip


def english_gaps(rows: list[Row]) -> list[Row]:
    """English-query minus target-query value for each Multi/Multi-1 metric (paper 003)."""
    by = {(r["method"], r["scenario"], r["language"], r["metric"]): r for r in rows}
    out = []
    for (m, s, lang, metric), r in by.items():
        if s.endswith("@en") and (m, s[:-3], lang, metric) in by:
            gap = r["value"] - by[(m, s[:-3], lang, metric)]["value"]
            out.append(_fixed(m, r["task"], f"{s[:-3]} en-gap", lang, metric, gap))
    return out


def load_encoder_for_eval(cfg: RunConfig, path: str) -> tuple[str, Any]:
    """(name, encoder) for a folder: a LiRA model, a baseline checkpoint, or the backbone."""
    from lira.models import load_backbone

    if not path:
        return "backbone", load_backbone(cfg.models)
    p = Path(path)
    from lira.model import CONFIG_NAME, LiRAModel

    if (p / CONFIG_NAME).is_file():
        return "lira", LiRAModel.from_pretrained(p)
    from lira.baselines.trainer import load_baseline

    return p.name, load_baseline(p)


def run_eval(cfg: RunConfig, args: Namespace | None = None) -> list[Row]:
    """Engine of ``lira eval``: one model on the configured scenarios -> <output_dir>/eval/."""
    from lira.data.splits import load_splits

    splits = load_splits(cfg.data)
    if splits.dataset is None:
        raise ValueError("lira eval needs parallel data (data.format=xquad_r) for its scenarios")
    name, encoder = load_encoder_for_eval(cfg, cfg.eval.model)
    rows = evaluate_encoders({name: encoder}, splits.dataset, splits.eval_ids,
                             list(cfg.data.eval_languages), cfg.eval)  # fmt: skip
    rows += english_gaps(rows)
    out = Path(cfg.output_dir) / "eval"
    write_leaderboard(rows, out, title=f"lira eval: {name}")
    (out / "results.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print(f"wrote {out / 'leaderboard.md'}")
    return rows

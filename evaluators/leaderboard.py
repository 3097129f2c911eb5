"""Leaderboard files: rows -> leaderboard.json, leaderboard.md and grouped-bar PNGs.

A row is ``{method, task, scenario, language, metric, value, ci_low, ci_high}``; rows with
language ``all`` pool the per-query values of every evaluated language. The Markdown keeps each
table narrow: nDCG@10 by scenario (pooled, then per language), then each scenario's metrics,
then a legend giving each scenario's direction (query → documents) in words and the paper
columns it corresponds to (:func:`evaluators.scenarios.describe`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from evaluators.diagnostics import save_figure
from evaluators.scenarios import describe
from lira.encoding import Encoder

Row = dict[str, Any]
KEYS = ("method", "task", "scenario", "language", "metric", "value", "ci_low", "ci_high")


def _cell(r: Row) -> str:
    if r["ci_low"] == r["ci_high"]:
        return f"{r['value']:.2f}"
    return f"{r['value']:.2f} [{r['ci_low']:.1f}, {r['ci_high']:.1f}]"


def pivot_table(rows: list[Row], column: str) -> str:
    """One Markdown table of ``rows``: a line per method, a column per value of ``column``."""
    cols = list(dict.fromkeys(r[column] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    cell = {(r["method"], r[column]): _cell(r) for r in rows}
    lines = ["| method | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 1)]
    for m in methods:
        lines.append(f"| {m} | " + " | ".join(cell.get((m, c), "–") for c in cols) + " |")
    return "\n".join(lines)


def model_notes(encoders: Mapping[str, Encoder]) -> list[str]:
    """One plain sentence per model that says which parts a foreign text uses (a LiRA model's
    ``parts_note``: e.g. that foreign queries skip translation), for the leaderboard's top."""
    out = []
    for name, enc in encoders.items():
        note = getattr(enc, "parts_note", None)
        if callable(note):
            out.append(f"{name}: {note()}")
    return out


def leaderboard_markdown(
    rows: list[Row], title: str, headline: str = "ndcg@10", notes: Sequence[str] = ()
) -> str:
    """The leaderboard as Markdown: ``notes`` (:func:`model_notes`), the headline metric by
    scenario (pooled, then per language), then every metric of each scenario on the pooled
    languages."""
    languages = [x for x in dict.fromkeys(r["language"] for r in rows) if x != "all"]
    parts = [f"# {title}", "", "Values in percent with bootstrap 95% intervals; 'all' pools",
             "the per-query values of every evaluated language.", ""]  # fmt: skip
    parts += [*(f"- {n}" for n in notes), ""] if notes else []
    for lang in ["all", *languages]:
        sel = [r for r in rows if r["language"] == lang and r["metric"] == headline]
        if sel:
            parts += [f"## {headline} by scenario: {lang}", "", pivot_table(sel, "scenario"), ""]
    for sc in dict.fromkeys(r["scenario"] for r in rows):
        sel = [r for r in rows if r["scenario"] == sc and r["language"] == "all"]
        if sel:
            parts += [f"## {sc}: every metric (all)", "", pivot_table(sel, "metric"), ""]
    return "\n".join([*parts, scenario_legend([r["scenario"] for r in rows])])


def scenario_legend(names: list[str]) -> str:
    """Markdown table: each scenario's direction (query → documents) and its paper columns."""
    lines = ["## Scenarios", "", "Names are query language → document language; 'target' is the",
             "row's language (paper 001's 'ko' stands for it).", "",
             "| scenario | direction | corresponds to |", "|---|---|---|"]  # fmt: skip
    for name in dict.fromkeys(names):
        try:
            words, papers = describe(name)
        except KeyError:
            words, papers = "–", "–"
        lines.append(f"| {name} | {words} | {papers} |")
    return "\n".join(lines) + "\n"


def plot_metric(rows: list[Row], metric: str, path: str | Path, language: str = "all") -> Path:
    """Grouped bars: one group per scenario, one bar (with 95% CI) per method."""
    sel = [r for r in rows if r["metric"] == metric and r["language"] == language]
    scenarios = list(dict.fromkeys(r["scenario"] for r in sel))
    methods = list(dict.fromkeys(r["method"] for r in sel))
    by = {(r["method"], r["scenario"]): r for r in sel}
    fig = Figure(figsize=(max(6, 1.4 * len(scenarios) + 2), 4.2))
    ax = fig.subplots()
    width = 0.8 / max(len(methods), 1)
    x = np.arange(len(scenarios))
    for i, m in enumerate(methods):
        vals = [by[(m, s)]["value"] if (m, s) in by else np.nan for s in scenarios]
        lo = [v - by[(m, s)]["ci_low"] if (m, s) in by else 0 for s, v in zip(scenarios, vals)]
        hi = [by[(m, s)]["ci_high"] - v if (m, s) in by else 0 for s, v in zip(scenarios, vals)]
        ax.bar(x + i * width - 0.4 + width / 2, vals, width, yerr=[lo, hi], capsize=2, label=m)
    ax.set_xticks(x, scenarios, rotation=15)
    ax.set(title=f"{metric} by scenario ({language} languages, 95% CI)", ylabel=metric)
    if methods:
        ax.legend(fontsize=8, ncol=2)
    return save_figure(fig, path)


def write_leaderboard(
    rows: list[Row], out_dir: str | Path, title: str = "Leaderboard", notes: Sequence[str] = ()
) -> dict[str, Path]:
    """Write leaderboard.json, leaderboard.md (``notes`` under the title) and one PNG per
    metric into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    clean = [{k: r[k] for k in KEYS} for r in rows]
    (out / "leaderboard.json").write_text(json.dumps(clean, indent=1), encoding="utf-8")
    md = leaderboard_markdown(clean, title, notes=notes)
    (out / "leaderboard.md").write_text(md, encoding="utf-8")
    files = {"json": out / "leaderboard.json", "md": out / "leaderboard.md"}
    metrics = defaultdict(int)
    for r in clean:
        metrics[r["metric"]] += 1
    for m in metrics:
        safe = m.replace("@", "_at_").replace("/", "_").replace("Δ", "delta_").replace(" ", "_")
        files[m] = plot_metric(clean, m, out / f"{safe}.png")
    return files

"""Leaderboard files: rows -> leaderboard.json, leaderboard.md and grouped-bar PNGs.

A row is ``{method, task, scenario, language, metric, value, ci_low, ci_high}``; rows with
language ``all`` pool the per-query values of every evaluated language and make the main
table (rows = methods, columns = scenario × metric); per-language tables follow.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from evaluators.diagnostics import save_figure

Row = dict[str, Any]
KEYS = ("method", "task", "scenario", "language", "metric", "value", "ci_low", "ci_high")


def _cell(r: Row) -> str:
    if r["ci_low"] == r["ci_high"]:
        return f"{r['value']:.2f}"
    return f"{r['value']:.2f} [{r['ci_low']:.1f}, {r['ci_high']:.1f}]"


def markdown_table(rows: list[Row], language: str) -> str:
    """One Markdown table for ``language``: methods x (scenario, metric)."""
    sel = [r for r in rows if r["language"] == language]
    cols = list(dict.fromkeys((r["scenario"], r["metric"]) for r in sel))
    methods = list(dict.fromkeys(r["method"] for r in sel))
    cell = {(r["method"], r["scenario"], r["metric"]): _cell(r) for r in sel}
    head = "| method | " + " | ".join(f"{s} {m}" for s, m in cols) + " |"
    lines = [head, "|" + "---|" * (len(cols) + 1)]
    for m in methods:
        lines.append(f"| {m} | " + " | ".join(cell.get((m, s, k), "–") for s, k in cols) + " |")
    return "\n".join(lines)


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
    rows: list[Row], out_dir: str | Path, title: str = "Leaderboard"
) -> dict[str, Path]:
    """Write leaderboard.json, leaderboard.md and one PNG per metric into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    clean = [{k: r[k] for k in KEYS} for r in rows]
    (out / "leaderboard.json").write_text(json.dumps(clean, indent=1), encoding="utf-8")
    languages = list(dict.fromkeys(r["language"] for r in clean))
    parts = [f"# {title}", "", "Values in percent with bootstrap 95% intervals.", ""]
    for lang in ["all", *[x for x in languages if x != "all"]]:
        if lang in languages:
            parts += [f"## {'all evaluated languages (pooled)' if lang == 'all' else lang}", "",
                      markdown_table(clean, lang), ""]  # fmt: skip
    (out / "leaderboard.md").write_text("\n".join(parts), encoding="utf-8")
    files = {"json": out / "leaderboard.json", "md": out / "leaderboard.md"}
    metrics = defaultdict(int)
    for r in clean:
        metrics[r["metric"]] += 1
    for m in metrics:
        safe = m.replace("@", "_at_").replace("/", "_")
        files[m] = plot_metric(clean, m, out / f"{safe}.png")
    return files

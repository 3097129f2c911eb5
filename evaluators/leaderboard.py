"""Leaderboard files: rows -> leaderboard.json, leaderboard.md and grouped-bar PNGs.

A row is ``{method, task, scenario, language, metric, value, ci_low, ci_high}``; rows with
language ``all`` pool the per-query values of every evaluated language. The Markdown keeps each
table narrow: nDCG@10 by scenario (pooled, then per language), then each scenario's metrics,
then a legend giving each scenario's direction (query → documents) in words and the paper
columns it corresponds to (:func:`evaluators.scenarios.describe`).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from evaluators.diagnostics import save_figure
from evaluators.scenarios import describe
from lira.encoding import Encoder

Row = dict[str, str | float]
"""One leaderboard row: the :data:`KEYS` (strings, then value and interval as floats)."""
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


README_NAMES = {"en-en": "En-En", "lang-en": "L→En", "en-lang": "En→L", "multi": "Multi",
                "multi-1": "Multi-1", "mono-same": "Mono-Same", "mono-cross": "Mono-Cross",
                "mixed": "Mixed corpus"}  # fmt: skip
"""The README's names of the scenarios (``lang-en`` in the code is L→En there); ``mixed``: a
retrieval set's queries over a corpus in several languages."""


def summary_table(rows: list[Row], headline: str = "ndcg@10") -> str:
    """The short table a leaderboard opens with: the headline metric, every language pooled,
    a line per method and a column per scenario under the README's name ('' without rows)."""
    sel = [r for r in rows if r["language"] == "all" and r["metric"] == headline
           and r["scenario"] in README_NAMES]  # fmt: skip
    if not sel:
        return ""
    cols = [s for s in README_NAMES if any(r["scenario"] == s for r in sel)]
    methods = list(dict.fromkeys(r["method"] for r in sel))
    value = {(r["method"], r["scenario"]): f"{r['value']:.1f}" for r in sel}
    lines = [f"## Summary: {headline}, every language pooled", "",
             "| method | " + " | ".join(README_NAMES[c] for c in cols) + " |",
             "|" + "---|" * (len(cols) + 1)]  # fmt: skip
    for m in methods:
        lines.append(f"| {m} | " + " | ".join(value.get((m, c), "–") for c in cols) + " |")
    lines += ["", "L→En: queries in language L, English documents; En-En: English queries, the "
              "same documents. Intervals, languages and every metric: below.", ""]  # fmt: skip
    return "\n".join(lines)


HEADLINE_METHODS = ("backbone", "me5-small", "lira")
"""The methods ``lira run`` ends with (those present in the leaderboard)."""
HEADLINE_SCENARIOS = ("en-en", "lang-en", "en-lang")
"""The pooled scenarios ``lira run`` ends with (En-En, L→En, En→L, those present)."""


def headline_scores(rows: list[Row], headline: str = "ndcg@10") -> dict[str, dict[str, float]]:
    """{method: {README scenario name: value}} of the headline metric, every language pooled,
    for :data:`HEADLINE_METHODS` x :data:`HEADLINE_SCENARIOS` present in ``rows``."""
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        if (r["method"] in HEADLINE_METHODS and r["scenario"] in HEADLINE_SCENARIOS
                and r["language"] == "all" and r["metric"] == headline):  # fmt: skip
            out.setdefault(str(r["method"]), {})[README_NAMES[str(r["scenario"])]] = float(
                r["value"]
            )
    return {m: out[m] for m in HEADLINE_METHODS if m in out}


def headline_table(scores: dict[str, dict[str, float]], headline: str = "ndcg@10") -> str:
    """:func:`headline_scores` as a short plain-text table ('' without scores)."""
    cols = [c for c in (README_NAMES[s] for s in HEADLINE_SCENARIOS)
            if any(c in v for v in scores.values())]  # fmt: skip
    if not cols:
        return ""
    width = max(len(m) for m in scores)
    lines = [f"{headline} (every language pooled)",
             f"{'method':<{width}}  " + "  ".join(f"{c:>6}" for c in cols)]  # fmt: skip
    for m, v in scores.items():
        cells = [f"{v[c]:6.1f}" if c in v else f"{'–':>6}" for c in cols]
        lines.append(f"{m:<{width}}  " + "  ".join(cells))
    return "\n".join(lines)


def leaderboard_markdown(
    rows: list[Row], title: str, headline: str = "ndcg@10", notes: Sequence[str] = ()
) -> str:
    """The leaderboard as Markdown: a summary (method x scenario, pooled, the README's names) and
    ``notes`` (:func:`model_notes`), then the headline metric by scenario (pooled, then per
    language), then every metric of each scenario on the pooled languages."""
    languages = [x for x in dict.fromkeys(r["language"] for r in rows) if x != "all"]
    parts = [f"# {title}", "", "Values in percent with bootstrap 95% intervals; 'all' pools",
             "the per-query values of every evaluated language.", ""]  # fmt: skip
    summary = summary_table(rows, headline)
    if summary:
        parts += [summary, ""]
    parts += [*(f"- {n}" for n in notes), ""] if notes else []
    for lang in ["all", *languages]:
        sel = [r for r in rows if r["language"] == lang and r["metric"] == headline]
        if sel:
            parts += [f"## {headline} by scenario: {lang}", "", pivot_table(sel, "scenario"), ""]
    for sc in dict.fromkeys(r["scenario"] for r in rows):
        sel = [r for r in rows if r["scenario"] == sc and r["language"] == "all"]
        langs = list(dict.fromkeys(r["language"] for r in rows if r["scenario"] == sc))
        if not sel and len(langs) == 1:  # a language pair (de→en): its one language
            sel = [r for r in rows if r["scenario"] == sc]
        if sel:
            where = sel[0]["language"]
            parts += [f"## {sc}: every metric ({where})", "", pivot_table(sel, "metric"), ""]
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


METHOD_ORDER = ("backbone", "lira", "lira-fixed", "me5-small", "translate-test", "infonce",
                "clear", "lancer", "jsd", "merging", "composition")  # fmt: skip
"""Methods with a fixed colour (tab20 order); others get one from a stable hash of the name."""
MAX_WIDTH_IN = 11.0
"""Widest figure (inches; 1210 px at the saved dpi): more groups make thinner bars."""


def method_color(method: str) -> str:
    """The one colour of ``method`` in every plot of every run."""
    from matplotlib import colormaps

    palette = colormaps["tab20"].colors
    if method in METHOD_ORDER:
        i = METHOD_ORDER.index(method)
    else:
        i = len(METHOD_ORDER) + int(hashlib.sha256(method.encode()).hexdigest(), 16) % (
            len(palette) - len(METHOD_ORDER)
        )
    rgb = palette[i % len(palette)]
    return "#" + "".join(f"{round(c * 255):02x}" for c in rgb)


def plot_metric(
    rows: list[Row],
    metric: str,
    path: str | Path,
    language: str = "all",
    group: str = "scenario",
    scenario: str | None = None,
) -> Path:
    """Grouped bars: one group per scenario (``group="language"``: per language of
    ``scenario``, or of every language pair when it is None), one bar (with 95% CI) per method, each method in its own colour."""
    if group == "language":  # scenario None: every language pair (de→en, es→en, …)
        sel = [r for r in rows if r["metric"] == metric and r["language"] != "all"
               and (r["scenario"] == scenario or (scenario is None and "→" in str(r["scenario"])))]  # fmt: skip
    else:
        sel = [r for r in rows if r["metric"] == metric and r["language"] == language]
    groups = list(dict.fromkeys(r[group] for r in sel))
    methods = list(dict.fromkeys(r["method"] for r in sel))
    by = {(r["method"], r[group]): r for r in sel}
    fig = Figure(figsize=(min(MAX_WIDTH_IN, max(6, 1.2 * len(groups) + 2)), 4.2))
    ax = fig.subplots()
    width = 0.8 / max(len(methods), 1)
    x = np.arange(len(groups))
    for i, m in enumerate(methods):
        vals = [by[(m, s)]["value"] if (m, s) in by else np.nan for s in groups]
        lo = [v - by[(m, s)]["ci_low"] if (m, s) in by else 0 for s, v in zip(groups, vals)]
        hi = [by[(m, s)]["ci_high"] - v if (m, s) in by else 0 for s, v in zip(groups, vals)]
        ax.bar(x + i * width - 0.4 + width / 2, vals, width, yerr=[lo, hi], capsize=2, label=m,
               color=method_color(m))  # fmt: skip
    names = [README_NAMES.get(g, g) for g in groups] if group == "scenario" else groups
    tilt = len(groups) > 6
    ax.set_xticks(x, names, rotation=30 if tilt else 0, ha="right" if tilt else "center")
    if group == "language":
        where = f"{README_NAMES.get(scenario or '', scenario or 'each language pair')} per language"
    else:
        where = f"by scenario ({language} languages)"
    ax.set(title=f"{metric} {where}, 95% CI", ylabel=metric)
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
        files[m] = plot_metric(clean, m, out / f"{_safe(m)}.png")
    headline = "ndcg@10"
    scenarios = {r["scenario"] for r in clean if r["metric"] == headline and r["language"] != "all"}
    scenario = next((s for s in ("lang-en", *sorted(scenarios)) if s in scenarios), None)
    if scenario is not None and "→" in scenario:  # language pairs: one bar group per language
        scenario = None
    if scenarios:  # the headline scenario per language
        files["by_language"] = plot_metric(clean, headline, out / f"{_safe(headline)}_by_language.png",
                                           group="language", scenario=scenario)  # fmt: skip
    return files


def _safe(metric: str) -> str:
    """A file name for a metric's plot."""
    return metric.replace("@", "_at_").replace("/", "_").replace("Δ", "delta_").replace(" ", "_")

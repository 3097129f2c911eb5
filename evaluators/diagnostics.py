"""LiRA diagnostics (paper 004 App. A, D.2): ε̂1, ε̂2, the RKHS surrogate Ĉ, local Lipschitz.

- ε̂1 = E‖g(x) − h(ŷ)‖₂ (Eq. 25, unnormalised) and ε̂2 (Eq. 28) have one definition each,
  :func:`arca.losses.epsilon1` / :func:`arca.losses.epsilon2`, logged by Arca's trainer; the
  Arca section here reads them from its summary.
- Ĉ (App. A.2, Table 6): statistics of ‖ĥ(y)‖₂ over a corpus, ĥ = mean-pooled unnormalised
  embeddings; max, mean, std, median, p90, p95, p99.
- L_emp(δ) (Def. 2, App. A Eq. 21-23, Table 7): L_loc(y; δ) = max over y' ∈ N_δ(y) of
  ‖f(y) − f(y')‖₂ / Lev(y, y'), N_δ(y) = {y' : 0 < d_tok(y, y') ≤ δ}; statistics in percent
  per δ. See :func:`local_lipschitz`.
Each has a PNG (matplotlib's object API, no pyplot state, no display needed).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

DELTAS = (1, 2, 3, 5, 8, 10)


def summary_stats(values: Sequence[float]) -> dict[str, float]:
    """max, mean, std, median, p90, p95, p99 and the sample count."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"count": 0}
    q = np.quantile(v, [0.5, 0.9, 0.95, 0.99])
    return {
        "max": float(v.max()), "mean": float(v.mean()), "std": float(v.std()),
        "median": float(q[0]), "p90": float(q[1]), "p95": float(q[2]), "p99": float(q[3]),
        "count": int(v.size),
    }  # fmt: skip


def rkhs_c_stats(pooled: np.ndarray) -> dict[str, float]:
    """Ĉ statistics of the norms of mean-pooled unnormalised embeddings (Table 6)."""
    return summary_stats(np.linalg.norm(np.asarray(pooled, dtype=np.float64), axis=1))


def perturb(text: str, delta: int, rng: random.Random, vocab: Sequence[str]) -> str:
    """``text`` after ``delta`` random word-level edits (delete / substitute / insert)."""
    words = text.split()
    for _ in range(delta):
        op = rng.choice(("delete", "substitute", "insert")) if len(words) > 1 else "insert"
        pos = rng.randrange(len(words)) if words else 0
        if op == "delete":
            words.pop(pos)
        elif op == "substitute":
            words[pos] = rng.choice(vocab)
        else:
            words.insert(pos, rng.choice(vocab))
    return " ".join(words)


def token_codes(texts: Sequence[str]) -> list[str]:
    """Each text as a string of one code point per whitespace token (equal tokens, equal code
    points), so a character-level Levenshtein of the codes is the token-level d_tok."""
    ids: dict[str, int] = {}
    out = []
    for t in texts:
        cs = [ids.setdefault(w, len(ids)) + 1 for w in t.split()]
        out.append("".join(chr(c + 0x800 if c >= 0xD800 else c) for c in cs))  # skip surrogates
    return out


def local_lipschitz(
    texts: Sequence[str],
    f: Callable[[list[str]], np.ndarray],
    deltas: Sequence[int] = DELTAS,
    seed: int = 0,
    perturbations: int = 1,
    chunk: int = 256,
) -> dict[int, dict[str, float]]:
    """L_emp(δ) statistics in percent (paper 004 Def. 2, App. A Eq. 21-23, Table 7).

    L_loc(y; δ) = max_{y' ∈ N_δ(y)} ‖f(y) − f(y')‖₂ / Lev(y, y') for every y in ``texts``
    that has a neighbour; Lev is the character Levenshtein distance of the two texts (App. A
    "EditDistance", rapidfuzz). N_δ(y) = {y' : 0 < d_tok(y, y') ≤ δ}, d_tok the Levenshtein
    distance over whitespace tokens, holds the other corpus sentences within δ token edits
    (Def. 2's y' ∈ Y_data) and ``perturbations`` seeded perturbations of y with δ random
    word edits (App. A's "perturbed version s'"; 0 = corpus neighbours only). The statistics
    of :func:`summary_stats` run over y; ``count`` is the number of y with a neighbour.
    """
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein

    texts = list(texts)
    n = len(texts)
    if n == 0:
        return {delta: summary_stats([]) for delta in deltas}
    rng = random.Random(seed)
    vocab = sorted({w for t in texts for w in t.split()}) or ["x"]
    fy = np.asarray(f(texts), dtype=np.float64)
    top = max(deltas)
    codes = token_codes(texts)
    rows, cols, dtok = [], [], []  # corpus pairs within the largest radius
    for s in range(0, n, chunk):
        d = process.cdist(
            codes[s : s + chunk], codes, scorer=Levenshtein.distance, score_cutoff=top, workers=1
        )
        i, j = np.nonzero((d > 0) & (d <= top))
        rows.append(i + s)
        cols.append(j)
        dtok.append(d[i, j])
    pi = np.concatenate(rows).astype(np.int64)
    pj = np.concatenate(cols).astype(np.int64)
    pd = np.concatenate(dtok).astype(np.int64)
    lev = np.array([Levenshtein.distance(texts[a], texts[b]) for a, b in zip(pi, pj)], float)
    pair_ratio = np.linalg.norm(fy[pi] - fy[pj], axis=1) / np.maximum(lev, 1.0)
    out = {}
    for delta in deltas:
        best = np.full(n, -np.inf)
        near = pd <= delta
        np.maximum.at(best, pi[near], pair_ratio[near])
        for _ in range(perturbations):
            moved = [perturb(t, delta, rng, vocab) for t in texts]
            d_tok = [Levenshtein.distance(t.split(), m.split()) for t, m in zip(texts, moved)]
            keep = [k for k in range(n) if 0 < d_tok[k] <= delta]
            if not keep:
                continue
            fm = np.asarray(f([moved[k] for k in keep]), dtype=np.float64)
            lev_m = np.array([Levenshtein.distance(texts[k], moved[k]) for k in keep], float)
            ratio = np.linalg.norm(fy[keep] - fm, axis=1) / np.maximum(lev_m, 1.0)
            np.maximum.at(best, np.array(keep), ratio)
        out[delta] = summary_stats(100.0 * best[np.isfinite(best)])
    return out


def plot_norms(norms: np.ndarray, path: str | Path, title: str) -> Path:
    """Histogram of ‖ĥ(y)‖ with p99 marked (paper Fig. 4, middle panel)."""
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    ax.hist(norms, bins=40, color="#4C72B0")
    p99 = float(np.quantile(norms, 0.99))
    ax.axvline(p99, color="#C44E52", linestyle="--", label=f"p99 = {p99:.3f}")
    ax.set(title=title, xlabel="‖ĥ(y)‖₂ (mean-pooled, unnormalised)", ylabel="sentences")
    ax.legend()
    return save_figure(fig, path)


def plot_lipschitz(stats: dict[int, dict[str, float]], path: str | Path, title: str) -> Path:
    """L_emp(δ) median and p95 against δ (paper Table 7 as a plot)."""
    deltas = sorted(stats)
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for key, style in (("median", "o-"), ("p95", "s--"), ("mean", "^:")):
        ax.plot(deltas, [stats[d].get(key, np.nan) for d in deltas], style, label=key)
    ax.set(title=title, xlabel="token edits δ", ylabel="L_emp(δ) (%)")
    ax.legend()
    return save_figure(fig, path)


def plot_selection(shares: dict[str, dict[str, float]], path: str | Path, title: str) -> Path:
    """Grouped bars of the Arca Actor's selection share per translator (paper 004 Fig. 10).

    ``shares`` maps a split name (e.g. held-out, train) to {translator: share in [0, 1]}.
    """
    names = sorted({t for s in shares.values() for t in s})
    fig = Figure(figsize=(max(6, 1.2 * len(names) + 2), 4))
    ax = fig.subplots()
    width = 0.8 / max(len(shares), 1)
    x = np.arange(len(names))
    for i, (split, s) in enumerate(shares.items()):
        vals = [100 * s.get(n, 0.0) for n in names]
        ax.bar(x + i * width - 0.4 + width / 2, vals, width, label=split)
    ax.set_xticks(x, names, rotation=20)
    ax.set(title=title, xlabel="translator", ylabel="selected (%)")
    ax.legend()
    return save_figure(fig, path)


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write a figure as PNG (parent folders created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def plot_training_curves(logs: dict[str, Path], path: str | Path) -> Path | None:
    """One panel per trainer (``{name: log.jsonl}``: Arca's, LaSR's), each logged loss term
    and Arca's reward against the step; None when no log has a row."""
    panels = {}
    for name, log_path in logs.items():
        if not Path(log_path).is_file():
            continue
        rows = []
        for line in Path(log_path).read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a torn last line
        keys = [k for k in dict.fromkeys(k for r in rows for k in r)
                if ("loss" in k or k == "reward")
                and all(isinstance(r.get(k, 0.0), (int, float)) for r in rows)]  # fmt: skip
        if rows and keys:
            panels[name] = (rows, keys)
    if not panels:
        return None
    fig = Figure(figsize=(5.5 * len(panels), 3.8))
    for ax, (name, (rows, keys)) in zip(
        np.atleast_1d(fig.subplots(1, len(panels))), panels.items()
    ):
        for k in keys:
            pts = [(r["step"], r[k]) for r in rows if k in r and "step" in r]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=k, linewidth=1.2)
        ax.set(title=f"{name} training", xlabel="step")
        ax.legend(fontsize=7)
    return save_figure(fig, path)

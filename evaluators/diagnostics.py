"""LiRA diagnostics (paper 004 App. A, D.2): ε̂1, ε̂2, the RKHS surrogate Ĉ, local Lipschitz.

- ε̂1 = E‖g(x) − h(ŷ)‖₂ (Eq. 25) and ε̂2 = E[1 − cos(E(x), E(ŷ))] (Eq. 26/28), from paired
  vectors the caller computes (Arca's E_lr / E_en, a frozen LLM's mean-pooled states).
- Ĉ (App. A.2, Table 6): statistics of ‖ĥ(y)‖₂ over a corpus, ĥ = mean-pooled unnormalised
  embeddings; max, mean, std, median, p90, p95, p99.
- L_emp(δ) (App. A, Table 7, Eq. 21-23): for each sentence y and a perturbation y' at
  token-edit distance δ (random word deletions/substitutions/insertions, seeded),
  ‖f(y) − f(y')‖₂ / ‖z(y) − z(y')‖₂ with f the model's output embedding and z its input
  representation (mean-pooled input embeddings); statistics in percent per δ.
Each has a PNG (matplotlib's object API, no pyplot state, no display needed).
"""

from __future__ import annotations

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


def epsilon_hats(
    g: np.ndarray, h: np.ndarray, e_src: np.ndarray, e_sel: np.ndarray
) -> dict[str, float]:
    """ε̂1 = mean ‖g − h‖ (Eq. 25); ε̂2 = mean (1 − cos(e_src, e_sel)) (Eq. 28); cos(g, h)."""

    def unit(a: np.ndarray) -> np.ndarray:
        return a / np.linalg.norm(a, axis=1, keepdims=True).clip(1e-12)

    return {
        "eps1": float(np.linalg.norm(g - h, axis=1).mean()),
        "eps2": float((1 - (unit(e_src) * unit(e_sel)).sum(1)).mean()),
        "cos_g_h": float((unit(g) * unit(h)).sum(1).mean()),
    }


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


def local_lipschitz(
    texts: Sequence[str],
    f: Callable[[list[str]], np.ndarray],
    z: Callable[[list[str]], np.ndarray],
    deltas: Sequence[int] = DELTAS,
    seed: int = 0,
) -> dict[int, dict[str, float]]:
    """L_emp(δ) statistics in percent: ‖f(y) − f(y')‖ / ‖z(y) − z(y')‖ over the corpus."""
    rng = random.Random(seed)
    vocab = sorted({w for t in texts for w in t.split()}) or ["x"]
    fy, zy = f(list(texts)), z(list(texts))
    out = {}
    for delta in deltas:
        moved = [perturb(t, delta, rng, vocab) for t in texts]
        num = np.linalg.norm(fy - f(moved), axis=1)
        den = np.linalg.norm(zy - z(moved), axis=1)
        ratio = np.where(den > 1e-12, num / np.maximum(den, 1e-12), np.nan)
        out[delta] = summary_stats(100.0 * ratio)
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

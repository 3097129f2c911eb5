"""Do LaSR's fusion rules hold out of sample? Nested cross-validation on the validation split.

LaSR chooses each query type's block weights λ on the validation questions
(``lasr.fusion_rule``: ``cv`` keeps the grid's best λ only when it beats the best single block
out of fold, ``in_sample`` takes the grid's best). The validation leaderboard then scores the
model on the same questions, so its LiRA row is in sample. This study applies each rule to the
other folds' questions (folds by question; foreign queries also leave their language out) and
scores the held-out questions in every validation pool — L→En, En-En, En→L, Multi and Multi-1
in both directions — against g alone (nothing fitted):

    python scripts/fusion_cv_study.py configs/xquad_minilm.yaml [--model DIR] [--folds 5]
        [--against OTHER_DIR]

Rows: each pool group, pooled over the validation languages; columns: g alone, the in-sample
rule and the cv rule out of fold, and the cv rule's paired Δ to g alone with a 95% interval
over questions (evaluators.bootstrap). ``--against`` scores a second LiRA model on the same
questions (e.g. one built with another translator pool) and prints the cv rule's out-of-fold
paired difference per pool and language.
"""

from __future__ import annotations

import argparse

import numpy as np

from evaluators.bootstrap import bootstrap_ci
from lasr.fixed_fusion import cv_cells, select_fusion, weight_grid
from lasr.model import LiRAModel
from lasr.trainable import FALLBACK, PoolScores, validation_scores
from lira.data.splits import load_splits, validation_pools
from lira.data.xquad_r import plain_qid
from pipeline.runconfig import RunConfig, load_config

G_ALONE = (0.0, 0.0, 1.0, 0.0, 0.0)


def nested_choice(
    v: PoolScores, combos: list, rule: str, folds: int, seed: int, fallback: tuple[str, ...] = ()
) -> dict[str, int]:
    """{query id: index in ``combos`` of the λ that ``rule`` picks without that query's fold
    (and, with two or more languages, without its language)}."""
    qs = [plain_qid(k) for k in v.keys]
    out: dict[str, int] = {}
    for cell, fit_on in cv_cells(qs, v.langs, folds, seed):
        on = fit_on.nonzero().flatten().tolist()
        sub = select_fusion(v.scores[:, on], combos, [qs[i] for i in on],
                            [v.langs[i] for i in on], folds, rule, seed, fallback)  # fmt: skip
        for i in cell.nonzero().flatten().tolist():
            out[v.keys[i]] = combos.index(sub.weights)
    return out


def group(name: str) -> str:
    """A pool's group: its scenario without the language (``lang-en:de`` -> ``lang-en``)."""
    return name.split(":")[0]


def out_of_fold(
    model: LiRAModel, cfg: RunConfig, folds: int
) -> dict[str, dict[str, tuple[float, float, float, float]]]:
    """{pool name: {query id: (g alone, in-sample rule, cv rule, cv rule in sample)}}: each
    validation query's nDCG@k, each rule's λ chosen without the query's fold (and language)."""
    pools = validation_pools(load_splits(cfg.data))
    head = model.net.head
    combos = weight_grid(cfg.lasr.fusion_grid, head.blocks_on)
    scores = validation_scores(model, pools, combos, cfg.lasr.ndcg_k, 64)
    g = combos.index(G_ALONE)
    out: dict[str, dict[str, tuple[float, float, float, float]]] = {}
    for kind, v in scores.items():
        picks = {r: nested_choice(v, combos, r, folds, cfg.lasr.seed, FALLBACK[kind])
                 for r in ("in_sample", "cv")}  # fmt: skip
        full = select_fusion(v.scores, combos, [plain_qid(k) for k in v.keys], v.langs,
                             folds, "cv", cfg.lasr.seed, FALLBACK[kind])  # fmt: skip
        print(f"{kind} queries: the cv rule on every validation query picks λ = {full.weights} "
              f"(in sample {100 * full.score:.1f}; the grid's best {full.fitted})")  # fmt: skip
        whole = combos.index(full.weights)
        for name, (keys, m) in v.pools.items():
            cell = out.setdefault(name, {})
            for j, key in enumerate(keys):
                cell[key] = (float(m[g, j]), float(m[picks["in_sample"][key], j]),
                             float(m[picks["cv"][key], j]), float(m[whole, j]))  # fmt: skip
    return out


def main() -> None:
    """Print each pool group's out-of-fold nDCG@10 under g alone and each rule (``--against``:
    and the cv rule's paired difference to another LiRA model, per pool)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--model", default=None, help="LiRA folder (default <output_dir>/lira-model)")
    ap.add_argument("--against", default=None,
                    help="another LiRA folder on the same data (e.g. the base pool's): the cv "
                    "rule's out-of-fold difference, per pool and language")  # fmt: skip
    ap.add_argument("--folds", type=int, default=5)
    args = ap.parse_args()
    cfg = load_config(args.config)
    model = LiRAModel.from_pretrained(args.model or f"{cfg.output_dir}/lira-model", online=False)
    mine = out_of_fold(model, cfg, args.folds)
    rows: dict[str, list[tuple[float, float, float, float]]] = {}
    for name, cell in mine.items():
        rows.setdefault(group(name), []).extend(cell.values())
    print(f"\nnDCG@10 x100, validation, out of fold ({args.folds} folds by question)")
    print("| pool | n | g alone | in-sample rule | cv rule | cv − g (95%) | cv rule in sample |")
    print("|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        g_, ins, cv, whole = (np.array(c) for c in zip(*r))
        _, lo, hi = bootstrap_ci(cv - g_)
        print(f"| {name} | {len(g_)} | {100 * g_.mean():.1f} | {100 * ins.mean():.1f} | "
              f"{100 * cv.mean():.1f} | {100 * (cv - g_).mean():+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] | "
              f"{100 * whole.mean():.1f} |")  # fmt: skip
    if args.against:
        other = out_of_fold(LiRAModel.from_pretrained(args.against, online=False), cfg, args.folds)
        print(f"\ncv rule out of fold, {args.model or 'the model'} − {args.against} (paired)")
        print("| pool | n | model | against | Δ (95%) |")
        print("|---|---|---|---|---|")
        pairs: dict[str, list[tuple[float, float]]] = {}
        for name in sorted(set(mine) & set(other)):
            keys = sorted(set(mine[name]) & set(other[name]))
            pairs[name] = [(mine[name][k][2], other[name][k][2]) for k in keys]
            if ":" in name:  # a language's pool also counts in its group, pooled
                pairs.setdefault(f"{group(name)} (pooled)", []).extend(pairs[name])
        for name, ab in sorted(pairs.items(), key=lambda kv: ("(pooled)" in kv[0], kv[0])):
            a, b = (np.array(c) for c in zip(*ab))
            _, lo, hi = bootstrap_ci(a - b)
            print(f"| {name} | {len(a)} | {100 * a.mean():.1f} | {100 * b.mean():.1f} | "
                  f"{100 * (a - b).mean():+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] |")  # fmt: skip


if __name__ == "__main__":
    main()

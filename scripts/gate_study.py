"""Does a query-aware gate beat a fixed fusion? Validation split only (issue 39, item 5).

Two blocks score a query q against the English corpus: g alone, cos(g q, g d) (mE5-small), and
the lr block, cos(A g q, A g d), with A the ridge map g -> h distilled on English text
(``scripts/distill_study.py``; by default on the training questions + the English corpus
sentences, the variant that met target 3 there). A fusion scores (1 - a) cos_g + a cos_lr; the
weight a runs over the ratios of distill_study's grid {0, 1/8, ..., 8}^2, so a fixed a is exactly
one of its (lambda_g, lambda_lr). Compared on the validation split (83 questions per language,
ru never trained), each fitted leave-one-language-out (LOLO) among de / es / ru (fit on the
other two, score the held-out one; English queries: fitted on the three):

- ``g alone`` (a = 0);
- ``fixed (out of fold)``: the a with the best mean nDCG@10 over the fit languages;
- ``gate``: a multinomial-logistic policy over a few weights (:data:`OPTIONS`), read from
  query-side reliability features the fixed fusion cannot use (:data:`FEATURES`): top-10
  agreement between g and the lr block and between g and raw h (MiniLM on the untranslated
  query), g's and lr's top-1 score and top-1 margin, the ridge map's round-trip reconstruction
  residual 1 - cos(B(A(g q)), g q) (B: h -> g, fitted on the same text) and the script (Latin or
  not). It maximises the expected per-query nDCG@10 gain over the options' mean, with an L2
  penalty chosen by an inner LOLO on the two fit languages; argmax at inference. No candidate
  critic score: this study has no translations (the fused blocks read no translation);
- ``oracle``: the per-query best a of the whole grid (the ceiling no gate can pass).

Paired bootstrap 95% intervals of each against g alone and against the fixed fusion, then why:
the share of queries where every option scores the same, and each feature's Spearman rho with
the per-query gain of an lr-heavy over a g-heavy weight. ``--train-queries N`` also fits the
fixed fusion and the gates on N de/es training questions per language (the held-out language's
own left out). Nothing here reads a test column; the numbers are in docs/validation.md ("Gate").

    python scripts/gate_study.py configs/xquad_minilm.yaml [--map distill] [--train-queries 450]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import random
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from arca.adaptor import ridge_fit
from evaluators.bootstrap import bootstrap_ci
from lira.data.splits import load_splits
from lira.data.xquad_r import plain_qid
from lira.metrics import ndcg_dense
from lira.runconfig import load_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from distill_study import GRID, embed  # the same cache and grid

ALPHAS = sorted({ll / (lg + ll) for lg, ll in itertools.product(GRID, GRID) if lg or ll})
"""Every lr share a = lambda_lr / (lambda_g + lambda_lr) of distill_study's grid."""
OPTIONS = (0.0, 1 / 9, 1 / 5, 1 / 3, 1 / 2, 2 / 3)
"""The weights the gate chooses among (each in :data:`ALPHAS`)."""
FEATURES = (
    "agree@10 g-lr",
    "agree@10 g-h",
    "same top-1 g-lr",
    "g top-1",
    "g margin",
    "lr top-1",
    "lr margin",
    "residual",
    "latin script",
)
PENALTIES = (1e-3, 1e-2, 1e-1, 1.0)
RIDGE_PENALTIES = (1.0, 10.0, 100.0, 1000.0)


def top_stats(cos: Tensor, k: int = 10) -> tuple[Tensor, Tensor, Tensor]:
    """Top-k indices [Q, k], top-1 score [Q] and top-1 margin [Q] of scores [Q, D]."""
    v, i = cos.topk(k, dim=-1)
    return i, v[:, 0], v[:, 0] - v[:, 1]


def agreement(a: Tensor, b: Tensor) -> Tensor:
    """Share [Q] of the top-k indices [Q, k] of ``a`` that are also in ``b``'s."""
    return (a.unsqueeze(-1) == b.unsqueeze(-2)).any(-1).float().mean(-1)


def is_latin(text: str) -> float:
    """1.0 when most letters of ``text`` are Latin (code points below U+0250)."""
    letters = [c for c in text if c.isalpha()]
    return float(sum(ord(c) < 0x250 for c in letters) * 2 >= len(letters))


def spearman(a: Tensor, b: Tensor) -> float:
    """Spearman rank correlation of two vectors [N] (average ranks for ties)."""

    def rank(t: Tensor) -> Tensor:
        t = t.double()
        return ((t[:, None] > t[None]).sum(1) + 0.5 * ((t[:, None] == t[None]).sum(1) - 1)).double()

    ra, rb = rank(a), rank(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float((ra * rb).sum() / (ra.norm() * rb.norm()).clamp(min=1e-12))


def fit_policy(x: Tensor, gain: Tensor, penalty: float, steps: int = 200) -> Tensor:
    """Weights [F + 1, K] of a softmax policy over K options maximising the mean of
    Σ_k π_k(x_i) gain[i, k] - penalty ||W||² (x [N, F] standardised, gain [N, K])."""
    w = torch.zeros(x.shape[1] + 1, gain.shape[1], dtype=torch.float64, requires_grad=True)
    xb = torch.cat([x, torch.ones(len(x), 1)], 1).double()
    opt = torch.optim.LBFGS([w], max_iter=steps, line_search_fn="strong_wolfe")
    g = gain.double()

    def closure() -> Tensor:
        opt.zero_grad()
        pi = torch.softmax(xb @ w, -1)
        loss = -(pi * g).sum(-1).mean() + penalty * w[:-1].pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach()


def choose(w: Tensor, x: Tensor) -> Tensor:
    """The option index [N] the policy ``w`` picks for features ``x`` [N, F]."""
    return (torch.cat([x, torch.ones(len(x), 1)], 1).double() @ w).argmax(-1)


def fit_ridge(x: Tensor, gain: Tensor, penalty: float) -> Tensor:
    """Weights [F + 1, K] of one ridge regression per option of its gain [N, K] on x [N, F]
    (standardised; the intercept is not penalised): the gate picks the best predicted gain."""
    xb = torch.cat([x, torch.ones(len(x), 1)], 1).double()
    reg = penalty * torch.eye(xb.shape[1], dtype=torch.float64)
    reg[-1, -1] = 0.0
    return torch.linalg.solve(xb.T @ xb + reg, xb.T @ gain.double())


def gate_fit(
    x: Tensor, util: Tensor, groups: dict[str, Tensor], kind: str = "policy"
) -> tuple[Tensor, Tensor, Tensor, float]:
    """(weights, feature mean, feature std, penalty) of a ``policy`` (:func:`fit_policy`) or
    ``ridge`` (:func:`fit_ridge`) gate fitted on the rows of ``groups`` ({name: rows}); the
    penalty chosen by an inner leave-one-group-out over those groups."""
    fit_fn, grid = (fit_policy, PENALTIES) if kind == "policy" else (fit_ridge, RIDGE_PENALTIES)
    rows = torch.cat(list(groups.values()))
    mu, sd = x[rows].mean(0), x[rows].std(0).clamp(min=1e-6)
    z = (x - mu) / sd
    gain = util - util.mean(-1, keepdim=True)

    def inner(p: float) -> float:
        score = 0.0
        for held, r in groups.items():
            fit = torch.cat([s for k, s in groups.items() if k != held])
            score += float(util[r, choose(fit_fn(z[fit], gain[fit], p), z[r])].mean())
        return score

    best = max(grid, key=inner) if len(groups) > 1 else grid[-1]
    return fit_fn(z[rows], gain[rows], best), mu, sd, best


def interval(d: Tensor) -> str:
    """'Δ mean [low, high]' x100 of paired differences ``d`` [N]."""
    m, lo, hi = bootstrap_ci(d.tolist())
    return f"{m * 100:+.1f} [{lo * 100:+.1f}, {hi * 100:+.1f}]"


def features(v: dict[str, Tensor], key: str, maps: tuple[Tensor, ...], latin: Tensor) -> Tensor:
    """Reliability features [Q, F] (:data:`FEATURES`) of the queries cached under ``key``."""
    w, b, wb, bb = maps
    n = F.normalize
    gq, aq = v[f"{key}.g"], v[f"{key}.g"] @ w + b
    cos_g = n(gq) @ n(v["corpus.g"]).T
    cos_lr = n(aq) @ n(v["corpus.g"] @ w + b).T
    cos_h = n(v[f"{key}.h"]) @ n(v["corpus.h"]).T
    (ti_g, t1_g, m_g), (ti_lr, t1_lr, m_lr) = top_stats(cos_g), top_stats(cos_lr)
    residual = 1 - (n(aq @ wb + bb) * n(gq)).sum(-1)
    return torch.stack([
        agreement(ti_g, ti_lr), agreement(ti_g, top_stats(cos_h)[0]),
        (ti_g[:, 0] == ti_lr[:, 0]).float(), t1_g, m_g, t1_lr, m_lr, residual, latin,
    ], 1)  # fmt: skip


def utilities(v: dict[str, Tensor], key: str, maps: tuple[Tensor, ...], labels: Tensor) -> Tensor:
    """nDCG@10 [Q, len(ALPHAS)] of (1 - a) cos_g + a cos_lr for every a of :data:`ALPHAS`."""
    w, b = maps[:2]
    n = F.normalize
    cos_g = n(v[f"{key}.g"]) @ n(v["corpus.g"]).T
    cos_lr = n(v[f"{key}.g"] @ w + b) @ n(v["corpus.g"] @ w + b).T
    return torch.stack([ndcg_dense((1 - a) * cos_g + a * cos_lr, labels) for a in ALPHAS], 1)


def main() -> None:
    """Print the leave-one-language-out table: g alone, fixed fusion, gates, oracle."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--cache", default="out/study/vecs.pt")
    ap.add_argument("--map", choices=("distill", "distill+corpus"), default="distill+corpus")
    ap.add_argument("--lam", type=float, default=1.0, help="ridge penalty")
    ap.add_argument("--max-train", type=int, default=300, help="English training questions")
    ap.add_argument("--train-queries", type=int, default=0,
                    help="also fit the gates on up to this many de/es training questions per "
                         "language (not those whose English text fitted the map; the held-out "
                         "language's own are left out)")  # fmt: skip
    args = ap.parse_args()
    cfg = load_config(args.config)
    # the map's questions: a seeded sample of max_train (the pipeline's own with its cap)
    cfg = dataclasses.replace(
        cfg, data=dataclasses.replace(cfg.data, max_train_queries=args.max_train)
    )
    splits = load_splits(cfg.data)
    every_train = load_splits(dataclasses.replace(cfg.data, max_train_queries=0)).train_ids
    random.Random(cfg.data.split_seed).shuffle(every_train)  # a seeded order, not sorted ids
    ds, dev = splits.dataset, splits.dev
    dev_foreign = [q for q in dev.queries if q.lang != "en"]
    en_text = lambda i: ds.question("en", plain_qid(i)).text  # noqa: E731
    train_en = list(dict.fromkeys(en_text(i) for i in splits.train_ids))[: args.max_train]
    texts = {
        "dev_q": [q.text for q in dev.queries],
        "dev_gold": [en_text(q.id) for q in dev_foreign],
        "corpus": [d.text for d in dev.corpus],
        "train_en": train_en,
    }
    seen = set(train_en)
    gate_ids = [i for i in every_train if en_text(i) not in seen][: args.train_queries]
    train_langs = [x for x in cfg.data.train_languages if x != "en"]
    gate_q = [ds.question(x, i) for x in train_langs for i in gate_ids]
    if gate_q:
        texts["gate_train_q"] = [q.text for q in gate_q]
    v = embed(cfg, texts, Path(args.cache))
    doc_ids = [d.id for d in dev.corpus]

    def label_matrix(qs: list, qrels: dict) -> Tensor:
        return torch.tensor([[float(qrels[q.id].get(d, 0) > 0) for d in doc_ids] for q in qs])

    en_idx = [i for i, d in enumerate(dev.corpus) if d.lang == "en"]
    g_fit, h_fit = v["train_en.g"], v["train_en.h"]
    if args.map == "distill+corpus":
        g_fit = torch.cat([g_fit, v["corpus.g"][en_idx]])
        h_fit = torch.cat([h_fit, v["corpus.h"][en_idx]])
    maps = (*ridge_fit(g_fit, h_fit, args.lam), *ridge_fit(h_fit, g_fit, args.lam))
    latin = lambda qs: torch.tensor([is_latin(q.text) for q in qs])  # noqa: E731
    x = features(v, "dev_q", maps, latin(dev.queries))
    util = utilities(v, "dev_q", maps, label_matrix(dev.queries, dev.qrels))
    opt_idx = [ALPHAS.index(min(ALPHAS, key=lambda a, o=o: abs(a - o))) for o in OPTIONS]
    langs = sorted({q.lang for q in dev_foreign})
    rows = {
        y: torch.tensor([i for i, q in enumerate(dev.queries) if q.lang == y])
        for y in [*langs, "en"]
    }
    # the extra fit rows (training questions) are appended after the validation rows
    extra: dict[str, Tensor] = {}
    if gate_q:
        qrels = {}
        for y in train_langs:
            qrels |= ds.retrieval(y, ["en"], gate_ids).qrels
        x = torch.cat([x, features(v, "gate_train_q", maps, latin(gate_q))])
        util = torch.cat([util, utilities(v, "gate_train_q", maps, label_matrix(gate_q, qrels))])
        for y in train_langs:
            extra[f"train {y}"] = torch.tensor(
                [len(dev.queries) + i for i, q in enumerate(gate_q) if q.lang == y]
            )
    util_opt = util[:, opt_idx]  # [Q, K]
    base = util[:, ALPHAS.index(0.0)]
    kinds = {"g": "g alone", "fixed": "fixed (out of fold)", "policy": "gate: softmax policy",
             "ridge": "gate: ridge on gains", "oracle": "oracle per query"}  # fmt: skip
    res: dict[str, dict[str, Tensor]] = {k: {} for k in kinds}
    picked: dict[str, list[str]] = {}
    for held in [*langs, "en"]:
        fit = {y: rows[y] for y in langs if y != held}
        fit |= {k: r for k, r in extra.items() if k != f"train {held}"}
        r = rows[held]
        fixed_a = max(range(len(ALPHAS)),
                      key=lambda j: sum(float(util[s, j].mean()) for s in fit.values()))  # fmt: skip
        res["g"][held] = base[r]
        res["fixed"][held] = util[r, fixed_a]
        res["oracle"][held] = util[r].max(1).values
        picked[held] = [f"fixed a {ALPHAS[fixed_a]:.3f} (fit on {', '.join(fit)})"]
        for kind in ("policy", "ridge"):
            w, mu, sd, pen = gate_fit(x, util_opt, fit, kind)
            choice = choose(w, (x[r] - mu) / sd)
            res[kind][held] = util_opt[r].gather(1, choice[:, None])[:, 0]
            counts = torch.bincount(choice, minlength=len(OPTIONS)).tolist()
            picked[held].append(f"{kind} (penalty {pen:g}) picks "
                                + " ".join(f"{o:.2f}:{c}" for o, c in zip(OPTIONS, counts) if c))  # fmt: skip
    print(f"validation: {len(dev.queries)} queries, {len(dev.corpus)} documents; map {args.map} "
          f"(ridge {args.lam}, {len(g_fit)} texts); gate options "
          f"{[round(o, 3) for o in OPTIONS]}; {len(gate_q)} training questions in the gate fit")  # fmt: skip
    print("nDCG@10 x100, leave-one-language-out; Δ = paired bootstrap 95% interval")
    for k, name in kinds.items():
        cells = []
        for held in [*langs, "en"]:
            s = res[k][held]
            cell = f"{held} {float(s.mean()) * 100:.1f}"
            if k != "g":
                cell += f" (vs g {interval(s - res['g'][held])}"
                cell += f"; vs fixed {interval(s - res['fixed'][held])})" if k != "fixed" else ")"
            cells.append(cell)
        pooled = torch.cat([res[k][y] for y in langs])
        pg = torch.cat([res["g"][y] for y in langs])
        pf = torch.cat([res["fixed"][y] for y in langs])
        tail = f"  foreign mean {float(pooled.mean()) * 100:.2f}"
        if k != "g":
            tail += f" (vs g {interval(pooled - pg)}; vs fixed {interval(pooled - pf)})"
        print(f"  {name:22s} " + " | ".join(cells) + tail)
    for held, text in picked.items():
        print(f"  {held} held out: " + "; ".join(text))
    print("feature means per language: " + ", ".join(FEATURES))
    for y, r in {**rows, **extra}.items():
        print(f"  {y}: " + " ".join(f"{float(c):.3f}" for c in x[r].mean(0)))
    fr = torch.cat([rows[y] for y in langs])
    oracle_opt = util_opt[fr].max(1).values
    ties = (util_opt[fr].max(1).values - util_opt[fr].min(1).values < 1e-9).float().mean()
    print(
        f"oracle among the gate's options, foreign mean {float(oracle_opt.mean()) * 100:.2f}; "
        f"foreign validation queries where every option scores the same: {float(ties):.0%}"
    )
    lo, hi = OPTIONS.index(1 / 9), OPTIONS.index(2 / 3)
    d = util_opt[fr, hi] - util_opt[fr, lo]  # lr-heavy minus g-heavy, per query
    print(
        "Spearman rho of each feature with nDCG(a 2/3) - nDCG(a 1/9), foreign validation: "
        + ", ".join(f"{f} {spearman(x[fr, i], d):+.2f}" for i, f in enumerate(FEATURES))
    )


if __name__ == "__main__":
    main()

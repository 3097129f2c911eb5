"""Is the validation fit of the fixed fusion the right rule? Leave-one-language-out on validation.

LaSR starts at the best fixed score fusion Σ_b λ_b cos_b on the validation split
(:mod:`lasr.fixed_fusion`). After the test split was read once, the question was whether another
*rule* for choosing λ would hold better on languages the fit never saw. This script answers it
on the validation split alone: for each validation language L it fits on the others and scores
on L (leave-one-language-out), for these rules:

- ``argmax``: the shipped rule, the best λ ∈ ``lasr.fusion_grid``³;
- ``gated``: argmax only where its paired gain over the best single block has a 95% bootstrap
  lower bound above 0, else that block alone;
- ``bagged``: the mean of the normalised argmax λ over 50 bootstrap resamples of the queries;
- ``coarse``: argmax over the grid {0, 0.25, 1, 4};
- ``+raw h``: argmax with a fourth block, h on the *untranslated* query;
- ``en-lang doc row``: English queries against target-language documents, fitting the foreign
  document row of the head's table (today 1 on every block) with the English query row fixed.

Run after ``lira run configs/xquad_minilm.yaml`` (it reads that run's store, Arca and caches):

    python scripts/fusion_rules.py configs/xquad_minilm.yaml

The numbers of 2026-11-25 are in docs/validation.md.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import Tensor

from lasr.banks import retrieval_banks
from lasr.engine import task_data
from lasr.fixed_fusion import block_cosines, fused_ndcg
from lasr.model import LiRAModel
from lira.data.splits import load_splits
from lira.translation.engine import store_path
from lira.translation.store import TranslationStore
from pipeline.runconfig import load_config

Rule = Callable[[list[str]], Sequence[float]]


def lolo(rules: dict[str, Rule], score: Callable[[Sequence[float], str], float], langs: list[str]):
    """{rule: {held-out language: nDCG@k}} fitting on the other languages."""
    return {
        name: {h: score(rule([x for x in langs if x != h]), h) for h in langs}
        for name, rule in rules.items()
    }


def relevance(
    qrels: dict[str, dict[str, int]], queries: Sequence[str], docs: Sequence[str]
) -> Tensor:
    """[Q, D] binary relevance of every (query, document) key pair."""
    return torch.tensor([[float(qrels[q].get(d, 0) > 0) for d in docs] for q in queries])


def main() -> None:
    """Print the leave-one-language-out table of every rule on the validation split."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    args = ap.parse_args()
    cfg = load_config(args.config)
    out = Path(cfg.output_dir)
    store = TranslationStore(store_path(cfg), commit_every=cfg.translation.commit_every)
    model = LiRAModel.from_config(cfg, out / "arca" / "final", store=store, online=False)
    model.arca.attach_g_cache(out)
    _, dev, _, _ = task_data(cfg)
    qb, db = retrieval_banks(model, dev, 64)
    cos = block_cosines(model.net, qb.streams.tensors(), db.streams.tensors())[:3]  # en, lr, g
    labels = relevance(dev.qrels, qb.keys, db.keys)
    h = model.backbone  # the run's h, already loaded
    raw_q = torch.from_numpy(h.encode([r.text for r in dev.queries], kind="query"))
    raw_d = torch.from_numpy(h.encode([r.text for r in dev.corpus], kind="document"))
    cos4 = torch.cat([cos, (raw_q @ raw_d.T)[None].to(cos.dtype)])  # [4, Q, D]
    langs = sorted({x for x in qb.langs if x != "en"})
    rows = {x: torch.tensor([i for i, y in enumerate(qb.langs) if y == x]) for x in langs}
    grid = list(cfg.lasr.fusion_grid)

    def table(c: Tensor, g: Sequence[float]) -> tuple[list[tuple[float, ...]], Tensor]:
        combos = [lam for lam in itertools.product(g, repeat=len(c)) if any(lam)]
        return combos, torch.stack([fused_ndcg(c, labels, lam) for lam in combos])  # [C, Q]

    combos, mats = table(cos, grid)
    combos4, mats4 = table(cos4, grid)
    coarse_c, coarse_m = table(cos, [0.0, 0.25, 1, 4])
    singles = [tuple(float(i == b) for i in range(3)) for b in range(3)]

    def mean_over(m: Tensor, ls: list[str], idx: dict[str, Tensor] | None = None) -> Tensor:
        return sum(m[:, (idx or rows)[x]].mean(1) for x in ls) / len(ls)

    def argmax(ls: list[str], c: list = combos, m: Tensor = mats) -> Sequence[float]:
        return c[int(mean_over(m, ls).argmax())]

    def resample(ls: list[str], gen: torch.Generator) -> dict[str, Tensor]:
        return {x: rows[x][torch.randint(len(rows[x]), (len(rows[x]),), generator=gen)] for x in ls}

    def gated(ls: list[str]) -> Sequence[float]:
        best, gen = argmax(ls), torch.Generator().manual_seed(0)
        single = max(singles, key=lambda s: float(mean_over(mats[[combos.index(s)]], ls)))
        pair = mats[[combos.index(tuple(best)), combos.index(single)]]
        diffs = sorted(float(-mean_over(pair, ls, resample(ls, gen)).diff()) for _ in range(1000))
        return best if diffs[25] > 0 else single

    def bagged(ls: list[str]) -> Sequence[float]:
        gen, acc = torch.Generator().manual_seed(0), torch.zeros(3)
        for _ in range(50):
            lam = torch.tensor(combos[int(mean_over(mats, ls, resample(ls, gen)).argmax())])
            acc += lam / lam.sum()
        return (acc / 50).tolist()

    def score3(lam: Sequence[float], x: str) -> float:
        return float(fused_ndcg(cos[:, rows[x]], labels[rows[x]], lam).mean())

    res = lolo(
        {
            "argmax": argmax,
            "gated": gated,
            "bagged": bagged,
            "coarse": lambda ls: argmax(ls, coarse_c, coarse_m),
        },
        score3,
        langs,
    )
    res["+raw h"] = {
        x: float(
            fused_ndcg(
                cos4[:, rows[x]],
                labels[rows[x]],
                argmax([y for y in langs if y != x], combos4, mats4),
            ).mean()
        )
        for x in langs
    }
    res["g alone"] = {x: score3((0.0, 0.0, 1.0), x) for x in langs}
    print("lang-en, leave-one-language-out on validation (nDCG@10 x100):")
    for name, by in res.items():
        print(f"  {name:10s} " + " ".join(f"{x} {v * 100:.1f}" for x, v in by.items())
              + f"  mean {sum(by.values()) / len(by) * 100:.2f}")  # fmt: skip

    # en-lang: English queries -> target-language documents; fit the foreign document row
    splits = load_splits(cfg.data)
    en_rows = {"en": torch.tensor([i for i, y in enumerate(qb.langs) if y == "en"])}
    q_en = torch.tensor(combos[int(mean_over(mats, ["en"], en_rows).argmax())])  # English row
    per_lang: dict[str, tuple[Tensor, Tensor]] = {}
    for x in langs:
        data = splits.dataset.retrieval("en", [x], splits.dev_ids)
        qx, dx = retrieval_banks(model, data, 64)
        c = block_cosines(model.net, qx.streams.tensors(), dx.streams.tensors())[:3]
        per_lang[x] = (c * q_en[:, None, None], relevance(data.qrels, qx.keys, dx.keys))
    rows_d = combos  # the same grid of three block weights
    table_d = {
        x: torch.stack([fused_ndcg(c, lab, lam).mean() for lam in rows_d])
        for x, (c, lab) in per_lang.items()
    }
    now = rows_d.index((1.0, 1.0, 1.0)) if (1.0, 1.0, 1.0) in rows_d else None
    print("en-lang, document row fitted leave-one-language-out:")
    for x in langs:
        fit = rows_d[int(sum(table_d[y] for y in langs if y != x).argmax())]
        print(f"  {x}: fitted {fit} {float(table_d[x][rows_d.index(fit)]) * 100:.1f}"
              + ("" if now is None else f", today (1, 1, 1) {float(table_d[x][now]) * 100:.1f}"))  # fmt: skip


if __name__ == "__main__":
    main()

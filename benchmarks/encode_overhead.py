"""LiRA ``encode`` cost next to the two encoders it wraps.

    .venv/bin/python benchmarks/encode_overhead.py [--n 256] [--candidates 2] [--raw-view]

On N German XQuAD-R questions with stored English candidates (reference translations, K per
question) it times

- LiRA: ``LiRAModel.encode(texts, langs)`` (store look-up, Actor selection, backbone on the
  chosen translation, Arca g + Adaptor, fusion head),
- the floor: backbone ``encode`` on the chosen translations + one forward of the
  multilingual encoder g on the sources, both batched by length as the encoders do,

and prints overhead = LiRA / floor (target <= 1.10). With ``--raw-view`` (``lasr.raw_view``)
LiRA also embeds each untranslated source with the backbone, and so does the floor; the ratio
LiRA-with-raw-view / LiRA-without is printed too. The Actor's candidate features use the
backbone's input-embedding stream (a table look-up, no transformer pass), so the overhead is
the store query, that look-up, the Adaptor and the fusion head.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from lasr.model import LiRAModel
from lira.config import ModelsConfig
from lira.translation.config import TranslationConfig
from lira.translation.store import TranslationStore, reference_translator
from pipeline.runconfig import RunConfig

# XQuAD-R: $LIRA_XQUAD_R, else the repository-relative ../shared/data/xquad-r
XQUAD = Path(
    os.environ.get("LIRA_XQUAD_R", Path(__file__).resolve().parents[2] / "shared/data/xquad-r")
)


def questions(lang: str, n: int) -> dict[str, str]:
    """The first ``n`` question texts of an XQuAD-R language, by question id."""
    from importlib.resources import files

    demo = files("lira") / "data" / "demo" / "xquad-r" / f"{lang}.json"
    path = Path(str(demo)) if Path(str(demo)).is_file() else XQUAD / f"{lang}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for art in data["data"]:
        for p in art["paragraphs"]:
            for qa in p["qas"]:
                out[qa["id"]] = qa["question"]
    return dict(list(out.items())[:n])


def best_of(fns: dict, repeats: int) -> dict[str, float]:
    """Minimum wall time of each function over ``repeats`` rounds (after one warm-up call each).

    The functions alternate within a round, so load from other processes hits both alike.
    """
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: min(ts) for name, ts in times.items()}


def main() -> None:
    """Build the demo stack, fill a store, time both paths, print the ratio."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--candidates", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--raw-view", action="store_true", help="lasr.raw_view: true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    de, en = questions("de", args.n), questions("en", args.n)
    ids = [i for i in de if i in en]
    src = [de[i] for i in ids]
    refs = [reference_translator(f"ref{k}") for k in range(args.candidates)]
    tmp = Path(tempfile.mkdtemp(prefix="lira-encode-bench-"))
    store = TranslationStore(tmp / "store.sqlite")
    for k, t in enumerate(refs):  # candidate k: the English question, k trailing spaces apart
        store.add_reference(t, [(de[i], "de", en[i] + " " * k, i) for i in ids])
    cfg = RunConfig(
        output_dir=str(tmp),
        models=ModelsConfig(backbone="demo:minilm", encoder="demo:mt5"),
        translation=TranslationConfig(mt_translators=refs, num_candidates=args.candidates),
    )
    cfg.lasr.raw_view = args.raw_view
    model = LiRAModel.from_config(cfg, None, store=store)
    plain = LiRAModel(cfg.models, cfg.translation, cfg.arca, replace(cfg.lasr, raw_view=False),
                      model.backbone, model.arca, store)  # fmt: skip
    langs = ["de"] * len(src)
    chosen, _, _ = model.english_texts(src, langs)
    bs = args.batch_size

    def lira() -> None:
        model.encode(src, langs, kind="query", batch_size=bs)

    by_len = sorted(src, key=len, reverse=True)  # the floor batches like lengths too

    def without_raw_view() -> None:
        plain.encode(src, langs, kind="query", batch_size=bs)

    def floor() -> None:
        model.backbone.encode(chosen, kind="query", batch_size=bs)
        if args.raw_view:
            model.backbone.encode(src, kind="query", batch_size=bs)
        with torch.no_grad():
            for i in range(0, len(by_len), bs):
                model.arca.encoder(by_len[i : i + bs])

    fns = {"lira": lira, "floor": floor}
    if args.raw_view:
        fns["plain"] = without_raw_view
    best = best_of(fns, args.repeats)
    t_lira, t_floor = best["lira"], best["floor"]
    print(f"texts: {len(src)} German questions, {args.candidates} stored candidates each")
    print(f"LiRA encode:                         {t_lira:8.3f} s")
    print(f"backbone encode + encoder forward:   {t_floor:8.3f} s")
    print(f"overhead ratio LiRA / floor:         {t_lira / t_floor:8.3f}  (target <= 1.10)")
    if args.raw_view:
        ratio = t_lira / best["plain"]
        print(f"raw view cost: LiRA / LiRA without:  {ratio:8.3f}  (one more backbone pass)")
    store.close()


if __name__ == "__main__":
    main()

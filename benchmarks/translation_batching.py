"""Batched vs one-by-one transformers translation on the demo MT model (target: >= 3x).

    .venv/bin/python benchmarks/translation_batching.py [--n 64] [--batch-size 32]

Sources: German XQuAD-R questions. ``LIRA_BENCH_MT`` overrides the model folder
(default ``demo:marian``). Prints texts/s of both modes and their ratio, from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from lira.translation.config import TranslatorConfig
from lira.translation.translators import TransformersTranslator

# XQuAD-R: $LIRA_XQUAD_R, else the repository-relative ../shared/data/xquad-r
DATA = str(
    Path(
        os.environ.get("LIRA_XQUAD_R", Path(__file__).resolve().parents[2] / "shared/data/xquad-r")
    )
)


def questions(lang: str, n: int) -> list[str]:
    """The first ``n`` XQuAD-R questions of ``lang`` (falls back to synthetic sentences)."""
    path = os.path.join(DATA, f"{lang}.json")
    if not os.path.exists(path):
        return [f"Das ist der Satz Nummer {i}, er ist kurz." for i in range(n)]
    d = json.load(open(path, encoding="utf-8"))
    qs = [qa["question"] for a in d["data"] for p in a["paragraphs"] for qa in p["qas"]]
    return qs[:n]


def model_ref(env: str, demo: str) -> str:
    """A model folder from ``env`` or the demo alias."""
    if os.environ.get(env):
        return os.environ[env]
    from lira.demo.references import resolve_model

    return resolve_model(demo, os.environ.get("LIRA_CACHE", ""))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    texts = questions("de", a.n)
    path = model_ref("LIRA_BENCH_MT", "demo:marian")
    cfgs = {
        "one-by-one": TranslatorConfig(name="mt", kind="transformers", role="mt", model=path,
                                       batch_size=1, max_new_tokens=a.max_new_tokens),
        "batched": TranslatorConfig(name="mt", kind="transformers", role="mt", model=path,
                                    batch_size=a.batch_size, max_new_tokens=a.max_new_tokens),
    }  # fmt: skip
    tr = TransformersTranslator(cfgs["batched"])
    tr.translate(texts[:2], "de")  # warm-up
    rate = {}
    outs = {}
    for mode, cfg in cfgs.items():
        tr.cfg = cfg
        t0 = time.perf_counter()
        outs[mode] = tr.translate(texts, "de")
        dt = time.perf_counter() - t0
        rate[mode] = len(texts) / dt
        print(f"{mode:>10}: {len(texts)} texts in {dt:6.2f}s = {rate[mode]:7.2f} texts/s")
    same = sum(x.raw == y.raw for x, y in zip(outs["batched"], outs["one-by-one"]))
    print(f"model: {path}  threads: {a.threads}  batch size: {a.batch_size}")
    print(f"identical outputs (greedy, padded vs unpadded): {same}/{len(texts)}")
    print(
        f"speed-up batched / one-by-one: {rate['batched'] / rate['one-by-one']:.1f}x (target >= 3x)"
    )


if __name__ == "__main__":
    main()

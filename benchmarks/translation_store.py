"""Translation store reuse: the second run over the same sources generates nothing (< 5% time).

    .venv/bin/python benchmarks/translation_store.py [--n 96]

Pool: the demo MT model (``demo:marian``, or ``LIRA_BENCH_MT``) + the tiny demo causal LM as
an LLM translator (``demo:qwen3-lm``, or ``LIRA_BENCH_LM``), judged by the constrained critic
on the same LM. Sources: German XQuAD-R questions with every 8th repeated (dedup).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from translation_batching import model_ref, questions

from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from lira.translation.engine import fill_store
from pipeline.runconfig import RunConfig


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=96)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    texts = questions("de", a.n)
    texts += texts[::8]  # duplicates are translated once
    mt_path = model_ref("LIRA_BENCH_MT", "demo:marian")
    lm_path = model_ref("LIRA_BENCH_LM", "demo:qwen3-lm")
    tc = TranslationConfig(
        llm_translators=[TranslatorConfig(name="lm", kind="transformers", role="llm",
                                          model=lm_path, max_new_tokens=16, batch_size=16)],
        mt_translators=[TranslatorConfig(name="mt", kind="transformers", role="mt",
                                         model=mt_path, max_new_tokens=32, batch_size=32)],
        pass_at_k=1, num_candidates=2, commit_every=32,
        critic=CriticConfig(kind="transformers", model=lm_path, max_new_tokens=40,
                            batch_size=16, max_retries=0),
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        cfg = RunConfig(output_dir=tmp, translation=tc)
        t0 = time.perf_counter()
        s1 = fill_store(cfg, {"de": texts})
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        s2 = fill_store(cfg, {"de": texts})
        second = time.perf_counter() - t0
    print(f"sources: {len(texts)} ({s1['sources']} unique); translators: lm (LLM) + mt; critic on")
    print(f"first run : {first:7.2f}s  generated={s1['generated']} failed={s1['failed']} "
          f"critic scored={s1['critic']['scored']} failed={s1['critic']['failed']}")  # fmt: skip
    print(f"second run: {second:7.2f}s  generated={s2['generated']} reused={s2['reused']} "
          f"critic scored={s2['critic']['scored']}")  # fmt: skip
    print(f"second / first time: {100 * second / first:.2f}% (target < 5%); "
          f"second-run generations: {s2['generated']} (target 0)")  # fmt: skip


if __name__ == "__main__":
    main()

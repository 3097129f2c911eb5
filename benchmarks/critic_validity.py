"""Critic schema-valid rate: grammar-constrained vs unconstrained decoding on 200 demo pairs.

    .venv/bin/python benchmarks/critic_validity.py [--n 200] [--model demo:qwen3-lm]

Pairs: German XQuAD-R questions with their English originals (aligned by question id).
Default judge: the tiny demo causal LM ``demo:qwen3-lm`` (``LIRA_BENCH_LM`` overrides);
``--model demo:smollm2`` uses the real SmolLM2-135M-Instruct (slower). No retries, so the
rates are those of a single decode.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from translation_batching import DATA

from lira.translation.config import CriticConfig
from lira.translation.critic import build_critic


def pairs(n: int) -> tuple[list[str], list[str]]:
    """``n`` (German question, English question) pairs aligned by XQuAD-R question id."""

    def by_id(lang: str) -> dict[str, str]:
        d = json.load(open(os.path.join(DATA, f"{lang}.json"), encoding="utf-8"))
        return {
            qa["id"]: qa["question"] for a in d["data"] for p in a["paragraphs"] for qa in p["qas"]
        }

    de, en = by_id("de"), by_id("en")
    ids = [i for i in de if i in en][:n]
    return [de[i] for i in ids], [en[i] for i in ids]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--model", default="")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--batch-size", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = a.model or os.environ.get("LIRA_BENCH_LM") or "demo:qwen3-lm"
    src, cand = pairs(a.n)
    rates = {}
    for constrained in (True, False):
        cfg = CriticConfig(kind="transformers", model=model, max_new_tokens=a.max_new_tokens,
                           batch_size=a.batch_size, max_retries=0)  # fmt: skip
        critic = build_critic(cfg, constrained=constrained)
        t0 = time.perf_counter()
        res = critic.score(src, cand, "de")
        dt = time.perf_counter() - t0
        name = "constrained" if constrained else "unconstrained"
        rates[name] = sum(r.ok for r in res) / len(res)
        print(f"{name:>13}: {sum(r.ok for r in res)}/{len(res)} schema-valid "
              f"({100 * rates[name]:.1f}%) in {dt:.1f}s; e.g. {res[0].raw[:60]!r}")  # fmt: skip
    print(f"judge: {model}, max_new_tokens={a.max_new_tokens}, {len(src)} pairs, no retries")
    print(f"valid-rate constrained / unconstrained: {100 * rates['constrained']:.1f}% vs "
          f"{100 * rates['unconstrained']:.1f}%")  # fmt: skip


if __name__ == "__main__":
    main()

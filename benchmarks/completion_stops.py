"""A completion prompt's stop at the first line: token ids vs transformers' ``stop_strings``.

    .venv/bin/python benchmarks/completion_stops.py [--model demo:gemma3] [--n 16]

The pool's transformers backend stops a ``fewshot-v1`` translation on the token ids that hold a
line break (:func:`lira.models.generators.line_end_ids`). This times one greedy batch of ``--n``
German XQuAD-R questions three ways on the same model: stopped on those ids, stopped by
``generate(stop_strings=["\\n"])``, and not stopped (``max_new_tokens`` 48, the shipped cap),
checks that both stops give the same first lines, and prints the ratios. Gemma-3-270M's
vocabulary has 262k tokens, which ``stop_strings`` scans to build its stop tables.
"""

from __future__ import annotations

import argparse
import time

import torch

from lira.data import demo_path
from lira.data.xquad_r import load_xquad_r
from lira.demo.references import resolve_model
from lira.models.generators import line_end_ids, load_causal_lm
from lira.prompts import first_line, translation_prompt


def main() -> None:
    """Time the three stops on one batch and print the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="demo:gemma3", help="a causal LM (a base model)")
    ap.add_argument("--n", type=int, default=16, help="questions in the batch")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    args = ap.parse_args()
    model, tok = load_causal_lm(resolve_model(args.model))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device).eval()
    ds = load_xquad_r(demo_path(), ["en", "de"])  # the shipped demo subset
    questions = [ds.question("de", q).text for q in ds.question_ids[: args.n]]
    prompts = [translation_prompt(q, "de", "fewshot-v1") for q in questions]
    enc = tok(prompts, return_tensors="pt", padding=True).to(device)
    base = {"max_new_tokens": args.max_new_tokens, "do_sample": False,
            "pad_token_id": tok.pad_token_id}  # fmt: skip
    ways = {
        "token ids": {"eos_token_id": line_end_ids(tok)},
        "stop_strings": {"stop_strings": ["\n"], "tokenizer": tok},
        "no stop": {},
    }
    with torch.no_grad():  # warm-up, untimed
        model.generate(**enc, **{**base, "max_new_tokens": 2})
    seconds, lines = {}, {}
    for name, kw in ways.items():
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**enc, **base, **kw)
        seconds[name] = time.perf_counter() - t0
        text = tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        lines[name] = [first_line(t) for t in text]
    same = sum(a == b for a, b in zip(lines["token ids"], lines["stop_strings"]))
    print(f"{args.model} on {device}, {args.n} German questions, greedy, batch {args.n}:")
    for name, s in seconds.items():
        print(f"  {name:<13} {s:7.2f} s  ({s / seconds['token ids']:.1f}x token ids)")
    print(f"  same first line, token ids vs stop_strings: {same}/{args.n}")


if __name__ == "__main__":
    main()

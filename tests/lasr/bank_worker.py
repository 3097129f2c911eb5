"""Worker for test_banks_ddp.py, run as ``accelerate launch ... bank_worker.py SPEC OUT``.

SPEC is a JSON file: {"models": ModelsConfig dict, "texts": [...], "langs": [...]}. Each rank
builds one query bank of the texts (with the frozen-g cache attached) while counting the texts
h encodes, and writes OUT/bank<rank>.pt: those texts, the bank's streams, the streams of the
same texts computed here alone (the reference), the translation counters, the cache's rows, and
the validation fusion fit of fixed random cosines and Arca's held-out evaluation, each shared
across the ranks and alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from accelerate.utils import set_seed

from lasr.banks import build_bank
from lasr.model import LiRAModel
from lasr.streams import Streams
from lira.accelerator import process_state
from lira.config import ModelsConfig, from_dict
from lira.encoding import length_batches
from lira.models import Backbone
from pipeline.runconfig import RunConfig


def fit_both_ways() -> tuple[list[tuple[object, ...]], list[int]]:
    """The validation fusion fit of fixed random cosines, shared across the processes and
    alone: (weights, score, by_lang) of each, and the grid points each scored."""
    from lasr import fixed_fusion

    g = torch.Generator().manual_seed(0)
    cos = torch.rand(3, 12, 20, generator=g)  # [blocks, Q, D]
    labels = (torch.rand(12, 20, generator=g) > 0.8).float()
    langs = ["de"] * 6 + ["es"] * 6
    fused, calls = fixed_fusion.fused_ndcg, []

    def counting(*args: object, **kwargs: object) -> torch.Tensor:
        calls[-1] += 1
        return fused(*args, **kwargs)

    fixed_fusion.fused_ndcg = counting
    fits = []
    for shared in (True, False):
        calls.append(0)
        combos = fixed_fusion.weight_grid((0.0, 0.5, 1.0), (True, True, True))  # 3 blocks
        scores = fixed_fusion.per_query_ndcg(cos, labels, combos, k=5, across_processes=shared)
        fit = fixed_fusion.select_fusion(scores, combos, [f"q{i}" for i in range(12)],
                                         langs, rule="in_sample")  # fmt: skip
        fits.append((fit.weights, fit.score, fit.by_lang, fit.parts))
    fixed_fusion.fused_ndcg = fused
    return fits, calls


def arca_both_ways(
    model: LiRAModel, sources: list[str], english: list[str]
) -> list[tuple[dict[str, object], list[str]]]:
    """Arca's held-out evaluation of ``sources`` (two English candidates each) shared across the
    processes and alone: (result, the sources this process ran through Arca) of each."""
    from arca.data import ArcaItem
    from arca.metrics import evaluate_items
    from lira.translation.types import Candidate

    items = [ArcaItem(src, "de", [Candidate("a", english[i % len(english)], (9, 9, 9)),
                                  Candidate("b", english[(i + 1) % len(english)], (3, 4, 3))])
             for i, src in enumerate(sources)]  # fmt: skip
    arca, seen = model.arca, []
    forward = type(arca).forward

    def counting(self: object, texts: list[str], *args: object, **kwargs: object) -> object:
        seen[-1].extend(texts)
        return forward(self, texts, *args, **kwargs)

    type(arca).forward = counting
    out = []
    for shared in (True, False):
        seen.append([])
        res = evaluate_items(arca, items, None, 2, "cpu", across_processes=shared)
        out.append((res, seen[-1]))
    type(arca).forward = forward
    return out


def main(spec_path: str, out: str) -> None:
    """Build the bank on every rank and save what it shows."""
    state = process_state()
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    cfg = RunConfig(output_dir=out, models=from_dict(ModelsConfig, spec["models"], "models"))
    set_seed(0)
    model = LiRAModel.from_config(cfg, None)
    model.arca.attach_g_cache(out)
    texts, langs = spec["texts"], spec["langs"]
    encoded: list[str] = []
    encode = Backbone.encode

    def counting(self: Backbone, batch: list[str], *args: object, **kwargs: object) -> object:
        encoded.extend(batch)
        return encode(self, batch, *args, **kwargs)

    Backbone.encode = counting  # type: ignore[method-assign]
    bank = build_bank(model, [f"k{i}" for i in range(len(texts))], texts, langs, "query", 3)
    Backbone.encode = encode  # type: ignore[method-assign]
    lookups = model.translation_lookups
    distinct, distinct_langs = (
        list(dict.fromkeys(texts)),
        [langs[texts.index(t)] for t in dict.fromkeys(texts)],
    )
    parts = [  # what one process computes: the same length-sorted batches
        model._compute_streams(
            [distinct[i] for i in idx], [distinct_langs[i] for i in idx], "query", None
        )
        for idx in length_batches(distinct, 3)
    ]
    order = torch.tensor([i for idx in length_batches(distinct, 3) for i in idx]).argsort()
    ref = Streams.cat(parts).select(order)
    ref = ref.select([distinct.index(t) for t in texts])
    cache = model.arca.g_cache
    fits, calls = fit_both_ways()
    held_out = arca_both_ways(model, texts[:9], texts[9:13])
    state.wait_for_everyone()
    torch.save(
        {
            "world": state.num_processes,
            "encoded": encoded,
            "bank": bank.streams.tensors(),
            "ref": ref.tensors(),
            "lookups": lookups,
            "cache_rows": cache.count(),
            "pending": len(getattr(cache, "pending", {})),
            "fits": fits,
            "fit_calls": calls,
            "arca_eval": held_out,
        },
        Path(out) / f"bank{state.process_index}.pt",
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

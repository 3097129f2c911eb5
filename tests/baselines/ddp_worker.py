"""Worker for test_ddp.py: ``accelerate launch ... tests/baselines/ddp_worker.py CONFIG OUT``.

Every rank mines the negatives (counting the miner's encode calls), then for each baseline
objective trains run A (uninterrupted, ``steps`` steps) and (CLEAR, LANCER) run B (stopped at the
step-2 checkpoint, then resumed in a fresh trainer to ``steps``), CLEAR once more with
activation checkpointing (run C), recording the rows it trained on
and a checksum of its weights after every step; ``merging`` runs its own loop once. Each rank
writes what it saw to OUT/rank<rank>.pt.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
import sys
import time
from pathlib import Path

import torch
from accelerate.utils import set_seed

from lira.baselines.composition import build_composition
from lira.baselines.contrastive import ContrastiveTrainer, mine_negatives
from lira.baselines.data import build_examples, training_splits
from lira.baselines.registry import get_method
from lira.data.types import ParallelData
from lira.models import Backbone, load_backbone
from pipeline.runconfig import load_config

OBJECTIVES = ("clear", "lancer", "jsd", "gist")
RESUMED = ("clear", "lancer")
"""Resumed too: the checkpoint code is the trainer's, the same for all; LANCER draws extras."""


def checksum(trainer: ContrastiveTrainer) -> float:
    """Sum of every trainable weight (float64): equal on every rank iff the weights are."""
    return float(sum(p.detach().double().sum() for p in trainer._trainable().values()))


def gist_data(cfg, examples, corpus) -> dict[str, object]:
    """The composition D(l en en) and frozen guide a ``gist`` trainer needs (as merging)."""
    ex = examples
    ids = [e.qid for e in ex]
    q = ParallelData(ids, {"de": [e.q_tgt for e in ex]})
    p = ParallelData(ids, {"en": [e.pos_text for e in ex]})
    negs = {"en": [[corpus[j].text for j in e.gist_hn] for e in ex]}
    guide = load_backbone(cfg.models).eval().requires_grad_(False)
    return {"composition": build_composition(q, p, "deenen", negs), "guide": guide}


def run(cfg, method, examples, corpus, extra, out: Path, steps: int | None, resume: bool):
    """Train one trainer; returns (trainer, rows per step, checksum per step)."""
    set_seed(cfg.baselines.seed)
    trainer = ContrastiveTrainer(
        cfg.baselines, load_backbone(cfg.models), method, examples if method != "gist" else [],
        corpus if method != "gist" else [], out, models_cfg=cfg.models, **extra,
    )  # fmt: skip
    rows: list[list[int]] = []
    sums: list[float] = []
    draw, after = trainer.draw, trainer.after_step

    def recording_draw(rng: random.Random, shard: bool = True) -> dict:
        batch = draw(rng, shard)
        rows.append(list(batch["rows"]))
        return batch

    def recording_after(row: object, total: int) -> None:
        sums.append(checksum(trainer))
        after(row, total)

    trainer.draw, trainer.after_step = recording_draw, recording_after  # type: ignore[method-assign]
    trainer.train(resume=resume, steps=steps)
    return trainer, rows, sums


def main(config: str, out: str) -> None:
    """Mine, train every objective twice (A; B = 2 steps + resume), write this rank's record."""
    cfg = load_config(config)
    root = Path(out)
    parallel, retrieval, dataset = training_splits(cfg)
    examples = build_examples(parallel, retrieval, dataset)
    corpus = list(retrieval.corpus)
    calls = [0]
    encode = Backbone.encode

    def counting(self, *a, **k):
        calls[0] += 1
        return encode(self, *a, **k)

    Backbone.encode = counting  # type: ignore[method-assign]
    mine_negatives(cfg, examples, corpus, {"clear", "composition"})
    Backbone.encode = encode  # type: ignore[method-assign]
    record: dict[str, object] = {
        "mine_calls": calls[0],
        "negatives": [(e.p_hn, e.q_hn, e.gist_hn) for e in examples],
    }
    rank, world = 0, 1
    for method in OBJECTIVES:
        print(f"{time.strftime('%X')} {method}", flush=True)
        if method == "gist":
            extra = gist_data(cfg, [e for e in examples if e.lang == "de"], corpus)
        else:
            extra = get_method(method).prepare(cfg, examples, corpus, dataset)
        a, rows_a, sums_a = run(cfg, method, examples, corpus, extra, root / "A" / method,
                                None, False)  # fmt: skip
        rank, world = a.accelerator.process_index, a.world
        one = random.Random(cfg.baselines.seed)  # the batches one process would draw
        single = [list(ContrastiveTrainer.draw(a, one, shard=False)["rows"]) for _ in rows_a]
        record[method] = {
            "rows": rows_a, "single": single, "sums": sums_a,
            "final": {n: p.detach().cpu().clone() for n, p in a._trainable().items()},
        }  # fmt: skip
        if method in RESUMED:
            run(cfg, method, examples, corpus, extra, root / "B" / method, 2, False)
            b, rows_b, sums_b = run(cfg, method, examples, corpus, extra, root / "B" / method,
                                    None, True)  # fmt: skip
            record[method].update({
                "resumed_from": len(rows_a) - len(rows_b), "resumed_sums": sums_b,
                "resumed_final": {n: p.detach().cpu().clone() for n, p in b._trainable().items()},
            })  # fmt: skip
        a.accelerator.wait_for_everyone()  # both ranks are done with this method's checkpoints
        if a.accelerator.is_main_process:  # ~0.5 GB a method, read: keep the suite's disk small
            for folder in ("A", "B"):
                for name in (method, f"{method}-checkpoints"):
                    shutil.rmtree(root / folder / name, ignore_errors=True)
    # CLEAR again with activation checkpointing (baselines.gradient_checkpointing): the
    # recomputed layers must give the plain run's weights on both ranks
    gc_cfg = dataclasses.replace(
        cfg, baselines=dataclasses.replace(cfg.baselines, gradient_checkpointing=True)
    )
    extra = get_method("clear").prepare(gc_cfg, examples, corpus, dataset)
    c, _, sums_c = run(gc_cfg, "clear", examples, corpus, extra, root / "C" / "clear", None, False)
    layers = c.backbone.model.modules()
    record["clear_checkpointed"] = {
        "sums": sums_c,
        "final": {n: p.detach().cpu().clone() for n, p in c._trainable().items()},
        "recomputes": any(bool(getattr(m, "gradient_checkpointing", False)) for m in layers),
    }
    merging = get_method("merging").train(cfg, examples, corpus, dataset, root / "merging")
    record["merging_steps"] = merging["steps"]
    record["world"] = world
    torch.save(record, root / f"rank{rank}.pt")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""The baselines' training rows, mined negatives and recipes.

:func:`training_splits` reads the parallel training data; :class:`TrainExample` joins a
training-language query with its English question and gold sentences (:func:`build_examples`);
:func:`mine_clear_negatives` and :func:`mine_composition_negatives` fill the hard negatives
CLEAR and paper 001 need (:data:`NEGATIVES`: the miner and the config fields of each kind);
:class:`Recipe` / :func:`recipe` is a method's optimisation recipe after the shared budget,
:func:`make_scheduler` its learning-rate schedule.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.optim.lr_scheduler import LRScheduler

from lira.baselines.clear import ClearConfig, sample_hard_negatives
from lira.baselines.composition import mine_filtered_negatives
from lira.baselines.config import BaselinesConfig, BaselinesRun
from lira.baselines.method import BaselineMethod, english_rows
from lira.baselines.registry import get_method
from lira.config import ConfigError
from lira.data.splits import load_splits
from lira.data.types import ParallelData, Record, RetrievalData
from lira.data.xquad_r import XQuADR

log = logging.getLogger(__name__)


@dataclass
class TrainExample:
    """One training row: a question in English and a training language, its gold sentences."""

    qid: str
    lang: str
    q_en: str
    q_tgt: str
    pos_id: str
    pos_text: str
    p_tgt: str = ""
    """The gold sentence in ``lang`` (paper 003's p_tgt)."""
    p_hn: list[int] = field(default_factory=list)
    """Corpus indices of CLEAR's hard-negative passages."""
    q_hn: list[int] = field(default_factory=list)
    """Example indices whose q_tgt are CLEAR's hard-negative target queries."""
    gist_hn: list[int] = field(default_factory=list)
    """Corpus indices of paper 001's mined English negatives."""


NO_PARALLEL = (
    "gives no parallel training questions; the baselines train on queries in English and in "
    "the training languages side by side: use data.format: xquad_r, or leave the baselines "
    "out (stages / --methods)"
)
"""Why a data format other than XQuAD-R cannot train the baselines (a ConfigError's message)."""


def training_splits(cfg: BaselinesRun) -> tuple[ParallelData, RetrievalData, XQuADR | None]:
    """(parallel training questions, retrieval training data, the dataset or None) of
    ``cfg.data``; a ConfigError, before any data is read, for data the baselines cannot use."""
    if cfg.data.format != "xquad_r":
        raise ConfigError("data.format", f"{cfg.data.format} {NO_PARALLEL}")
    if not [lang for lang in cfg.data.train_languages if lang != "en"]:
        raise ConfigError(
            "data.train_languages",
            f"{cfg.data.train_languages} has no language besides English; the baselines train "
            "on training-language queries with their English originals: add one (e.g. [en, de])",
        )
    splits = load_splits(cfg.data)
    if splits.train_parallel is None or splits.train is None:
        raise ConfigError("data.format", f"{cfg.data.format} {NO_PARALLEL}")
    return splits.train_parallel, splits.train, splits.dataset


def build_examples(
    parallel: ParallelData, retrieval: RetrievalData, dataset: XQuADR | None = None
) -> list[TrainExample]:
    """Join target queries (``<qid>@<lang>``) with their English question and gold sentences."""
    if "en" not in parallel.texts:
        raise ValueError(
            f"train_parallel must hold English questions; has {sorted(parallel.texts)}"
        )
    row = {qid: i for i, qid in enumerate(parallel.ids)}
    docs = {r.id: r.text for r in retrieval.corpus}
    out = []
    for q in retrieval.queries:
        if q.lang == "en":
            continue
        qid = q.id.rsplit("@", 1)[0]
        gold = [d for d, rel in retrieval.qrels.get(q.id, {}).items() if rel > 0 and d in docs]
        if qid not in row or not gold:
            continue
        pos = sorted(gold)[0]
        p_tgt = dataset.gold_sentence(q.lang, qid).text if dataset is not None else ""
        out.append(
            TrainExample(qid, q.lang, parallel.texts["en"][row[qid]], q.text, pos, docs[pos], p_tgt)
        )
    if len(out) < 2:
        raise ConfigError(
            "data.max_train_queries",
            f"only {len(out)} training example(s) could be joined from the training queries "
            "(a non-English query with its English original and a gold sentence); the "
            "baselines' contrastive losses need >= 2: raise data.max_train_queries, or add a "
            "language to data.train_languages",
        )
    return out


@torch.no_grad()
def mine_clear_negatives(
    backbone: nn.Module, examples: list[TrainExample], corpus: list[Record], cfg: BaselinesConfig,
    bs: int = 64,
) -> None:  # fmt: skip
    """Fill ``p_hn`` (passages) and ``q_hn`` (same-language target queries), CLEAR §4.1-4.2."""
    rc = cfg.recipe_of("clear", ClearConfig)
    k, ranks = rc.negatives, tuple(rc.negative_ranks)
    if k == 0:
        return
    gen = torch.Generator().manual_seed(cfg.seed)
    corpus_ids = [r.id for r in corpus]
    ids = {d: i for i, d in enumerate(dict.fromkeys(corpus_ids + [e.pos_id for e in examples]))}
    q = torch.as_tensor(backbone.encode([e.q_en for e in examples], kind="query", batch_size=bs))
    p = torch.as_tensor(backbone.encode([r.text for r in corpus], kind="document", batch_size=bs))
    pos = torch.tensor([ids[e.pos_id] for e in examples])
    pool_ids = torch.tensor([ids[d] for d in corpus_ids])
    rows = sample_hard_negatives(q, p, pos, pool_ids, k, ranks, gen, "CLEAR passage negatives")
    for e, row in zip(examples, rows.tolist()):
        e.p_hn = row
    p_gold = torch.as_tensor(
        backbone.encode([e.pos_text for e in examples], kind="document", batch_size=bs)
    )
    qt = torch.as_tensor(backbone.encode([e.q_tgt for e in examples], kind="query", batch_size=bs))
    for lang in sorted({e.lang for e in examples}):
        idx = [i for i, e in enumerate(examples) if e.lang == lang]
        sel = torch.tensor(idx)
        usable = int((pos[sel].view(1, -1) != pos[sel].view(-1, 1)).sum(1).min())
        k_q = min(k, usable)
        if k_q < k:
            log.info("CLEAR %s query negatives: %d per example (only %d usable)", lang, k_q, usable)
        rows = sample_hard_negatives(
            p_gold[sel],
            qt[sel],
            pos[sel],
            pos[sel],
            k_q,
            ranks,
            gen,
            f"CLEAR {lang} query negatives",
        )
        for i, r in zip(idx, rows.tolist()):
            examples[i].q_hn = [idx[j] for j in r]


@torch.no_grad()
def mine_composition_negatives(
    backbone: nn.Module, examples: list[TrainExample], corpus: list[Record], cfg: BaselinesConfig,
    bs: int = 64,
) -> None:  # fmt: skip
    """Fill ``gist_hn``: paper 001's English negatives, mined once per English question."""
    rc: Any = cfg.recipes["merging"]  # a MergingConfig (lira.baselines.merging imports us)
    k = rc.negatives
    rows = english_rows(examples)
    corpus_ids = [r.id for r in corpus]
    ids = {d: i for i, d in enumerate(dict.fromkeys(corpus_ids + [e.pos_id for e in examples]))}
    ex = [examples[i] for i in rows]
    q = torch.as_tensor(backbone.encode([e.q_en for e in ex], kind="query", batch_size=bs))
    p = torch.as_tensor(backbone.encode([r.text for r in corpus], kind="document", batch_size=bs))
    gold = torch.as_tensor(
        backbone.encode([e.pos_text for e in ex], kind="document", batch_size=bs)
    )
    mined = mine_filtered_negatives(
        q, p, gold, torch.tensor([ids[e.pos_id] for e in ex]),
        torch.tensor([ids[d] for d in corpus_ids]), k, tuple(rc.negative_ranks),
        rc.max_sim, rc.relative_margin,
    ).tolist()  # fmt: skip
    by_qid = {e.qid: m for e, m in zip(ex, mined)}
    for e in examples:
        e.gist_hn = list(by_qid[e.qid])


Miner = Callable[[nn.Module, list[TrainExample], list[Record], BaselinesConfig], None]
"""Fills a kind of negatives into the examples, with the initial backbone."""

NEGATIVES: dict[str, tuple[Miner, str, tuple[str, ...]]] = {
    "clear": (mine_clear_negatives, "clear", ("negatives", "negative_ranks")),
    "composition": (mine_composition_negatives, "merging",
                    ("negatives", "negative_ranks", "max_sim", "relative_margin")),
}  # fmt: skip
"""The negatives a method can ask for (``BaselineMethod.negatives``): their miner (run once
with the initial model for every method that needs them) and the ``baselines.<recipe>.*``
fields that shape them (part of the method's run fingerprint)."""


@dataclass(frozen=True)
class Recipe:
    """One method's optimisation recipe after the shared budget is applied."""

    lr: float
    batch_size: int
    steps: int
    scheduler: str
    warmup: float
    weight_decay: float
    beta2: float
    tau: float
    shared: tuple[str, ...] = ()
    """The fields the shared budget set (the others are the paper's)."""


def recipe(
    cfg: BaselinesConfig, method: str | BaselineMethod, n_rows: int, world: int = 1
) -> Recipe:
    """The paper's recipe of ``method`` for ``n_rows`` training rows, shared budget applied:
    ``baselines.<recipe>.*`` of the method's recipe section, or its own defaults without one.
    The batch size is the global batch (split over ``world`` processes); capped at the rows,
    rounded down to a multiple of ``world``."""
    spec = get_method(method, parts=True) if isinstance(method, str) else method
    key = spec.recipe_section()
    fields = ("lr", "batch_size", "epochs", "scheduler", "warmup", "weight_decay", "beta2", "tau")
    own = cfg.recipes[key] if key else None
    paper = {f: getattr(own, f) if own else spec.defaults[f] for f in fields}
    shared = tuple(f for f in ("steps", "batch_size", "lr") if getattr(cfg, f))
    batch = min(cfg.batch_size or paper["batch_size"], n_rows - n_rows % world)
    steps = cfg.steps or math.ceil(paper["epochs"] * n_rows / batch)
    return Recipe(cfg.lr or paper["lr"], batch, steps, paper["scheduler"], paper["warmup"],
                  paper["weight_decay"], paper["beta2"], paper["tau"], shared)  # fmt: skip


def make_scheduler(opt: torch.optim.Optimizer, r: Recipe) -> LRScheduler:
    """The recipe's learning-rate schedule (warm-up steps = ceil(ratio · steps))."""
    from transformers import get_scheduler

    warm = math.ceil(r.warmup * r.steps)
    name = "constant_with_warmup" if r.scheduler == "constant" else r.scheduler
    return get_scheduler(name, opt, num_warmup_steps=warm, num_training_steps=max(r.steps, 1))

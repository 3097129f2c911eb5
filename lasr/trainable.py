"""What LaSR trains and where it starts (LiRA paper §4.2, App. D.1).

:func:`fit_validation_fusion` sets the fusion head's block weights to the best fixed score
fusion on the validation split (``lasr.fusion_init: validation``); :func:`param_groups` sets
``requires_grad`` (the head always, Arca's Adaptor end to end with ``lasr.train_adaptor``, g
with ``lasr.train_encoder`` when it can train) and returns the optimizer's parameter groups;
:class:`TrainedModules` is what trains, as one module; :func:`training_task` what it trains on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from arca.model import ArcaModel
from lasr.banks import relevance_matrix, retrieval_banks
from lasr.config import TASK_DATA, LaSRConfig
from lasr.fixed_fusion import (
    FusionFit,
    block_cosines,
    fitted_table,
    per_query_ndcg,
    select_fusion,
    weight_grid,
)
from lasr.fusion import BLOCKS, LaSRNet
from lasr.model import LiRAModel
from lira.accelerator import live_world
from lira.config import ConfigError
from lira.data.types import PairData, RetrievalData
from lira.data.xquad_r import plain_qid
from lira.models import is_trainable

log = logging.getLogger(__name__)

ParamGroup = dict[str, list[nn.Parameter] | float]
"""One optimizer parameter group: ``params`` and its ``lr``."""


HOME = ("en-en", "lang-en", "dev")
"""Validation pools that are a query type's own scenario (English → English, L → English): they
weigh half of a query's score when the query also searches mixed-language pools."""


@dataclass
class PoolScores:
    """One query type's validation scores: nDCG@k per fusion λ (rows of ``combos``) and query."""

    keys: list[str]
    """Query ids (columns of ``scores``)."""
    langs: list[str]
    """Each query's language."""
    scores: Tensor
    """[C, Q] each query's score (:func:`_query_score` over the pools it is in)."""
    pools: dict[str, tuple[list[str], Tensor]] = field(default_factory=dict)
    """{pool name: (its query ids, nDCG@k [C, q])}."""


def validation_scores(
    model: LiRAModel,
    pools: dict[str, RetrievalData],
    combos: list[tuple[float, ...]],
    k: int,
    batch_size: int,
) -> dict[str, PoolScores]:
    """{``foreign`` / ``en``: :class:`PoolScores`} of every λ of ``combos`` on the validation
    ``pools`` ({``scenario[:lang]``: data}): every query is scored in each pool it appears in;
    its own scenario (:data:`HOME`) weighs half and the mixed-language pools (En→L, Multi,
    Multi-1) share the other half. A bar counts the pools scored, with an ETA."""
    cols: dict[str, dict[str, list[tuple[bool, Tensor]]]] = {"foreign": {}, "en": {}}
    per_pool: dict[str, dict[str, tuple[list[str], Tensor]]] = {"foreign": {}, "en": {}}
    langs: dict[str, str] = {}
    desc, main = f"lasr: {len(combos)} fixed fusions", live_world()[1] == 0
    for name, data in tqdm(pools.items(), desc=desc, unit="pool", disable=not main):
        qb, db = retrieval_banks(model, data, batch_size)
        cos = block_cosines(model.net, qb.streams.tensors(), db.streams.tensors())  # [5, Q, D]
        labels = relevance_matrix(qb.keys, db.keys, data.qrels)  # [Q, D]
        rows = [i for i in range(len(qb.keys)) if labels[i].any()]
        if not rows:
            continue
        scores = per_query_ndcg(cos[:, rows], labels[rows], combos, k, across_processes=True)
        home = name.split(":")[0] in HOME
        for kind in cols:
            mine = [j for j, i in enumerate(rows) if (qb.langs[i] == "en") == (kind == "en")]
            if mine:
                per_pool[kind][name] = ([qb.keys[rows[j]] for j in mine], scores[:, mine])
        for j, i in enumerate(rows):
            kind = "en" if qb.langs[i] == "en" else "foreign"
            cols[kind].setdefault(qb.keys[i], []).append((home, scores[:, j]))
            langs[qb.keys[i]] = qb.langs[i]
    out: dict[str, PoolScores] = {}
    for kind, by_key in cols.items():
        if by_key:
            keys = list(by_key)
            agg = torch.stack([_query_score(by_key[q]) for q in keys], 1)  # [C, Q]
            out[kind] = PoolScores(keys, [langs[q] for q in keys], agg, per_pool[kind])
    return out


FALLBACK: dict[str, tuple[str, ...]] = {"foreign": ("g", "hx"), "en": ()}
"""The plainest candidates of each query type's fit (:func:`lasr.fixed_fusion.select_fusion`):
for foreign queries the better of g alone and h alone on the untranslated text (the encoders a
user would use instead of LiRA, where the head has their blocks, ``lasr.raw_g`` /
``lasr.raw_h``; a block such as g on the translation alone would drop the source text), the best
single block for English ones."""


def fit_validation_fusion(
    model: LiRAModel, pools: dict[str, RetrievalData] | None, cfg: LaSRConfig
) -> dict[str, FusionFit]:
    """Set the head's block weights to the fixed score fusion chosen on the validation pools
    per query type (:mod:`lasr.fixed_fusion`, ``lasr.fusion_rule``; scored as
    :func:`validation_scores`, so the rule must keep documents of every language comparable
    in one index); without pools, keep the paper's. Returns the fits per query type
    (``foreign``, ``en``)."""
    fits: dict[str, FusionFit] = {}
    if not pools:
        log.warning(
            "lasr.fusion_init=validation but there is no validation split "
            "(data.dev_fraction = 0): the paper's block weights are used"
        )
        return fits
    head = model.net.head
    combos = weight_grid(cfg.fusion_grid, head.blocks_on)
    names = ", ".join(b for b, on in zip(BLOCKS, head.blocks_on) if on)
    log.info("lasr: scoring %d fixed fusions of (%s) on %d validation pools", len(combos), names,
             len(pools))  # fmt: skip
    weights: dict[str, tuple[float, ...] | None] = {"foreign": None, "en": None}
    for kind, v in validation_scores(
        model, pools, combos, cfg.ndcg_k, cfg.encode_batch_size
    ).items():
        fit = select_fusion(v.scores, combos, [plain_qid(q) for q in v.keys], v.langs,
                            cfg.fusion_folds, cfg.fusion_rule, cfg.seed, FALLBACK[kind])  # fmt: skip
        fits[kind] = fit
        weights[kind] = fit.weights
        log.info("lasr: fixed fusion on validation (%s rule), %s queries: λ(%s) = %s, "
                 "score %.4f in sample, %.4f out of fold (single block %s: %.4f out of fold; "
                 "gain %.4f [%.4f, %.4f]); in sample the grid's best %s scores %.4f",
                 fit.rule, kind, names, _on(fit.weights, head.blocks_on), fit.score, fit.oof,
                 fit.single, fit.oof_single, *fit.gain, _on(fit.fitted, head.blocks_on),
                 fit.fitted_score)  # fmt: skip
    head.set_weights(fitted_table(weights["foreign"], weights["en"]))
    return fits


def _on(weights: tuple[float, ...], on: tuple[bool, ...]) -> tuple[float, ...]:
    """The weights of the blocks that are on (what the log names)."""
    return tuple(w for w, b in zip(weights, on) if b)


def _query_score(parts: list[tuple[bool, Tensor]]) -> Tensor:
    """One query's score per combination [C]: the mean of its home pools, averaged half and
    half with the mean of its other pools when it has both."""
    home = [t for is_home, t in parts if is_home]
    other = [t for is_home, t in parts if not is_home]
    means = [torch.stack(x).mean(0) for x in (home, other) if x]
    return torch.stack(means).mean(0)


def param_groups(
    model: LiRAModel, cfg: LaSRConfig, task: str = "retrieval"
) -> tuple[list[ParamGroup], bool]:
    """The optimizer groups (head at ``lr``, its gate at ``gate_lr``, Adaptor and g at
    ``adaptor_lr``) with ``requires_grad`` set, and whether g trains (its cached embeddings
    are then dropped).

    Only what the config uses trains (``task``: LaSR's resolved task): the head's
    :meth:`~lasr.fusion.FusionHead.idle_parameters` stay frozen, ``logit_scale`` trains with
    ``learn_temperature`` when the ranking loss is used, the Adaptor and g only when the
    multilingual stream is on. Under DDP every trainable parameter must get a gradient at
    every step, so an unused one would stop the run."""
    net, head = model.net, model.net.head
    idle = head.idle_parameters()
    if cfg.learn_temperature and task in ("retrieval", "both"):
        idle.discard("logit_scale")
    used = {n: p for n, p in head.named_parameters() if n not in idle}
    for n, p in head.named_parameters():
        p.requires_grad_(n in used)
    gate_names = {"type_logw", "logit_scale", "raw_gate.weight", "raw_gate.bias"}
    gate_names |= {f"gate_mlp.{n}" for n, _ in head.gate_mlp.named_parameters()}
    gate = [p for n, p in used.items() if n in gate_names]
    rest = [p for n, p in used.items() if n not in gate_names]
    groups: list[ParamGroup] = [{"params": rest, "lr": cfg.lr}, {"params": gate, "lr": cfg.gate_lr}]
    groups = [g for g in groups if g["params"]]
    arca_params = []
    multilingual = head.use_lr  # E_lr (and g's own block) read the Adaptor and g
    if cfg.train_adaptor and multilingual:
        arca_params += list(net.adaptor.parameters())
    train_g = cfg.train_encoder and multilingual and bool(is_trainable(model.arca.encoder))
    if cfg.train_encoder and not train_g:
        why = (
            "the multilingual stream is off" if not multilingual else "it has no trainable weights"
        )
        log.warning(
            "lasr.train_encoder ignored: g (%s) does not train: %s", model.models_cfg.encoder, why
        )
    if train_g:
        arca_params += list(model.arca.encoder.parameters())
        model.arca.g_cache = None  # g changes: its cached embeddings no longer hold
    for p in arca_params:
        p.requires_grad_(True)
    if arca_params:
        groups.append({"params": arca_params, "lr": cfg.adaptor_lr})
    return groups, train_g


class TrainedModules(nn.Module):
    """What LaSR trains, as one module for the accelerator to wrap (DDP under a launcher): the
    net and, with ``lasr.train_encoder``, Arca's g, whose bins are then recomputed with
    gradient, so that g's gradients are all-reduced with the net's.

    A step runs it more than once (queries, documents, pairs) before one backward; DDP allows
    that without ``find_unused_parameters`` as every trainable parameter is used at every step
    (:func:`lasr.trainable.param_groups` freezes the rest): autograd sums a parameter's
    gradients from all uses before its one reduction hook fires.
    """

    def __init__(self, net: LaSRNet, arca: ArcaModel | None = None) -> None:
        super().__init__()
        self.net = net
        self.encoder = arca.encoder if arca is not None else None
        self.pooled_sources = arca.pooled_sources if arca is not None else None

    def forward(
        self,
        e_en: Tensor,
        g_bins: Tensor,
        feats: Tensor,
        e_raw: Tensor,
        g_tr: Tensor,
        texts: list[str] | None = None,
        kind: str = "query",
    ) -> Tensor:
        """ẑ [B, d] of streams [B, d_en], [B, S, d_g], [B, 9], [B, d_en], [B, d_g]; with
        ``texts`` (g trains) the bins are g's of ``texts`` (``kind``) instead of ``g_bins``."""
        if texts is not None and self.pooled_sources is not None:
            g_bins = self.pooled_sources(texts, kind)
        return self.net(e_en, g_bins, feats, e_raw, g_tr)


def training_task(cfg: LaSRConfig, retrieval: RetrievalData | None, pairs: PairData | None) -> str:
    """``lasr.task`` with ``auto`` resolved by the data given (retrieval, rank or both); a
    ConfigError naming ``lasr.task`` when the data the task needs is missing."""
    task = cfg.task
    if task == "auto":
        task = (
            "both"
            if retrieval is not None and pairs is not None
            else ("retrieval" if retrieval is not None else "rank")
        )
    if task in ("retrieval", "both") and retrieval is None:
        raise ConfigError("lasr.task", f"{cfg.task} {TASK_DATA['retrieval']}")
    if task in ("rank", "both") and pairs is None:
        raise ConfigError("lasr.task", f"{cfg.task} {TASK_DATA['rank']}")
    return task

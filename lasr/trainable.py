"""What LaSR trains and where it starts (LiRA paper §4.2, App. D.1).

:func:`fit_validation_fusion` sets the fusion head's block weights to the best fixed score
fusion on the validation split (``lasr.fusion_init: validation``); :func:`param_groups` sets
``requires_grad`` (the head always, Arca's Adaptor end to end with ``lasr.train_adaptor``, g
with ``lasr.train_encoder`` when it can train) and returns the optimizer's parameter groups;
:class:`TrainedModules` is what trains, as one module; :func:`training_task` what it trains on.
"""

from __future__ import annotations

import logging

from torch import Tensor, nn

from arca.model import ArcaModel
from lasr.banks import relevance_matrix, retrieval_banks
from lasr.config import TASK_DATA, LaSRConfig
from lasr.fixed_fusion import FusionFit, block_cosines, fit_fusion, fitted_table
from lasr.fusion import LaSRNet
from lasr.model import LiRAModel
from lira.config import ConfigError
from lira.data.types import PairData, RetrievalData
from lira.models import is_trainable

log = logging.getLogger(__name__)

ParamGroup = dict[str, list[nn.Parameter] | float]
"""One optimizer parameter group: ``params`` and its ``lr``."""


def fit_validation_fusion(
    model: LiRAModel, dev: RetrievalData | None, cfg: LaSRConfig
) -> dict[str, FusionFit]:
    """Set the head's block weights to the best fixed score fusion on the validation split
    ``dev`` per query type (:mod:`lasr.fixed_fusion`); without one, keep the paper's. Returns
    the fits per query type (``foreign``, ``en``)."""
    fits: dict[str, FusionFit] = {}
    if dev is None:
        log.warning(
            "lasr.fusion_init=validation but there is no validation split "
            "(data.dev_fraction = 0): the paper's block weights are used"
        )
        return fits
    qb, db = retrieval_banks(model, dev, cfg.encode_batch_size)
    en_docs = [j for j, lang in enumerate(db.langs) if lang == "en"]
    cos = block_cosines(model.net, qb.streams.tensors(), db.streams.select(en_docs).tensors())
    labels = relevance_matrix(qb.keys, [db.keys[j] for j in en_docs], dev.qrels)  # [Q, D_en]
    head = model.net.head
    allowed = (head.use_en, head.use_lr, head.d_g > 0)
    weights: dict[str, tuple[float, ...] | None] = {"foreign": None, "en": None}
    for kind in weights:
        groups: dict[str, list[int]] = {}
        for i, lang in enumerate(qb.langs):
            if (lang == "en") == (kind == "en") and labels[i].any():
                groups.setdefault(lang, []).append(i)
        if not groups:
            continue
        fit = fit_fusion(
            cos, labels, groups, cfg.fusion_grid, cfg.ndcg_k, allowed, across_processes=True
        )
        fits[kind] = fit
        weights[kind] = fit.weights
        log.info("lasr: fixed fusion on validation, %s queries: λ(en, lr, g) = %s, nDCG@%d "
                 "%.4f %s (blocks alone: %s)", kind, fit.weights, cfg.ndcg_k, fit.score,
                 {k: round(v, 4) for k, v in fit.by_lang.items()},
                 {k: round(v, 4) for k, v in fit.parts.items()})  # fmt: skip
    head.set_weights(fitted_table(weights["foreign"], weights["en"]))
    return fits


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
        texts: list[str] | None = None,
        kind: str = "query",
    ) -> Tensor:
        """ẑ [B, d] of streams [B, d_en], [B, S, d_g], [B, 9], [B, d_en]; with ``texts`` (g
        trains) the bins are g's of ``texts`` (``kind``) instead of ``g_bins``."""
        if texts is not None and self.pooled_sources is not None:
            g_bins = self.pooled_sources(texts, kind)
        return self.net(e_en, g_bins, feats, e_raw)


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

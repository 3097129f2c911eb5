"""What LaSR trains and where it starts (LiRA paper §4.2, App. D.1).

:func:`fit_validation_fusion` sets the fusion head's block weights to the best fixed score
fusion on the validation split (``lasr.fusion_init: validation``); :func:`param_groups` sets
``requires_grad`` (the head always, Arca's Adaptor end to end with ``lasr.train_adaptor``, g
with ``lasr.train_encoder`` when it can train) and returns the optimizer's parameter groups.
"""

from __future__ import annotations

import logging

from torch import nn

from lasr.banks import relevance_matrix, retrieval_banks
from lasr.config import LaSRConfig
from lasr.fixed_fusion import FusionFit, block_cosines, fit_fusion, fitted_table
from lasr.model import LiRAModel
from lira.data.types import RetrievalData
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
        log.warning("lasr.fusion_init=validation but there is no validation split "
                    "(data.dev_fraction = 0): the paper's block weights are used")  # fmt: skip
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
        fit = fit_fusion(cos, labels, groups, cfg.fusion_grid, cfg.ndcg_k, allowed,
                         across_processes=True)  # fmt: skip
        fits[kind] = fit
        weights[kind] = fit.weights
        log.info("lasr: fixed fusion on validation, %s queries: λ(en, lr, g) = %s, nDCG@%d "
                 "%.4f %s (blocks alone: %s)", kind, fit.weights, cfg.ndcg_k, fit.score,
                 {k: round(v, 4) for k, v in fit.by_lang.items()},
                 {k: round(v, 4) for k, v in fit.parts.items()})  # fmt: skip
    head.set_weights(fitted_table(weights["foreign"], weights["en"]))
    return fits


def param_groups(model: LiRAModel, cfg: LaSRConfig) -> tuple[list[ParamGroup], bool]:
    """The optimizer groups (head at ``lr``, its gate at ``gate_lr``, Adaptor and g at
    ``adaptor_lr``) with ``requires_grad`` set, and whether g trains (its cached embeddings
    are then dropped)."""
    net, head = model.net, model.net.head
    gate = [
        head.type_logw,
        head.logit_scale,
        *head.gate_mlp.parameters(),
        *head.raw_gate.parameters(),
    ]
    gate_ids = {id(p) for p in gate}
    rest = [p for p in head.parameters() if id(p) not in gate_ids]
    groups: list[ParamGroup] = [{"params": rest, "lr": cfg.lr}, {"params": gate, "lr": cfg.gate_lr}]
    arca_params = []
    if cfg.train_adaptor:
        arca_params += list(net.adaptor.parameters())
    train_g = cfg.train_encoder and bool(is_trainable(model.arca.encoder))
    if cfg.train_encoder and not train_g:
        log.warning("lasr.train_encoder ignored: g (%s) has no trainable weights",
                    model.models_cfg.encoder)  # fmt: skip
    if train_g:
        arca_params += list(model.arca.encoder.parameters())
        model.arca.g_cache = None  # g changes: its cached embeddings no longer hold
    for p in arca_params:
        p.requires_grad_(True)
    if arca_params:
        groups.append({"params": arca_params, "lr": cfg.adaptor_lr})
    return groups, train_g

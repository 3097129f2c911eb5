"""InfoNCE / multiple-negatives ranking loss: the common contrastive baseline.

Oord et al. (2018), "Representation Learning with Contrastive Predictive Coding", Eq. 4;
Henderson et al. (2017) multiple-negatives ranking. Each anchor a_i is scored against every
positive of the batch (in-batch negatives) and every hard negative of the batch:

    L = -1/B sum_i log( exp(s(a_i, p_i)/tau) / sum_{c in C} exp(s(a_i, c)/tau) ),
    C = {p_1..p_B} ∪ {n_11..n_BK},  s = cosine similarity.

False negatives: when ``positive_ids`` are given, a candidate that carries the same id as the
anchor's own positive (a duplicate positive in the batch, or a hard negative that is in fact the
gold document) is removed from the denominator (its logit is set to -inf), except the anchor's
own positive column.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lira.baselines.method import (
    BaselineMethod,
    Batch,
    HookTrainer,
    batch_examples,
    passages_with_negatives,
)


def positive_tau(tau: float) -> float:
    """``tau`` (a softmax temperature), checked to be > 0."""
    if tau <= 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    return tau


def candidate_logits(
    anchor: Tensor,
    positive: Tensor,
    negatives: Tensor | None = None,
    tau: float = 0.05,
    positive_ids: Tensor | None = None,
    negative_ids: Tensor | None = None,
) -> Tensor:
    """Logits [B, B(1+K)] of each anchor against all positives then all hard negatives.

    anchor [B, d], positive [B, d], negatives [B, K, d] (K may be 0); ids are integer tensors
    [B] and [B, K]; candidates sharing the anchor's positive id are masked to -inf.
    """
    if anchor.shape != positive.shape:
        raise ValueError(
            f"anchor {tuple(anchor.shape)} and positive {tuple(positive.shape)} must both be [B, d]"
        )
    a = F.normalize(anchor.float(), dim=-1)  # [B, d]
    cands = [F.normalize(positive.float(), dim=-1)]  # [B, d]
    cand_ids = [positive_ids] if positive_ids is not None else []
    if negatives is not None and negatives.numel() > 0:
        if negatives.dim() != 3 or negatives.shape[0] != anchor.shape[0]:
            raise ValueError(f"negatives must be [B, K, d], got {tuple(negatives.shape)}")
        cands.append(F.normalize(negatives.float(), dim=-1).reshape(-1, anchor.shape[-1]))
        if positive_ids is not None:
            if negative_ids is None:
                raise ValueError("positive_ids given without negative_ids; pass both or neither")
            cand_ids.append(negative_ids.reshape(-1))
    c = torch.cat(cands, dim=0)  # [B(1+K), d]
    logits = a @ c.T / tau  # [B, B(1+K)]
    if positive_ids is not None:
        all_ids = torch.cat(cand_ids)  # [B(1+K)]
        dup = positive_ids.view(-1, 1) == all_ids.view(1, -1)  # [B, B(1+K)]
        own = torch.zeros_like(dup)
        own[torch.arange(a.shape[0]), torch.arange(a.shape[0])] = True
        logits = logits.masked_fill(dup & ~own, float("-inf"))
    return logits


def info_nce(
    anchor: Tensor,
    positive: Tensor,
    negatives: Tensor | None = None,
    tau: float = 0.05,
    positive_ids: Tensor | None = None,
    negative_ids: Tensor | None = None,
) -> Tensor:
    """InfoNCE (Oord et al. 2018, Eq. 4) with in-batch and hard negatives; mean over the batch."""
    logits = candidate_logits(anchor, positive, negatives, tau, positive_ids, negative_ids)
    labels = torch.arange(anchor.shape[0], device=anchor.device)
    return F.cross_entropy(logits, labels)


class InfoNCELoss(nn.Module):
    """Multiple-negatives ranking loss (InfoNCE) over precomputed embeddings.

    Args:
        tau: softmax temperature on cosine similarities.

    Inputs: ``loss(anchor [B,d], positive [B,d], negatives [B,K,d] | None, positive_ids [B],
    negative_ids [B,K])``. Example::

        loss = InfoNCELoss(tau=0.05)(q, p, hn, pos_ids, neg_ids)
    """

    def __init__(self, tau: float = 0.05) -> None:
        super().__init__()
        self.tau = positive_tau(tau)

    def forward(
        self,
        anchor: Tensor,
        positive: Tensor,
        negatives: Tensor | None = None,
        positive_ids: Tensor | None = None,
        negative_ids: Tensor | None = None,
    ) -> Tensor:
        """The mean InfoNCE loss of the batch."""
        return info_nce(anchor, positive, negatives, self.tau, positive_ids, negative_ids)


class InfoNCEMethod(BaselineMethod):
    """``infonce`` (CLEAR's baseline, paper 000 §4.2): target query -> English gold sentence,
    in-batch + the same mined hard negatives as CLEAR, CLEAR's recipe."""

    name = "infonce"
    recipe = "clear"
    negatives = ("clear",)

    def loss(self, trainer: HookTrainer, batch: Batch) -> Tensor:
        ex, ids = batch_examples(trainer, batch)
        p_pos, p_hn, p_hn_ids = passages_with_negatives(trainer, ex)
        q_l = trainer.encode([e.q_tgt for e in ex], "query")
        return info_nce(q_l, p_pos, p_hn, trainer.recipe.tau, ids, p_hn_ids)


METHOD = InfoNCEMethod()

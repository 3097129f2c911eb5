"""CLEAR: Cross-Lingual Enhancement in Retrieval via Reverse-training (paper 000).

    L_CLEAR = λ1·L_NCE_en + λ2·L_CL + λ3·KL(S_en ‖ S_CL)                         (Eq. 2)

- L_NCE_en (Eq. 1): English InfoNCE, anchor q_en, positive p_en^+, negatives = all batch
  positives + the hard-negative passages p_en^-.
- L_CL (Eq. 3-4, *reverse*): anchor = the English passage p_en, positive = its target-language
  query q_l^+, negatives = all batch target queries + the hard-negative target queries q_l^-.
  ``reverse=False`` (ablation "w/o Reverse") uses the conventional direction: anchor q_l,
  positive p_en^+, negatives = batch passages + p_en^-.
- KL (Eq. 5): S_en[i, j] = sim(q_en_i, p_en_j) and S_CL[i, j] = sim(p_en_j, q_l_i), as the
  paper indexes them: row i is a query (English / target), column j a batch passage. Each row
  is made a distribution by a softmax over the passages j with τ (the paper names no
  normalisation; docs/design.md "Baselines" records the row-wise softmax); KL summed over j,
  averaged over the B rows (the printed Σ_{i,j} would scale λ3 with the batch size). Both sides
  receive gradients (the paper does not detach either).

Hard negatives (§4.1, following NV-Retriever): 5 per training sample, sampled uniformly from
ranks 30-100 of the initial model's retrieval (:func:`sample_hard_negatives`): passages for
the English query, and target-language queries for the gold passage (the "query negative
mining" of §4.2, with the same window). With a small corpus the window is clamped to the
ranked items (logged).

The printed Eq. 1 and 3 drop the logarithm; we implement −log (cross-entropy), as docs/design.md
"Baselines" records. With all embeddings identical every logit is equal, so
L = λ1·log(B(1+K)) + λ2·log(B(1+M)) + λ3·0.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lira.baselines.infonce import info_nce, positive_tau
from lira.baselines.method import (
    BaselineMethod,
    Batch,
    HookTrainer,
    batch_examples,
    passages_with_negatives,
)
from lira.baselines.recipes import ClearConfig
from lira.config import ConfigError

log = logging.getLogger(__name__)


def similarity_distribution(anchor: Tensor, cands: Tensor, tau: float) -> Tensor:
    """Row-wise log-softmax of cosine similarities / tau: [B, d], [B, d] -> [B, B] (log-probs)."""
    a = F.normalize(anchor.float(), dim=-1)
    c = F.normalize(cands.float(), dim=-1)
    return F.log_softmax(a @ c.T / tau, dim=-1)


def clear_kl(p_pos: Tensor, q_en: Tensor, q_l: Tensor, tau: float) -> Tensor:
    """KL(S_en ‖ S_CL) of CLEAR Eq. 5: rows = queries, columns = passages, averaged over rows."""
    log_s_en = similarity_distribution(q_en, p_pos, tau)  # [B, B]: S_en[i, j] = sim(q_en_i, p_j)
    log_s_cl = similarity_distribution(q_l, p_pos, tau)  # [B, B]: S_CL[i, j] = sim(p_j, q_l_i)
    return F.kl_div(log_s_cl, log_s_en, reduction="batchmean", log_target=True)


def too_few_negatives(k: int, what: str, usable: int) -> str:
    """The message of asking for ``k`` mined negatives where an anchor can rank only ``usable``."""
    return (
        f"asked for {k} {what} per example but the training data leaves some example only "
        f"{usable} to rank; lower it, or train on more data (data.max_train_queries)"
    )


def rank_window(first: int, last: int, usable: int, k: int) -> tuple[int, int]:
    """The 1-based rank window [first, last] clamped to ``usable`` ranked items, >= k wide."""
    last_c = min(last, usable)
    return max(1, min(first, last_c - k + 1)), last_c


def sample_hard_negatives(
    anchors: Tensor,
    pool: Tensor,
    anchor_ids: Tensor,
    pool_ids: Tensor,
    k: int,
    ranks: tuple[int, int] = (30, 100),
    generator: torch.Generator | None = None,
    what: str = "hard negatives",
    key: str = "baselines.clear.negatives",
) -> Tensor:
    """Indices [N, k]: k pool items per anchor, uniformly from its ranks [first, last] (§4.1).

    anchors [N, d], pool [M, d]; ``anchor_ids`` [N] and ``pool_ids`` [M] name the gold item
    (a pool item with the anchor's id is its positive or a duplicate and is never ranked).
    The window is clamped to the items every anchor can rank (logged when it is); more than
    that many negatives is a ConfigError naming ``key`` (the config field that gave ``k``).
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    n = anchors.shape[0]
    same = anchor_ids.view(-1, 1) == pool_ids.view(1, -1)  # [N, M]
    usable = int((~same).sum(1).min()) if n else 0
    if k > usable:
        raise ConfigError(key, too_few_negatives(k, what, usable))
    if k == 0 or n == 0:
        return torch.zeros(n, 0, dtype=torch.long)
    first, last = rank_window(ranks[0], ranks[1], usable, k)
    if (first, last) != tuple(ranks):
        log.info(
            "%s: rank window %d-%d clamped to %d-%d (%d rankable items per anchor)",
            what, ranks[0], ranks[1], first, last, usable,
        )  # fmt: skip
    sim = F.normalize(anchors.float(), dim=-1) @ F.normalize(pool.float(), dim=-1).T  # [N, M]
    order = sim.masked_fill(same, float("-inf")).argsort(dim=1, descending=True)
    window = order[:, first - 1 : last].cpu()  # [N, W]
    pick = torch.rand(window.shape, generator=generator).argsort(dim=1)[:, :k]  # [N, k]
    return window.gather(1, pick)


class ClearLoss(nn.Module):
    """CLEAR loss (paper 000, Eq. 1-5) on precomputed embeddings.

    Args:
        tau: temperature of every softmax (InfoNCE terms and the KL distributions).
        lambdas: (λ1, λ2, λ3) for the English term, the cross-lingual term and the KL (Eq. 2).
        reverse: English passage as anchor in L_CL (paper); False = "w/o Reverse" ablation.
        use_kl / use_english: False drops that term ("w/o L_KL", "w/o L_NCE_en" ablations).

    Inputs: ``loss(q_en [B,d], p_pos [B,d], p_hn [B,K,d], q_l [B,d], q_l_hn [B,M,d])`` (K or M
    may be 0), optional ``ids`` [B] (gold passage id of each row: duplicate rows are masked
    as false negatives) with ``p_hn_ids`` [B,K] and ``q_l_hn_ids`` [B,M]. Example::

        loss = ClearLoss(tau=0.05)(q_en, p, p_hn, q_de, q_de_hn)
    """

    def __init__(
        self,
        tau: float = 0.05,
        lambdas: tuple[float, float, float] = (0.4, 0.4, 0.2),
        reverse: bool = True,
        use_kl: bool = True,
        use_english: bool = True,
    ) -> None:
        super().__init__()
        if len(lambdas) != 3:
            raise ValueError(f"lambdas needs three weights (λ1, λ2, λ3), got {lambdas}")
        self.tau = positive_tau(tau)
        self.lambdas = tuple(float(x) for x in lambdas)
        self.reverse = reverse
        self.use_kl = use_kl
        self.use_english = use_english

    def terms(
        self,
        q_en: Tensor,
        p_pos: Tensor,
        p_hn: Tensor,
        q_l: Tensor,
        q_l_hn: Tensor,
        ids: Tensor | None = None,
        p_hn_ids: Tensor | None = None,
        q_l_hn_ids: Tensor | None = None,
    ) -> dict[str, Tensor]:
        """The unweighted terms {'nce_en', 'cl', 'kl'} (a dropped term is 0)."""
        zero = q_en.new_zeros(())
        out = {"nce_en": zero, "cl": zero, "kl": zero}
        if self.use_english:
            out["nce_en"] = info_nce(q_en, p_pos, p_hn, self.tau, ids, p_hn_ids)
        if self.reverse:
            out["cl"] = info_nce(p_pos, q_l, q_l_hn, self.tau, ids, q_l_hn_ids)
        else:
            out["cl"] = info_nce(q_l, p_pos, p_hn, self.tau, ids, p_hn_ids)
        if self.use_kl:
            out["kl"] = clear_kl(p_pos, q_en, q_l, self.tau)
        return out

    def forward(self, *inputs: Tensor | None) -> Tensor:
        """λ1·L_NCE_en + λ2·L_CL + λ3·KL (Eq. 2) of :meth:`terms`' inputs, a scalar."""
        t = self.terms(*inputs)  # type: ignore[arg-type]
        l1, l2, l3 = self.lambdas
        return l1 * t["nce_en"] + l2 * t["cl"] + l3 * t["kl"]


class ClearMethod(BaselineMethod):
    """``clear``: :class:`ClearLoss` on (q_en, p_en, p_en^-, q_l, q_l^-), with 5 hard negatives
    sampled from ranks 30-100 of the initial model's retrieval, for passages (anchor q_en) and
    for same-language target queries (anchor: the gold passage)."""

    name = "clear"
    config_class = ClearConfig
    negatives = ("clear",)

    def setup(self, trainer: HookTrainer) -> ClearLoss:
        rc = trainer.cfg.recipe_of("clear", ClearConfig)
        return ClearLoss(trainer.recipe.tau, tuple(rc.lambdas), reverse=rc.reverse)

    def loss(self, trainer: HookTrainer, batch: Batch) -> Tensor:
        ex, ids = batch_examples(trainer, batch)
        b, dev = len(ex), trainer.accelerator.device
        m = min(len(e.q_hn) for e in ex)
        p_pos, p_hn, p_hn_ids = passages_with_negatives(trainer, ex)
        q_hn_ex = [[trainer.examples[j] for j in e.q_hn[:m]] for e in ex]
        queries = (
            [e.q_en for e in ex] + [e.q_tgt for e in ex] + [x.q_tgt for r in q_hn_ex for x in r]
        )
        q_all = trainer.encode(queries, "query")
        q_en, q_l, q_hn = q_all[:b], q_all[b : 2 * b], q_all[2 * b :].view(b, m, q_all.shape[-1])
        q_hn_ids = torch.tensor(
            [[trainer.doc_index[x.pos_id] for x in r] for r in q_hn_ex], device=dev
        ).view(b, m)
        return trainer.objective(q_en, p_pos, p_hn, q_l, q_hn, ids, p_hn_ids, q_hn_ids)


METHOD = ClearMethod()

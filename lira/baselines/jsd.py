"""English-inclination baseline: JSD alignment + reversed InfoNCE (paper 003, §4).

    L = E[L_JSD + L_NCE]                                                       (Eq. 2)
    P(z)_i = softmax(z)_i over the embedding dimensions                          (Eq. 5)
    JSD(P‖Q) = ½ KL(P‖M) + ½ KL(Q‖M),  M = ½(P + Q)                             (Eq. 4)
    L_JSD = sqrt(JSD(P(z_d_en) ‖ P(z_d_tgt)) + ε)                               (Eq. 6)
    L_NCE = −1/n Σ_i log softmax over {q_en_j} of s(p_tgt_i, q_en_i^+)          (Eq. 7)

L_NCE is *reversed*: the target-language passage p_tgt is the anchor, its English query q_en
the positive and the batch's other English queries the in-batch negatives, with cosine
similarity / τ. Eq. 7 prints no temperature; τ = 0.05 (sentence-transformers'
MultipleNegativesRankingLoss default, scale 20) is the configured default. Natural logarithms
throughout (scipy's ``jensenshannon`` uses base e too, and returns sqrt(JSD)). Ablations
(Table 3): ``use_jsd=False`` ("w/o L_JSD"), ``use_nce=False`` ("w/o L_NCE"), ``psq=True``
(L_NCE_psq: the English passage p_en replaces q_en as p_tgt's positive, in-batch p_en as
negatives; Table 3 reports it as a row of its own, i.e. with ``use_jsd=False``).

Data (§4, Eq. 2): triples (q_en, p_en, p_tgt). On XQuAD-R they are the English question, its
English gold sentence and its gold sentence in the training language, found in that
language's own file (``XQuADR.gold_sentence``). L_JSD is taken on the passage pair
(z_d_en, z_d_tgt) = (p_en, p_tgt), Eq. 6. z is the model's sentence embedding as it scores
(unit norm for our backbones).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lira.baselines.infonce import info_nce, positive_tau
from lira.baselines.method import BaselineMethod, Batch, HookTrainer, batch_examples
from lira.baselines.recipes import JSDConfig


def jsd_distance(z_a: Tensor, z_b: Tensor, eps: float = 1e-8) -> Tensor:
    """sqrt(JSD(softmax(z_a) ‖ softmax(z_b)) + eps) per row (Eq. 4-6): [..., d] -> [...]."""
    za, zb = z_a.float(), z_b.float()
    log_p = torch.log_softmax(za, dim=-1)
    log_q = torch.log_softmax(zb, dim=-1)
    log_m = torch.logsumexp(torch.stack([log_p, log_q]), dim=0) - torch.log(torch.tensor(2.0))
    kl_pm = (log_p.exp() * (log_p - log_m)).sum(-1)
    kl_qm = (log_q.exp() * (log_q - log_m)).sum(-1)
    jsd = (0.5 * kl_pm + 0.5 * kl_qm).clamp_min(0.0)
    return torch.sqrt(jsd + eps)


class JSDInfoNCELoss(nn.Module):
    """JSD alignment + reversed InfoNCE (paper 003, Eq. 2, 6, 7) on precomputed embeddings.

    Args:
        tau: InfoNCE temperature on cosine similarities.
        jsd_weight: weight of L_JSD (the paper adds the two terms with weight 1).
        eps: ε inside the square root of Eq. 6.
        use_jsd / use_nce: False drops that term (ablations of Table 3).
        psq: replace L_NCE by L_NCE_psq (p_tgt anchored against the English passages).

    Inputs: ``loss(p_en [B,d], p_tgt [B,d], q_en [B,d], ids [B])``: L_JSD between the rows of
    p_en and p_tgt (Eq. 6), L_NCE anchored on p_tgt with q_en as positives / in-batch
    negatives (Eq. 7); ``ids`` names each row's gold passage (rows sharing it are not each
    other's negatives). Example::

        loss = JSDInfoNCELoss(tau=0.05)(p_en, p_de, q_en)
    """

    def __init__(
        self,
        tau: float = 0.05,
        jsd_weight: float = 1.0,
        eps: float = 1e-8,
        use_jsd: bool = True,
        use_nce: bool = True,
        psq: bool = False,
    ) -> None:
        super().__init__()
        if not (use_jsd or use_nce):
            raise ValueError("use_jsd and use_nce are both False: nothing to train")
        self.tau, self.jsd_weight, self.eps = positive_tau(tau), jsd_weight, eps
        self.use_jsd, self.use_nce, self.psq = use_jsd, use_nce, psq

    def forward(
        self, p_en: Tensor, p_tgt: Tensor, q_en: Tensor, ids: Tensor | None = None
    ) -> Tensor:
        """jsd_weight·mean L_JSD(p_en, p_tgt) + L_NCE(anchor p_tgt, positive q_en), a scalar."""
        loss = p_en.new_zeros((), dtype=torch.float32)
        if self.use_jsd:
            loss = loss + self.jsd_weight * jsd_distance(p_en, p_tgt, self.eps).mean()
        if self.use_nce:
            positive = p_en if self.psq else q_en
            loss = loss + info_nce(p_tgt, positive, None, self.tau, ids)
        return loss


class JSDMethod(BaselineMethod):
    """``jsd`` (paper 003): :class:`JSDInfoNCELoss` on (q_en, p_en, p_tgt), p_tgt the gold
    sentence in the training language: L_JSD(p_en, p_tgt) + L_NCE(anchor p_tgt, positive q_en,
    in-batch English queries); in-batch negatives only."""

    name = "jsd"
    config_class = JSDConfig

    def check(self, trainer: HookTrainer) -> None:
        if not all(e.p_tgt for e in trainer.examples):
            raise ValueError("method 'jsd' needs each example's target-language gold (p_tgt)")

    def setup(self, trainer: HookTrainer) -> JSDInfoNCELoss:
        rc = trainer.cfg.recipe_of("jsd", JSDConfig)
        return JSDInfoNCELoss(trainer.recipe.tau, rc.weight, rc.eps)

    def loss(self, trainer: HookTrainer, batch: Batch) -> Tensor:
        ex, ids = batch_examples(trainer, batch)
        b = len(ex)
        p = trainer.encode([e.pos_text for e in ex] + [e.p_tgt for e in ex], "document")
        q_en = trainer.encode([e.q_en for e in ex], "query")
        return trainer.objective(p[:b], p[b:], q_en, ids)


METHOD = JSDMethod()

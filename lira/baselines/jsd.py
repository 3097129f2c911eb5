"""English-inclination baseline: JSD alignment + reversed InfoNCE (paper 003, §4).

    L = E[L_JSD + L_NCE]                                                       (Eq. 2)
    P(z)_i = softmax(z)_i over the embedding dimensions                          (Eq. 5)
    JSD(P‖Q) = ½ KL(P‖M) + ½ KL(Q‖M),  M = ½(P + Q)                             (Eq. 4)
    L_JSD = sqrt(JSD(P(z_en) ‖ P(z_tgt)) + ε)                                   (Eq. 6)
    L_NCE = −1/n Σ_i log softmax over {q_en_j} of s(p_tgt_i, q_en_i^+)          (Eq. 7)

L_NCE is *reversed*: the target-language text is the anchor and the English texts of the batch
(its positive and the other rows' as in-batch negatives) are the candidates, with cosine
similarity / τ. Natural logarithms throughout (scipy's ``jensenshannon`` uses base e too, and
returns sqrt(JSD)). Ablations: ``use_jsd=False`` ("w/o L_JSD"), ``use_nce=False``
("w/o L_NCE"), ``psq=True`` (L_NCE_psq: English text anchored against target texts instead).

Data mapping (recorded choice): the paper's triple (q_en, p_en, p_tgt) aligns translated
documents; our training split holds translated *queries* and English passages, so the trainer
aligns z_en = q_en with z_tgt = q_l (a translation pair, as in the paper) and anchors the
target query q_l against the English passages p_en (the cross-lingual pair of our data).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lira.baselines.infonce import info_nce


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
        psq: replace L_NCE by L_NCE_psq (English text anchor vs target texts).

    Inputs: ``loss(z_en [B,d], z_tgt [B,d], anchor_tgt [B,d], cands_en [B,d], ids [B])``:
    L_JSD between the rows of z_en and z_tgt (translations), L_NCE anchored on anchor_tgt with
    cands_en as positives / in-batch negatives. Example::

        loss = JSDInfoNCELoss(tau=0.05)(q_en, q_de, q_de, p_en)
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
        if tau <= 0:
            raise ValueError(f"tau must be > 0, got {tau}")
        if not (use_jsd or use_nce):
            raise ValueError("use_jsd and use_nce are both False: nothing to train")
        self.tau, self.jsd_weight, self.eps = tau, jsd_weight, eps
        self.use_jsd, self.use_nce, self.psq = use_jsd, use_nce, psq

    def forward(
        self,
        z_en: Tensor,
        z_tgt: Tensor,
        anchor_tgt: Tensor,
        cands_en: Tensor,
        ids: Tensor | None = None,
    ) -> Tensor:
        """jsd_weight·mean L_JSD + L_NCE, a scalar."""
        loss = z_en.new_zeros((), dtype=torch.float32)
        if self.use_jsd:
            loss = loss + self.jsd_weight * jsd_distance(z_en, z_tgt, self.eps).mean()
        if self.use_nce:
            if self.psq:
                loss = loss + info_nce(cands_en, anchor_tgt, None, self.tau, ids)
            else:
                loss = loss + info_nce(anchor_tgt, cands_en, None, self.tau, ids)
        return loss

"""LaSR objectives as pure functions on tensors (LiRA paper §4.2, App. D.4, Eq. 29-44).

- :func:`pearson` (Eq. 31), :func:`soft_ranks` (Eq. 32), :func:`average_ranks` (label ranks
  with average ties), :func:`soft_spearman` (Eq. 33) and :func:`corr_loss` (Eq. 34): the
  ranking (STS) objective on the concatenation [history; batch] of the CorrQueue.
- :func:`soft_ndcg_loss` (Eq. 35-44): listwise soft nDCG@k over a candidate list per query,
  with safe negatives, a top-1 hinge and a mean/variance regulariser; :func:`ranking_loss`
  applies it with ``lasr.*``'s score scaling and weights, :func:`candidate_ranking_loss` to the
  cosines of each query's positive and negatives.

Memory: every function builds at most one pairwise matrix per list ([N, N] for the
correlation loss over N = K + B items, [Q, C, C] for soft nDCG over Q lists of C candidates),
and only ``chunk`` rows of it at a time: :func:`pairwise_sigmoid_sum` is a custom autograd
function whose backward recomputes the sigmoids instead of storing N×N intermediates.

Decisions where the paper is silent or ambiguous (see also docs/design.md "LaSR"):

- Safe negatives (Eq. 40-41). The paper multiplies the discount of near negatives by
  w_i = σ((θ − s_i)/β); because a negative's gain 2^0 − 1 is 0, that literal update never
  changes DCG. We apply w_j where it has an effect: to the contribution of negative j to
  every other candidate's soft rank, r_i = 1 + Σ_{j≠i} w_j σ((s_j − s_i)/τ) (w = 1 for
  positives). A near negative (possibly an unlabelled relevant document) thus pushes the
  positive down the list less. The gate is detached (a weight, not a target).
- With several positives, s_+ is the lowest positive score (equal to s_0 with one positive).
- Rows of ``mask`` = False (padding) take no part in ranks, IDCG, hinge or regulariser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx

if TYPE_CHECKING:
    from lasr.config import LaSRConfig


def pearson(a: Tensor, b: Tensor, eps: float = 1e-8) -> Tensor:
    """Pearson correlation of two [N] vectors with ε inside the square roots (LiRA Eq. 31)."""
    if a.shape != b.shape or a.dim() != 1:
        raise ValueError(f"pearson needs two [N] vectors of equal length, got {a.shape}, {b.shape}")
    a = a - a.mean()
    b = b - b.mean()
    cov = (a * b).mean()
    return cov / (torch.sqrt((a * a).mean() + eps) * torch.sqrt((b * b).mean() + eps))


class _PairwiseSigmoidSum(torch.autograd.Function):
    """f_i = Σ_j w_j σ((x_i − x_j)/τ) over the last dim, computed in row chunks.

    Forward and backward never hold more than ``chunk`` rows of the pairwise matrix, so memory
    is O(chunk·N) per list instead of several N×N autograd intermediates. With
    D_ij = σ'((x_i − x_j)/τ)/τ (symmetric): ∂L/∂x_k = g_k (D w)_k − w_k (D g)_k.
    ``w`` is treated as a constant (no gradient).
    """

    @staticmethod
    def forward(ctx: FunctionCtx, x: Tensor, w: Tensor, tau: float, chunk: int) -> Tensor:
        ctx.save_for_backward(x, w)
        ctx.tau, ctx.chunk = tau, chunk
        out = torch.empty_like(x)
        for i in range(0, x.shape[-1], chunk):
            s = torch.sigmoid((x[..., i : i + chunk, None] - x[..., None, :]) / tau)  # [.., c, N]
            out[..., i : i + chunk] = (s @ w[..., :, None]).squeeze(-1)
        return out

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> tuple[Tensor, None, None, None]:
        x, w = ctx.saved_tensors
        tau, chunk = ctx.tau, ctx.chunk
        grad = torch.empty_like(x)
        gw = torch.stack([w, g], dim=-1)  # [.., N, 2]
        for i in range(0, x.shape[-1], chunk):
            s = torch.sigmoid((x[..., i : i + chunk, None] - x[..., None, :]) / tau)  # [.., c, N]
            d = s * (1 - s) / tau
            dw_dg = d @ gw  # [.., c, 2]
            sl = slice(i, i + chunk)
            grad[..., sl] = g[..., sl] * dw_dg[..., 0] - w[..., sl] * dw_dg[..., 1]
        return grad, None, None, None


def pairwise_sigmoid_sum(x: Tensor, w: Tensor, tau: float, chunk: int = 512) -> Tensor:
    """Σ_j w_j σ((x_i − x_j)/τ) along the last dim of x [..., N] (w [..., N] constant)."""
    if tau <= 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    w = w.detach().to(x.dtype).expand_as(x).contiguous()
    return _PairwiseSigmoidSum.apply(x.contiguous(), w, float(tau), int(chunk))


def soft_ranks(x: Tensor, tau: float) -> Tensor:
    """Ascending soft ranks R_i = 1 + Σ_j σ((x_i − x_j)/τ) of an [N] vector (LiRA Eq. 32).

    The sum includes j = i (a constant 0.5 that Pearson ignores); memory is O(chunk·N).
    """
    return 1.0 + pairwise_sigmoid_sum(x, torch.ones_like(x), tau)  # [N]


def average_ranks(x: Tensor) -> Tensor:
    """1-based ranks of an [N] vector with ties given their average rank (scipy's rankdata)."""
    srt = x.sort().values  # O(N log N), no pairwise matrix
    below = torch.searchsorted(srt, x, right=False)  # [N] items strictly below x_i
    upto = torch.searchsorted(srt, x, right=True)  # [N] items <= x_i
    dtype = x.dtype if x.is_floating_point() else torch.get_default_dtype()
    return ((below + upto + 1) / 2.0).to(dtype)


def soft_spearman(pred: Tensor, gold: Tensor, tau: float) -> Tensor:
    """Soft Spearman: Pearson between soft ranks of ``pred`` and average-tie ranks of ``gold``.

    LiRA paper Eq. 33, r_s = r(R(p; τ), ρ(t)); ``pred``, ``gold``: [N]. Gradients flow only
    through ``pred``.
    """
    if pred.shape != gold.shape or pred.dim() != 1:
        raise ValueError(f"soft_spearman needs [N] pred and gold, got {pred.shape}, {gold.shape}")
    gold_ranks = average_ranks(gold.detach()).to(pred.dtype)
    return pearson(soft_ranks(pred, tau), gold_ranks)


def corr_loss(pred: Tensor, gold: Tensor, alpha: float = 0.5, tau: float = 0.1) -> Tensor:
    """Correlation loss α(1 − Pearson) + (1 − α)(1 − SoftSpearman) (LiRA Eq. 31-34).

    ``pred``: [N] predicted similarities (history detached, then the batch), ``gold``: [N]
    gold scores. Returns a scalar. Example::

        p, t = queue.concat(cos_sim, labels)
        loss = corr_loss(p, t, alpha=0.5, tau=0.1)
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if pred.numel() < 2:
        raise ValueError(f"corr_loss needs at least 2 items, got {pred.numel()}")
    gold = gold.to(pred.dtype)
    loss = pred.new_zeros(())
    if alpha > 0:
        loss = loss + alpha * (1.0 - pearson(pred, gold))
    if alpha < 1:
        loss = loss + (1.0 - alpha) * (1.0 - soft_spearman(pred, gold, tau))
    return loss


def standardize_rows(scores: Tensor, mask: Tensor, std: float = 1.0, eps: float = 1e-8) -> Tensor:
    """Each row of ``scores`` [Q, C] shifted and scaled to mean 0 and standard deviation ``std``
    over its ``mask`` [Q, C] entries: a loss on the result depends on each row's ranking only,
    not on a scale the model can set (LaSR ``scale_free``; the paper ranks raw cosines)."""
    w = mask.to(scores.dtype)
    n = w.sum(dim=1, keepdim=True).clamp(min=1.0)
    mean = (scores * w).sum(dim=1, keepdim=True) / n
    var = (((scores - mean) ** 2) * w).sum(dim=1, keepdim=True) / n
    return std * (scores - mean) / (var + eps).sqrt()


def soft_ndcg_loss(
    scores: Tensor,
    labels: Tensor,
    k: int = 10,
    tau: float = 0.1,
    tau_k: float = 0.5,
    delta: float = 0.2,
    beta: float = 0.03,
    gamma: float = 0.05,
    nu: float = 0.15,
    lambda_h: float = 0.0,
    lambda_r: float = 0.0,
    safe_negatives: bool = True,
    mask: Tensor | None = None,
    eps: float = 1e-8,
) -> Tensor:
    """Listwise loss 1 − soft nDCG@k (+ λ_h hinge + λ_r mean/variance), mean over queries.

    LiRA paper Eq. 35-44. ``scores``: [Q, C] similarities of each query to its C candidates;
    ``labels``: [Q, C] binary relevance (every row needs a positive); ``mask``: optional
    [Q, C] bool, False marks padding. Soft ranks r_i = 1 + Σ_{j≠i} w_j σ((s_j − s_i)/τ)
    (Eq. 36, w = safe-negative gate of Eq. 40-41, see module docstring), disc_i =
    1/log2(1 + r_i), soft top-k mask m_i = σ((k + ½ − r_i)/τ_k) (Eq. 37), gains 2^y − 1,
    nDCG@k = DCG / max(IDCG, ε) (Eq. 38); hinge max(0, γ + max_neg s − s_+) (Eq. 42);
    L_mv = s̄² + |Var(s) − ν| (Eq. 43). Example::

        loss = soft_ndcg_loss(q @ d.T, torch.eye(B), k=10, lambda_h=0.1, lambda_r=0.01)
    """
    if scores.dim() != 2 or scores.shape != labels.shape:
        raise ValueError(
            f"soft_ndcg_loss needs scores and labels of shape [Q, C], got {tuple(scores.shape)} "
            f"and {tuple(labels.shape)}"
        )
    if tau <= 0 or tau_k <= 0 or beta <= 0:
        raise ValueError(f"tau, tau_k and beta must be > 0, got {tau}, {tau_k}, {beta}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    valid = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.bool()
    y = (labels > 0) & valid  # [Q, C]
    has_pos = y.any(dim=1)
    if not bool(has_pos.all()):
        bad = int((~has_pos).nonzero()[0])
        raise ValueError(f"soft_ndcg_loss: query row {bad} has no (unmasked) positive candidate")
    neg = valid & ~y  # [Q, C]
    big = torch.finfo(scores.dtype).max

    # s_+ (Eq. 40): lowest positive score; θ = s_+ − δ; gate w_j for negatives (Eq. 41).
    s_pos = torch.where(y, scores, torch.full_like(scores, big)).min(dim=1).values  # [Q]
    weight = valid.to(scores.dtype)  # [Q, C]
    if safe_negatives:
        theta = (s_pos - delta).detach()
        gate = torch.sigmoid((theta[:, None] - scores.detach()) / beta)
        weight = torch.where(neg, gate, weight)

    # Soft ranks (Eq. 36): r_i = 1 + Σ_{j≠i} w_j σ((s_j − s_i)/τ); the j = i term is 0.5 w_i.
    ranks = 1.0 + pairwise_sigmoid_sum(-scores, weight, tau) - 0.5 * weight  # [Q, C]

    disc = 1.0 / torch.log2(1.0 + ranks)  # Eq. 37
    topk = torch.sigmoid((k + 0.5 - ranks) / tau_k)
    gains = y.to(scores.dtype)  # 2^y − 1 for y in {0, 1}
    dcg = (gains * disc * topk).sum(dim=1)  # [Q]
    n_pos = y.sum(dim=1)  # [Q]
    pos_disc = 1.0 / torch.log2(torch.arange(2, scores.shape[1] + 2, dtype=scores.dtype))
    cum = torch.cumsum(pos_disc, 0).to(scores.device)  # IDCG for t positives, t = 1..C
    idcg = cum[(n_pos.clamp(max=k) - 1).long()]  # [Q]
    loss = 1.0 - dcg / idcg.clamp(min=eps)  # Eq. 38-39

    if lambda_h > 0:  # Eq. 42 (zero where a row has no negative)
        max_neg = torch.where(neg, scores, torch.full_like(scores, -big)).max(dim=1).values
        hinge = torch.relu(gamma + max_neg - s_pos)
        loss = loss + lambda_h * torch.where(neg.any(dim=1), hinge, torch.zeros_like(hinge))
    if lambda_r > 0:  # Eq. 43, over the valid candidates of each row
        w = valid.to(scores.dtype)
        count = w.sum(dim=1)
        mean = (scores * w).sum(dim=1) / count
        var = (((scores - mean[:, None]) ** 2) * w).sum(dim=1) / count
        loss = loss + lambda_r * (mean**2 + (var - nu).abs())
    return loss.mean()


__all__ = [
    "average_ranks",
    "corr_loss",
    "pairwise_sigmoid_sum",
    "pearson",
    "soft_ndcg_loss",
    "soft_ranks",
    "soft_spearman",
    "standardize_rows",
]


def ranking_loss(
    scores: Tensor, mask: Tensor, cfg: LaSRConfig, log_scale: Tensor | None = None
) -> Tensor:
    """Soft nDCG@k (+ hinge, mean/variance; Eq. 35-44) of [positive, negatives] scores
    [B, 1 + M] with ``lasr.*``'s settings, standardised (``scale_free``) or scaled
    (``score_scale``), times the learned inverse temperature exp(``log_scale``) if given."""
    labels = torch.zeros_like(scores)
    labels[:, 0] = 1
    if cfg.scale_free:
        scores = standardize_rows(scores, mask, cfg.score_std)
    else:
        scores = cfg.score_scale * scores
    if log_scale is not None:
        scores = scores * log_scale.exp()
    return soft_ndcg_loss(
        scores, labels, k=cfg.ndcg_k, tau=cfg.tau, tau_k=cfg.tau_k, delta=cfg.safe_delta,
        beta=cfg.safe_beta, gamma=cfg.hinge_gamma, nu=cfg.mv_nu, lambda_h=cfg.lambda_h,
        lambda_r=cfg.lambda_r, safe_negatives=cfg.safe_negatives, mask=mask,
    )  # fmt: skip


def candidate_ranking_loss(
    zq: Tensor,
    z_pos: Tensor,
    neg: Tensor,
    valid: Tensor,
    cfg: LaSRConfig,
    log_scale: Tensor | None = None,
) -> Tensor:
    """:func:`ranking_loss` of each query's positive and M negatives: the cosines of unit
    vectors zq [B, d] with z_pos [B, d] and neg [B, M, d]; ``valid`` [B, M] marks the real
    negatives (False: padding)."""
    s_pos = (zq * z_pos).sum(-1, keepdim=True)  # [B, 1]
    s_neg = torch.einsum("bd,bmd->bm", zq, neg)  # [B, M]
    scores = torch.cat([s_pos, s_neg], dim=1)  # [B, 1 + M]
    mask = torch.cat([torch.ones_like(valid[:, :1]), valid], dim=1).to(scores.device)
    return ranking_loss(scores, mask, cfg, log_scale)

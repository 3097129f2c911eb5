"""Arca objectives as pure functions on tensors (LiRA paper 004, §4.1, Eq. 5, 7-9, App. D.1-D.2).

- :func:`anchor_loss`      L_anchor = 1 - cos(E_lr, E_en)                         (Eq. 5)
- :func:`encoder_anchor_loss` L_enc = 1 - cos(E_lr, sg(T(y))), fixed English target  (App. D.1)
- :func:`anchor_contrast_loss` optional in-batch InfoNCE against Adaptor collapse (not in the paper)
- :func:`composite_reward` R_k = 0.1 (alpha s_k + beta e_k + gamma p_k) + delta sim_k (Eq. 7)
- :func:`reinforce_loss`   L_RL = -log pi(a | c) (R_a - b)                          (Eq. 8)
- :func:`arca_loss`        L = L_RL + eta L_anchor                                  (Eq. 9)
- :func:`epsilon1`, :func:`epsilon2`: the training diagnostics of App. D.2 (Eq. 25, 28).
- :func:`anchor_terms`     L_anchor (+ the InfoNCE term) of the configured objective
- :func:`arca_reward`      R_k with the configured weights, less Table 5's ablated critics;
  :func:`actor_agreement` the share of Actor arg-maxes that are the reward's (a diagnostic).

The paper's REINFORCE has no baseline (b = 0, ``baseline=None``); :func:`reward_baseline`
offers ``mean`` (the mean reward of the source's own candidates) and ``ema`` (a running mean
of past sampled rewards) as variance-reduction options.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from arca.config import ArcaConfig


def anchor_loss(e_lr: torch.Tensor, e_en: torch.Tensor) -> torch.Tensor:
    """Feature-anchoring loss 1 - cos(E_lr, E_en), mean over the batch (paper 004, Eq. 5).

    e_lr: [B, d] multilingual path pool(A(G(x))); e_en: [B, d] English path pool(A(H(y))).
    """
    if e_lr.shape != e_en.shape:
        raise ValueError(f"e_lr {tuple(e_lr.shape)} and e_en {tuple(e_en.shape)} must match")
    return (1.0 - F.cosine_similarity(e_lr, e_en, dim=-1)).mean()


def encoder_anchor_loss(e_lr: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """L_enc = 1 - cos(E_lr, sg(T(y))) against a fixed target (paper 004, App. D.1).

    App. D.1 writes L_enc = -cos(pool(Adaptor(Enc_ML(x))), pool(Emb_LLM(y))); the constant 1
    only shifts it onto Eq. 5's scale. The target T(y) is detached: only g's path (g and the
    Adaptor) moves, so a constant Adaptor output cannot minimise it. e_lr, target: [B, D].
    """
    return anchor_loss(e_lr, target.detach())


def anchor_contrast_loss(e_lr: torch.Tensor, e_en: torch.Tensor, tau: float = 0.05) -> torch.Tensor:
    """In-batch InfoNCE between E_lr and E_en (an option beside Eq. 5; not in paper 004).

    Row i's positive is e_en[i], the other rows are negatives: mean_i -log softmax_j(cos_ij/tau)_i.
    e_lr, e_en: [B, d]. Eq. 5 alone is minimised by a constant Adaptor output; this term is
    ``arca.anchor_contrast`` (weight, 0 = paper) with temperature ``arca.anchor_tau``.
    """
    sims = F.normalize(e_lr, dim=-1) @ F.normalize(e_en, dim=-1).T / tau  # [B, B]
    return F.cross_entropy(sims, torch.arange(len(sims), device=sims.device))


def composite_reward(
    scores: torch.Tensor,
    sim: torch.Tensor,
    alpha: float = 0.4,
    beta: float = 0.3,
    gamma: float = 0.3,
    delta: float = 1.0,
) -> torch.Tensor:
    """R_k = 0.1 (alpha s_k + beta e_k + gamma p_k) + delta sim_k (paper 004, Eq. 7; Table 10).

    scores: [..., 3] critic (semantic, emotional, pragmatic) in [1, 10]; sim: [...] the Adaptor
    similarity cos(E_lr, E_en(y_k)). Returns [...]. ``sim`` is detached: the reward is a
    constant for REINFORCE (design decision, docs/design.md "Arca").
    """
    if scores.shape[-1] != 3:
        raise ValueError(f"scores must end in 3 (s, e, p), got shape {tuple(scores.shape)}")
    if scores.shape[:-1] != sim.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and sim {tuple(sim.shape)} disagree")
    s, e, p = scores.unbind(-1)
    return 0.1 * (alpha * s + beta * e + gamma * p) + delta * sim.detach()


def reward_baseline(
    rewards: torch.Tensor,
    mask: torch.Tensor,
    kind: str = "none",
    ema: float | None = None,
) -> torch.Tensor | None:
    """The baseline b of Eq. 8: none (paper), mean of each row's candidates, or a running EMA.

    rewards, mask: [B, K]. Returns [B] (mean), a 0-dim tensor (ema; 0 before the first
    update) or None (none).
    """
    if kind == "none":
        return None
    if kind == "mean":
        m = mask.to(rewards.dtype)
        return (rewards * m).sum(-1) / m.sum(-1).clamp_min(1.0)  # [B]
    if kind == "ema":
        return torch.tensor(0.0 if ema is None else float(ema), dtype=rewards.dtype)
    raise ValueError(f"unknown reward baseline {kind!r}; choose none, mean or ema")


def reinforce_loss(
    log_probs: torch.Tensor,
    actions: torch.Tensor,
    rewards: torch.Tensor,
    baseline: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """REINFORCE L_RL = -log pi(a | c_1:K) (R_a - b), mean over the batch (paper 004, Eq. 8).

    log_probs: [B, K] log pi over candidates; actions: [B] sampled indices a ~ pi;
    rewards: [B, K] R_k of every candidate (or [B] = R_a already gathered);
    baseline: None (paper, b = 0), a scalar or [B]. Rewards and baseline carry no gradient.
    """
    logp_a = log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)  # [B]
    r_a = rewards if rewards.dim() == 1 else rewards.gather(-1, actions.long().unsqueeze(-1))
    advantage = r_a.reshape(logp_a.shape).detach()
    if baseline is not None:
        advantage = advantage - torch.as_tensor(baseline, dtype=advantage.dtype).detach()
    return -(logp_a * advantage).mean()


def arca_loss(l_rl: torch.Tensor, l_anchor: torch.Tensor, eta: float = 1.0) -> torch.Tensor:
    """The full Arca objective L = L_RL + eta L_anchor (paper 004, Eq. 9)."""
    return l_rl + eta * l_anchor


def epsilon1(e_lr: torch.Tensor, e_en: torch.Tensor) -> torch.Tensor:
    """eps1_hat = E_x ||g(x) - h(y_hat)||_2 on the raw path vectors (paper 004, Eq. 25).

    e_lr: [B, d] g(x) = E_lr; e_en: [B, d] h(y_hat) = E_en of the selected candidate. No
    normalisation: Table 12 reports eps1_hat next to cos (0.81 at cos 0.01, 0.19 at cos 0.78),
    which unit vectors (||a - b|| = sqrt(2 - 2 cos)) cannot give. This is the only eps1_hat
    of the code base; the cosine is logged beside it as ``cos``.
    """
    return (e_lr - e_en).norm(dim=-1).mean()


def masked_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """E(u) = sum_t m_t H[t] / sum_t m_t (paper 004, Eq. 27): [B, T, D], [B, T] -> [B, D]."""
    m = mask.to(hidden.dtype).unsqueeze(-1)  # [B, T, 1]
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)


def epsilon2(emb_x: torch.Tensor, emb_y: torch.Tensor) -> torch.Tensor:
    """eps2_hat = E_x [1 - cos(E(x), E(y_hat))] on frozen-LLM mean states (paper 004, Eq. 28)."""
    return (1.0 - F.cosine_similarity(emb_x, emb_y, dim=-1)).mean()


def arca_reward(cfg: ArcaConfig, scores: torch.Tensor, sim: torch.Tensor) -> torch.Tensor:
    """R_k (Eq. 7) with the configured weights, less the terms of a critic that Table 5's
    ablations remove: ``arca.use_llm_critic: false`` drops 0.1 (alpha s + beta e + gamma p),
    ``arca.use_embedding_critic: false`` drops delta sim_k. scores [B, K, 3], sim [B, K]."""
    llm = 1.0 if cfg.use_llm_critic else 0.0
    return composite_reward(
        scores,
        sim,
        alpha=llm * cfg.alpha,
        beta=llm * cfg.beta,
        gamma=llm * cfg.gamma,
        delta=cfg.delta if cfg.use_embedding_critic else 0.0,
    )


def anchor_terms(
    cfg: ArcaConfig,
    e_lr: torch.Tensor,
    e_sel: torch.Tensor,
    e_distill: torch.Tensor | None = None,
    distill_targets: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(L_anchor, the anchor_contrast InfoNCE term) of ``arca.objective``: d1 L_enc(E_lr, E_en(y_a))
    (App. D.1), shared Eq. 5, distill L_enc(A(g(y)), h(y)) on English texts y (``e_distill`` [N, d],
    ``distill_targets`` [N, d]; None: a constant 0, as the ridge solver has no gradient).
    e_lr, e_sel: [B, d]; the InfoNCE term is 0 unless ``anchor_contrast`` > 0 and N > 1."""
    if cfg.objective == "distill":  # A(g(y)) -> h(y) on English text only (beyond the paper)
        src, tgt = e_lr.new_zeros(1, e_lr.shape[-1]), e_lr.new_ones(1, e_lr.shape[-1])
        if e_distill is not None and distill_targets is not None:
            src, tgt = e_distill, distill_targets
        l_anchor = encoder_anchor_loss(src, tgt)  # ridge: a constant 0, no gradient
    else:
        src, tgt = e_lr, e_sel
        fixed = cfg.objective == "d1"
        l_anchor = encoder_anchor_loss(e_lr, e_sel) if fixed else anchor_loss(e_lr, e_sel)
    if cfg.anchor_contrast > 0 and len(src) > 1:
        return l_anchor, anchor_contrast_loss(src, tgt, cfg.anchor_tau)
    return l_anchor, l_anchor.new_zeros(())


def actor_agreement(
    logits: torch.Tensor, rewards: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Share of sources whose Actor arg-max is the arg-max of the reward R_k (Eq. 7): 1 when the
    Actor has learned what it is trained for; a diagnostic on training batches, no labels."""
    low = torch.finfo(rewards.dtype).min
    best = rewards.masked_fill(~mask.bool(), low).argmax(-1)
    return (logits.argmax(-1) == best).float().mean()

"""Arca losses vs hand computations (paper 004, Eq. 5, 7, 8, 9, 25, 28)."""

from __future__ import annotations

import math

import pytest
import torch

from arca.losses import (
    anchor_loss,
    arca_loss,
    composite_reward,
    epsilon1,
    epsilon2,
    masked_mean,
    reinforce_loss,
    reward_baseline,
)


def test_anchor_loss_hand():
    e_lr = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    e_en = torch.tensor([[0.0, 2.0], [3.0, 3.0]])
    # cos = 0 and 1 -> losses 1 and 0 -> mean 0.5
    assert anchor_loss(e_lr, e_en).item() == pytest.approx(0.5)
    e_en2 = torch.tensor([[-1.0, 0.0], [1.0, 0.0]])  # cos = -1, 1/sqrt2
    expect = ((1 + 1) + (1 - 1 / math.sqrt(2))) / 2
    assert anchor_loss(e_lr, e_en2).item() == pytest.approx(expect, abs=1e-6)
    with pytest.raises(ValueError, match="must match"):
        anchor_loss(e_lr, e_en[:1])


def test_composite_reward_hand():
    scores = torch.tensor([[8.0, 6.0, 4.0], [10.0, 10.0, 10.0]])
    sim = torch.tensor([0.5, -0.2])
    r = composite_reward(scores, sim, 0.4, 0.3, 0.3, 1.0)
    # 0.1*(3.2+1.8+1.2) + 0.5 = 1.12 ; 0.1*10 - 0.2 = 0.8
    assert torch.allclose(r, torch.tensor([1.12, 0.8]))
    r2 = composite_reward(scores, sim, 1.0, 0.0, 0.0, 2.0)
    assert torch.allclose(r2, torch.tensor([0.8 + 1.0, 1.0 - 0.4]))


def test_composite_reward_weights_each_critic_score_by_its_own_coefficient():
    """Eq. 7 with distinct beta, gamma and distinct e, p: beta weighs the emotional score,
    gamma the pragmatic one (a swap changes the value)."""
    scores = torch.tensor([[2.0, 9.0, 1.0]])  # s, e, p
    sim = torch.tensor([0.25])
    r = composite_reward(scores, sim, alpha=0.5, beta=0.2, gamma=0.7, delta=2.0)
    # 0.1 * (0.5*2 + 0.2*9 + 0.7*1) + 2*0.25 = 0.1 * 3.5 + 0.5 = 0.85 (swapped: 0.1*7.5+0.5)
    assert r.item() == pytest.approx(0.85)
    only_e = composite_reward(scores, sim, alpha=0.0, beta=1.0, gamma=0.0, delta=0.0)
    only_p = composite_reward(scores, sim, alpha=0.0, beta=0.0, gamma=1.0, delta=0.0)
    assert (only_e.item(), only_p.item()) == pytest.approx((0.9, 0.1))


def test_composite_reward_detaches_sim():
    sim = torch.tensor([0.3], requires_grad=True)
    r = composite_reward(torch.ones(1, 3), sim)
    assert not r.requires_grad


def test_reinforce_loss_hand():
    probs = torch.tensor([[0.5, 0.25, 0.25], [0.1, 0.9, 0.0]])
    logp = probs.clamp_min(1e-12).log().requires_grad_()
    actions = torch.tensor([0, 1])
    rewards = torch.tensor([[2.0, 1.0, 0.0], [1.0, 3.0, 0.0]])
    loss = reinforce_loss(logp, actions, rewards)
    expect = -(math.log(0.5) * 2.0 + math.log(0.9) * 3.0) / 2
    assert loss.item() == pytest.approx(expect, rel=1e-6)
    # mean baseline over real candidates: row0 mean 1.0, row1 (mask 2 real) mean 2.0
    mask = torch.tensor([[True, True, True], [True, True, False]])
    b = reward_baseline(rewards, mask, "mean")
    assert torch.allclose(b, torch.tensor([1.0, 2.0]))
    loss_b = reinforce_loss(logp, actions, rewards, b)
    expect_b = -(math.log(0.5) * 1.0 + math.log(0.9) * 1.0) / 2
    assert loss_b.item() == pytest.approx(expect_b, rel=1e-6)
    # gradient: d/dlogp[b,a] = -adv/B
    loss.backward()
    assert logp.grad[0, 0].item() == pytest.approx(-1.0)
    assert logp.grad[1, 1].item() == pytest.approx(-1.5)
    assert logp.grad[0, 1].item() == 0.0


def test_reward_baseline_kinds():
    r = torch.tensor([[1.0, 2.0]])
    m = torch.ones(1, 2, dtype=torch.bool)
    assert reward_baseline(r, m, "none") is None
    assert reward_baseline(r, m, "ema", 0.7).item() == pytest.approx(0.7)
    assert reward_baseline(r, m, "ema", None).item() == 0.0
    with pytest.raises(ValueError, match="median"):
        reward_baseline(r, m, "median")


def test_total_and_diagnostics():
    assert arca_loss(torch.tensor(1.5), torch.tensor(0.5), eta=2.0).item() == pytest.approx(2.5)
    a = torch.tensor([[3.0, 0.0]])
    b = torch.tensor([[0.0, 5.0]])
    assert epsilon1(a, b).item() == pytest.approx(math.sqrt(34.0))  # ||(3, -5)||, unnormalised
    assert epsilon1(a, 2 * a).item() == pytest.approx(3.0)  # parallel but not equal: 3, not 0
    g = torch.tensor([[3.0, 0.0], [1.0, 1.0]])
    h_sel = torch.tensor([[0.0, 4.0], [1.0, 1.0]])
    assert epsilon1(g, h_sel).item() == pytest.approx((5.0 + 0.0) / 2)  # E_x over the batch
    assert epsilon2(a, b).item() == pytest.approx(1.0)
    h = torch.tensor([[[1.0, 1.0], [3.0, 5.0], [100.0, 100.0]]])
    assert torch.allclose(masked_mean(h, torch.tensor([[1, 1, 0]])), torch.tensor([[2.0, 3.0]]))


def test_anchor_contrast_loss_hand():
    from arca.losses import anchor_contrast_loss

    e = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    # cos matrix = I; with tau = 1: -log(e / (e + 1)) per row
    expect = -math.log(math.e / (math.e + 1))
    assert anchor_contrast_loss(e, e, tau=1.0).item() == pytest.approx(expect, rel=1e-6)
    # a collapsed (constant) E_en gives log B regardless of E_lr
    const = torch.ones(2, 2)
    assert anchor_contrast_loss(e, const, tau=1.0).item() == pytest.approx(math.log(2), rel=1e-6)


def test_anchor_contrast_loss_divides_cosines_by_tau():
    """InfoNCE logits are cos / tau: at tau = 0.5 the diagonal logit is 2 (tau * cos = 0.5)."""
    from arca.losses import anchor_contrast_loss

    e = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    expect = -math.log(math.exp(2.0) / (math.exp(2.0) + 1.0))
    assert anchor_contrast_loss(e, e, tau=0.5).item() == pytest.approx(expect, rel=1e-6)
    e2 = torch.tensor([[1.0, 0.0], [0.6, 0.8]])  # cos matrix [[1, 0.6], [0.6, 1]]
    row = -math.log(math.exp(1 / 0.1) / (math.exp(1 / 0.1) + math.exp(0.6 / 0.1)))
    assert anchor_contrast_loss(e2, e2, tau=0.1).item() == pytest.approx(row, rel=1e-5)


def test_encoder_anchor_loss_d1_hand_and_fixed_target():
    """App. D.1: L_enc = 1 - cos(E_lr, sg(T(y))): hand values, and no gradient into T(y)."""
    from arca.losses import encoder_anchor_loss

    e_lr = torch.tensor([[1.0, 0.0], [3.0, 4.0]], requires_grad=True)
    target = torch.tensor([[0.0, 2.0], [3.0, 4.0]], requires_grad=True)
    # row 0: orthogonal -> 1 - 0 = 1; row 1: parallel -> 1 - 1 = 0; mean 0.5
    loss = encoder_anchor_loss(e_lr, target)
    assert loss.item() == pytest.approx(0.5, abs=1e-7)
    loss.backward()
    assert target.grad is None  # the English side is a fixed target
    # d/dx (1 - cos(x, t)) at x = (1, 0), t = (0, 1): -(t/|x||t| - cos x/|x|^2) / 2 = (0, -0.5)
    assert torch.allclose(e_lr.grad[0], torch.tensor([0.0, -0.5]), atol=1e-6)
    assert torch.allclose(e_lr.grad[1], torch.zeros(2), atol=1e-6)

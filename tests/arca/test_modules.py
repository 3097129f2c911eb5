"""Adaptor and Actor shapes, masking and arg-max selection (paper 004, Eq. 4, 6; App. D.1)."""

from __future__ import annotations

import pytest
import torch

from arca.actor import Actor
from arca.adaptor import Adaptor


def test_d1_adaptor_is_a_two_layer_mlp_on_g_only():
    a = Adaptor(d_g=8, d_h=6, hidden=16)  # App. D.1: d_g -> 512 -> d_h
    assert isinstance(a.proj_g, torch.nn.Identity)
    assert [type(m) for m in a.mlp] == [
        torch.nn.Linear, torch.nn.ReLU, torch.nn.LayerNorm, torch.nn.Linear
    ]  # fmt: skip
    assert (a.mlp[0].in_features, a.mlp[0].out_features, a.mlp[3].out_features) == (8, 16, 6)
    assert a.bins_g(torch.randn(3, 4, 8)).shape == (3, 4, 6)
    x = torch.randn(3, 4, 8)
    assert torch.allclose(a.embed_g(x), a.mlp(x).mean(1))  # E = mean over bins of A(bins)
    with pytest.raises(RuntimeError, match="fixed target"):
        a.embed_h(torch.randn(5, 4, 6))


def test_shared_adaptor_reading_of_eq4():
    a = Adaptor(d_g=8, d_h=6, hidden=16, shared=True)
    assert isinstance(a.proj_g, torch.nn.Linear)
    assert a.embed_h(torch.randn(5, 4, 6)).shape == (5, 6)
    same = Adaptor(d_g=6, d_h=6, hidden=16, shared=True)
    assert isinstance(same.proj_g, torch.nn.Identity)
    x = torch.randn(2, 4, 6)
    assert torch.allclose(same.embed_h(x), same.mlp(x).mean(1))
    # shared MLP: identical inputs give identical outputs on both sides
    assert torch.allclose(same.embed_g(x), same.embed_h(x))


def test_actor_masks_missing_candidates():
    torch.manual_seed(0)
    actor = Actor()
    feats = torch.randn(2, 3, 4)
    mask = torch.tensor([[True, True, True], [True, False, True]])
    pi = actor.policy(feats, mask)
    assert pi.probs[1, 1].item() == 0.0
    assert torch.allclose(pi.probs.sum(-1), torch.ones(2))
    samples = pi.sample((200,))
    assert not (samples[:, 1] == 1).any()
    with pytest.raises(ValueError, match="no candidate"):
        actor(feats, torch.tensor([[True, True, True], [False, False, False]]))
    with pytest.raises(ValueError, match="must end in 4"):
        actor(torch.randn(2, 3, 5))


def test_actor_select_is_argmax():
    actor = Actor()
    feats = torch.randn(4, 5, 4)
    mask = torch.ones(4, 5, dtype=torch.bool)
    mask[0, 0] = False
    idx = actor.select(feats, mask)
    assert torch.equal(idx, actor(feats, mask).argmax(-1))
    assert idx[0].item() != 0
    assert actor.select(feats[1]).item() == actor(feats[1:2]).argmax(-1).item()


def test_identity_adaptor_starts_as_g_and_trains():
    """adaptor_init identity: A(x) = x (d_g = d_h) or a linear projection of x at start, and the
    residual MLP still gets a gradient."""
    torch.manual_seed(0)
    x = torch.randn(3, 2, 6)
    same = Adaptor(6, 6, hidden=8, residual=True)
    assert torch.equal(same.bins_g(x), x) and torch.equal(same.embed_g(x), x.mean(1))
    same.embed_g(x).sum().backward()
    assert same.mlp[-1].weight.grad is not None and same.mlp[-1].weight.grad.abs().sum() > 0
    proj = Adaptor(6, 4, hidden=8, residual=True)
    assert proj.skip is not None
    assert torch.allclose(proj.bins_g(x), x @ proj.skip.weight.T, atol=1e-6)
    with pytest.raises(ValueError, match="residual"):
        Adaptor(6, 6, shared=True, residual=True)

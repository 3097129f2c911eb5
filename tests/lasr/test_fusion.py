"""Fusion head: shapes, unit norm, residual start, stream ablations, packed re-scoring."""

from __future__ import annotations

import pytest
import torch

from lasr.fusion import FusionHead, pack


def test_residual_head_starts_at_english_stream_and_is_unit_norm():
    torch.manual_seed(0)
    head = FusionHead(12, 8, fusion_dim=16, layers=1, heads=2, dropout=0.0).eval()
    e_en, e_lr = torch.randn(5, 12), torch.randn(5, 8)
    z = head(e_en, e_lr)
    assert z.shape == (5, 12)
    assert torch.allclose(z.norm(dim=-1), torch.ones(5), atol=1e-6)
    assert torch.allclose(z, torch.nn.functional.normalize(e_en, dim=-1), atol=1e-6)
    # 2·S-token streams give the same output shape
    assert head(torch.randn(5, 3, 12), torch.randn(5, 4, 8)).shape == (5, 12)
    assert torch.allclose(head.fuse_packed(pack(e_en, e_lr)), z)


def test_plain_head_uses_both_streams_and_ablation_ignores_lr():
    torch.manual_seed(0)
    head = FusionHead(6, 4, fusion_dim=8, layers=1, heads=2, dropout=0.0, residual=False).eval()
    e_en = torch.randn(3, 6)
    a, b = head(e_en, torch.randn(3, 4)), head(e_en, torch.randn(3, 4))
    assert not torch.allclose(a, b)
    no_lr = FusionHead(6, 4, fusion_dim=8, layers=1, heads=2, dropout=0.0, use_lr=False).eval()
    torch.nn.init.normal_(no_lr.out.weight)
    assert torch.allclose(no_lr(e_en, torch.randn(3, 4)), no_lr(e_en, torch.randn(3, 4)))
    with pytest.raises(ValueError, match="at least one stream"):
        FusionHead(6, 4, use_en=False, use_lr=False)


def test_gradients_reach_every_trainable_parameter():
    head = FusionHead(6, 4, fusion_dim=8, layers=1, heads=2, dropout=0.0, residual=False)
    head(torch.randn(3, 6), torch.randn(3, 4)).sum().backward()
    assert all(p.grad is not None for p in head.parameters())

"""Masked temporal pooling P_S (paper 004, Eq. 3)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from arca.pooling import temporal_pool


def test_hand_computation_right_padding():
    # one row, 5 valid tokens + 2 padding, S = 2: bins [t0 t1 t2] and [t2 t3 t4]
    x = torch.tensor([[1.0], [2.0], [3.0], [4.0], [5.0], [100.0], [100.0]]).unsqueeze(0)
    mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0]])
    out = temporal_pool(x, mask, 2)
    assert out.shape == (1, 2, 1)
    assert torch.allclose(out.flatten(), torch.tensor([2.0, 4.0]))


def test_short_row_repeats_tokens_and_empty_row_is_zero():
    x = torch.tensor([[[1.0, 0.0], [3.0, 2.0], [9.0, 9.0]], [[7.0, 7.0], [8.0, 8.0], [9.0, 9.0]]])
    mask = torch.tensor([[1, 1, 0], [0, 0, 0]])
    out = temporal_pool(x, mask, 4)
    expect = torch.tensor([[1.0, 0.0], [1.0, 0.0], [3.0, 2.0], [3.0, 2.0]])
    assert torch.allclose(out[0], expect)
    assert torch.equal(out[1], torch.zeros(4, 2))


@pytest.mark.parametrize("bins", [1, 3, 4, 8])
def test_matches_adaptive_avg_pool_on_unpadded_rows(bins):
    torch.manual_seed(0)
    lengths = [1, 5, 8, 13]
    L, d = 16, 6
    x = torch.randn(len(lengths), L, d)
    mask = torch.zeros(len(lengths), L, dtype=torch.long)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    out = temporal_pool(x, mask, bins)
    for b, n in enumerate(lengths):
        ref = F.adaptive_avg_pool1d(x[b, :n].T.unsqueeze(0), bins)[0].T  # [S, d]
        assert torch.allclose(out[b], ref, atol=1e-6)


def test_invariant_to_padding_amount_and_side():
    torch.manual_seed(1)
    tok = torch.randn(1, 7, 3)
    base = temporal_pool(tok, torch.ones(1, 7), 4)
    for pad in (1, 5, 20):
        junk = torch.randn(1, pad, 3) * 1e3
        right = torch.cat([tok, junk], 1)
        left = torch.cat([junk, tok], 1)
        m_r = torch.cat([torch.ones(1, 7), torch.zeros(1, pad)], 1)
        m_l = torch.cat([torch.zeros(1, pad), torch.ones(1, 7)], 1)
        assert torch.allclose(temporal_pool(right, m_r, 4), base, atol=1e-6)
        assert torch.allclose(temporal_pool(left, m_l, 4), base, atol=1e-6)


def test_gradient_never_reaches_padding():
    x = torch.randn(2, 6, 3, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1]])
    temporal_pool(x, mask, 2).sum().backward()
    assert torch.count_nonzero(x.grad[0, 3:]) == 0


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="mask shape"):
        temporal_pool(torch.zeros(2, 5, 3), torch.ones(2, 4), 2)
    with pytest.raises(ValueError, match="bins must be"):
        temporal_pool(torch.zeros(2, 5, 3), torch.ones(2, 5), 0)

"""LaSR losses against hand computations and scipy (LiRA Eq. 31-44)."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from lasr.losses import (
    average_ranks,
    corr_loss,
    pairwise_sigmoid_sum,
    pearson,
    soft_ndcg_loss,
    soft_ranks,
    soft_spearman,
    standardize_rows,
)
from lira.metrics import ndcg_of_scores


def test_soft_ranks_hand_computed_and_limit():
    x = torch.tensor([0.0, 1.0])
    # R_0 = 1 + σ(0) + σ(-1/τ), R_1 = 1 + σ(1/τ) + σ(0) with τ = 1
    r = soft_ranks(x, 1.0)
    s = 1 / (1 + math.exp(-1))
    assert torch.allclose(r, torch.tensor([1.5 + (1 - s), 1.5 + s]))
    y = torch.tensor([0.3, -1.2, 2.0, 0.9, 0.1])
    hard = torch.tensor(stats.rankdata(y.numpy()), dtype=torch.float32)
    # as τ -> 0 soft ranks approach hard ranks (+0.5 from the j = i term)
    assert torch.allclose(soft_ranks(y, 1e-4) - 0.5, hard, atol=1e-3)
    assert not torch.allclose(soft_ranks(y, 1.0) - 0.5, hard, atol=1e-2)


def test_average_ranks_match_scipy_with_ties():
    t = torch.tensor([3.0, 1.0, 3.0, 2.0, 1.0, 5.0])
    assert torch.allclose(average_ranks(t), torch.tensor(stats.rankdata(t.numpy()), dtype=t.dtype))


def test_pearson_and_spearman_match_scipy():
    g = torch.Generator().manual_seed(0)
    p = torch.randn(40, generator=g, dtype=torch.float64)
    t = p + 0.7 * torch.randn(40, generator=g, dtype=torch.float64)
    assert abs(float(pearson(p, t)) - stats.pearsonr(p, t).statistic) < 1e-6
    rho = stats.spearmanr(p, t).statistic
    assert abs(float(soft_spearman(p, t, 1e-5)) - rho) < 1e-6
    # a large τ blurs the ranks: the soft value differs
    assert abs(float(soft_spearman(p, t, 10.0)) - rho) > 1e-4


def test_corr_loss_combines_terms_and_has_gradient_only_through_batch():
    g = torch.Generator().manual_seed(1)
    hist = torch.randn(30, generator=g)
    batch = torch.randn(8, generator=g, requires_grad=True)
    gold = torch.randn(38, generator=g)
    p = torch.cat([hist.detach(), batch])
    a, tau = 0.3, 0.1
    loss = corr_loss(p, gold, a, tau)
    want = a * (1 - pearson(p, gold)) + (1 - a) * (1 - soft_spearman(p, gold, tau))
    assert torch.allclose(loss, want)
    loss.backward()
    assert batch.grad is not None and batch.grad.abs().sum() > 0
    perfect = torch.linspace(-1, 1, 20)
    assert float(corr_loss(perfect, 3 * perfect + 1, 0.5, 1e-4)) < 1e-4
    with pytest.raises(ValueError, match="alpha"):
        corr_loss(perfect, perfect, 1.5, 0.1)


def test_corr_loss_descent_increases_correlation():
    g = torch.Generator().manual_seed(2)
    gold = torch.rand(64, generator=g)
    pred = torch.randn(64, generator=g, requires_grad=True)
    opt = torch.optim.SGD([pred], lr=0.5)
    first = float(corr_loss(pred, gold).detach())
    for _ in range(100):
        opt.zero_grad()
        corr_loss(pred, gold).backward()
        opt.step()
    assert float(corr_loss(pred, gold).detach()) < 0.5 * first


def test_soft_ndcg_perfect_ranking_tends_to_one():
    # one positive far above the negatives, small τ and τ_k: soft nDCG -> 1, loss -> 0
    s = torch.tensor([[0.9, 0.1, 0.0, -0.2, -0.5]])
    y = torch.tensor([[1, 0, 0, 0, 0]])
    loss = soft_ndcg_loss(s, y, k=3, tau=0.01, tau_k=0.05, safe_negatives=False)
    assert float(loss) < 1e-4
    # positive at hard rank 2: nDCG@10 = 1/log2(3)
    s2 = torch.tensor([[0.1, 0.9, 0.0, -0.2, -0.5]])
    loss2 = soft_ndcg_loss(s2, y, k=10, tau=0.001, tau_k=0.05, safe_negatives=False)
    assert abs(float(loss2) - (1 - 1 / math.log2(3))) < 1e-3
    # positive outside the top-k (rank 5 > k=2): nDCG ~ 0
    s3 = torch.tensor([[-0.9, 0.9, 0.5, 0.2, 0.1]])
    loss3 = soft_ndcg_loss(s3, y, k=2, tau=0.001, tau_k=0.05, safe_negatives=False)
    assert float(loss3) > 0.99


def test_soft_ndcg_hand_computation_with_two_positives():
    s = torch.tensor([[0.5, 0.2, 0.0]])
    y = torch.tensor([[1, 0, 1]])
    tau, tau_k, k = 0.1, 0.5, 2
    sig = torch.sigmoid
    r0 = 1 + sig((s[0, 1] - s[0, 0]) / tau) + sig((s[0, 2] - s[0, 0]) / tau)
    r2 = 1 + sig((s[0, 0] - s[0, 2]) / tau) + sig((s[0, 1] - s[0, 2]) / tau)
    dcg = sum(1 / torch.log2(1 + r) * sig((k + 0.5 - r) / tau_k) for r in (r0, r2))
    idcg = 1 / math.log2(2) + 1 / math.log2(3)
    got = soft_ndcg_loss(s, y, k=k, tau=tau, tau_k=tau_k, safe_negatives=False)
    assert torch.allclose(got, 1 - dcg / idcg)


def test_safe_negative_gate_and_regularisers():
    # a near negative (0.88 vs positive 0.9) hurts less with the gate than without
    s = torch.tensor([[0.9, 0.88, 0.0, -0.3]])
    y = torch.tensor([[1, 0, 0, 0]])
    kw = dict(k=10, tau=0.05, tau_k=0.5)
    gated = soft_ndcg_loss(s, y, safe_negatives=True, **kw)
    plain = soft_ndcg_loss(s, y, safe_negatives=False, **kw)
    assert float(gated) < float(plain)
    # hinge: max(0, 0.05 + 0.88 - 0.9) = 0.03; L_mv = mean^2 + |var - 0.15|
    base = soft_ndcg_loss(s, y, safe_negatives=False, **kw)
    with_h = soft_ndcg_loss(s, y, safe_negatives=False, lambda_h=1.0, gamma=0.05, **kw)
    assert abs(float(with_h - base) - 0.03) < 1e-6
    mean, var = float(s.mean()), float(s.var(unbiased=False))
    with_r = soft_ndcg_loss(s, y, safe_negatives=False, lambda_r=1.0, nu=0.15, **kw)
    assert abs(float(with_r - base) - (mean**2 + abs(var - 0.15))) < 1e-6


def test_safe_negative_gate_hand_computation_eq41():
    """Eq. 40-41: θ = s_+ − δ and w_j = σ((θ − s_j)/β) for negatives (1 for the positive): a
    near negative (s_j ≥ θ) gets w ≈ 0, a far one w ≈ 1, applied to its soft-rank term."""
    s = torch.tensor([[0.9, 0.88, 0.0, -0.3]])
    y = torch.tensor([[1, 0, 0, 0]])
    tau, tau_k, k, delta, beta = 0.05, 0.5, 10, 0.2, 0.03
    theta = 0.9 - delta
    sig = torch.sigmoid
    w = [sig(torch.tensor((theta - float(s[0, j])) / beta)) for j in (1, 2, 3)]
    assert float(w[0]) < 0.01 and float(w[1]) > 0.99 and float(w[2]) > 0.99
    r0 = 1 + sum(w[i] * sig((s[0, j] - s[0, 0]) / tau) for i, j in enumerate((1, 2, 3)))
    want = 1 - (1 / torch.log2(1 + r0)) * sig((k + 0.5 - r0) / tau_k)  # IDCG of one positive = 1
    got = soft_ndcg_loss(
        s, y, k=k, tau=tau, tau_k=tau_k, delta=delta, beta=beta, safe_negatives=True
    )
    assert torch.allclose(got, want, atol=1e-6)
    # far negatives only (all below θ): the gate keeps them at (almost) full weight
    far = torch.tensor([[0.9, 0.3, 0.0, -0.3]])
    gated = soft_ndcg_loss(far, y, k=k, tau=tau, tau_k=tau_k, delta=delta, beta=beta)
    plain = soft_ndcg_loss(far, y, k=k, tau=tau, tau_k=tau_k, safe_negatives=False)
    assert torch.allclose(gated, plain, atol=1e-6)


def test_soft_ndcg_mask_ignores_padding_and_errors():
    s = torch.tensor([[0.9, 0.1, 0.95]])
    y = torch.tensor([[1, 0, 0]])
    m = torch.tensor([[True, True, False]])
    masked = soft_ndcg_loss(s, y, mask=m, tau=0.01, tau_k=0.05, safe_negatives=False)
    alone = soft_ndcg_loss(s[:, :2], y[:, :2], tau=0.01, tau_k=0.05, safe_negatives=False)
    assert torch.allclose(masked, alone)
    with pytest.raises(ValueError, match="row 0 has no"):
        soft_ndcg_loss(s, torch.zeros_like(y))
    with pytest.raises(ValueError, match=r"\[Q, C\]"):
        soft_ndcg_loss(s[0], y[0])


def test_soft_ndcg_descent_raises_true_ndcg():
    g = torch.Generator().manual_seed(3)
    q, c = 16, 32
    labels = torch.zeros(q, c)
    labels[torch.arange(q), torch.randint(0, c, (q,), generator=g)] = 1
    scores = (0.3 * torch.randn(q, c, generator=g)).requires_grad_()
    opt = torch.optim.Adam([scores], lr=0.02)
    before = float(ndcg_of_scores(scores, labels).mean())  # the true (pytrec_eval) nDCG@10
    for _ in range(150):
        opt.zero_grad()
        soft_ndcg_loss(scores, labels, lambda_h=0.1, lambda_r=0.01).backward()
        opt.step()
    after = float(ndcg_of_scores(scores, labels).mean())
    assert before < 0.5 and after > 0.95


def test_pairwise_sigmoid_sum_gradient_matches_autograd_and_chunking():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 7, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.rand(3, 7, generator=g, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda t: pairwise_sigmoid_sum(t, w, 0.3, chunk=3), (x,))
    ref = (torch.sigmoid((x[..., :, None] - x[..., None, :]) / 0.3) * w[..., None, :]).sum(-1)
    assert torch.allclose(pairwise_sigmoid_sum(x, w, 0.3, chunk=2), ref)


def test_standardize_rows_hand_computation_and_affine_invariance():
    """Row mean 0 and std ``std`` over the mask (padding ignored); a loss on the result cannot
    see a per-row scale or shift (LaSR ``scale_free``)."""
    s = torch.tensor([[1.0, 2.0, 3.0, 50.0], [0.2, 0.1, 0.4, 0.3]])
    m = torch.tensor([[True, True, True, False], [True, True, True, True]])
    z = standardize_rows(s, m, std=0.1)
    want0 = 0.1 * (torch.tensor([1.0, 2.0, 3.0]) - 2.0) / math.sqrt(2.0 / 3.0)
    assert torch.allclose(z[0, :3], want0, atol=1e-5)
    assert torch.allclose(z[1].mean(), torch.tensor(0.0), atol=1e-6)
    assert torch.allclose(z[1].pow(2).mean().sqrt(), torch.tensor(0.1), atol=1e-5)
    y = torch.tensor([[1, 0, 0, 0], [0, 0, 1, 0]])
    a = soft_ndcg_loss(z, y, mask=m, lambda_h=0.1, lambda_r=0.01)
    b = soft_ndcg_loss(standardize_rows(3.0 * s - 1.0, m, 0.1), y, mask=m, lambda_h=0.1,
                       lambda_r=0.01)  # fmt: skip
    assert torch.allclose(a, b, atol=1e-6)
    assert not torch.allclose(soft_ndcg_loss(s, y, mask=m), soft_ndcg_loss(3.0 * s, y, mask=m))

"""Baseline losses against hand computations and their invariants (papers 000-003)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.spatial.distance import jensenshannon
from scipy.stats import pearsonr

from lira.baselines.clear import ClearLoss, clear_kl, mine_hard_negatives
from lira.baselines.composition import guided_info_nce
from lira.baselines.infonce import info_nce
from lira.baselines.jsd import JSDInfoNCELoss, jsd_distance
from lira.baselines.lancer import correlation_penalty, stratified_language_batch


def _hand_infonce(a, p, n, tau):
    a, p = F.normalize(a, dim=-1), F.normalize(p, dim=-1)
    cands = torch.cat([p, F.normalize(n, dim=-1).reshape(-1, a.shape[1])]) if n is not None else p
    total = 0.0
    for i in range(a.shape[0]):
        s = [float(a[i] @ c) / tau for c in cands]
        total += -(s[i] - math.log(sum(math.exp(x) for x in s)))
    return total / a.shape[0]


def test_infonce_matches_hand_computation():
    g = torch.Generator().manual_seed(0)
    a, p, n = (
        torch.randn(4, 6, generator=g),
        torch.randn(4, 6, generator=g),
        torch.randn(4, 2, 6, generator=g),
    )
    assert info_nce(a, p, n, 0.5).item() == pytest.approx(_hand_infonce(a, p, n, 0.5), rel=1e-5)
    assert info_nce(a, p, None, 0.5).item() == pytest.approx(
        _hand_infonce(a, p, None, 0.5), rel=1e-5
    )


def test_infonce_masks_duplicate_positives():
    g = torch.Generator().manual_seed(1)
    a, p = torch.randn(3, 5, generator=g), torch.randn(3, 5, generator=g)
    p[2] = p[0]  # rows 0 and 2 share the same gold document
    ids = torch.tensor([7, 8, 7])
    masked = info_nce(a, p, None, 0.1, ids, None)
    # hand: row 0 ignores column 2, row 2 ignores column 0
    an, pn = F.normalize(a, dim=-1), F.normalize(p, dim=-1)
    s = an @ pn.T / 0.1
    keep = [[0, 1], [0, 1, 2], [1, 2]]
    hand = sum(-(s[i, i] - torch.logsumexp(s[i, keep[i]], 0)) for i in range(3)) / 3
    assert masked.item() == pytest.approx(hand.item(), rel=1e-5)
    assert masked.item() < info_nce(a, p, None, 0.1).item()
    # a hard negative carrying the positive's id is masked too
    n = p[[1, 2, 0]].unsqueeze(1)
    nid = ids[[1, 2, 0]].view(3, 1)
    with_hn = info_nce(a, p, n, 0.1, ids, nid)
    assert torch.isfinite(with_hn)


@pytest.mark.parametrize("k,m", [(2, 3), (0, 1), (1, 0), (0, 0)])
def test_clear_identical_embeddings(k, m):
    b, d = 4, 8
    v = torch.randn(d)
    q_en, p, q_l = v.expand(b, d), v.expand(b, d), v.expand(b, d)
    p_hn, q_hn = v.expand(b, k, d), v.expand(b, m, d)
    loss = ClearLoss(tau=0.05)(q_en, p, p_hn, q_l, q_hn)
    expected = 0.4 * math.log(b * (1 + k)) + 0.4 * math.log(b * (1 + m))
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def test_clear_terms_match_hand_and_ablations():
    g = torch.Generator().manual_seed(2)
    b, d, k, m, tau = 3, 5, 2, 1, 0.2
    q_en, p, q_l = (torch.randn(b, d, generator=g) for _ in range(3))
    p_hn, q_hn = torch.randn(b, k, d, generator=g), torch.randn(b, m, d, generator=g)
    t = ClearLoss(tau).terms(q_en, p, p_hn, q_l, q_hn)
    assert t["nce_en"].item() == pytest.approx(_hand_infonce(q_en, p, p_hn, tau), rel=1e-5)
    assert t["cl"].item() == pytest.approx(_hand_infonce(p, q_l, q_hn, tau), rel=1e-5)
    # KL by hand: rows = passages, columns = English / target queries
    pn, qe, ql = (F.normalize(x, dim=-1) for x in (p, q_en, q_l))
    s_en, s_cl = torch.softmax(pn @ qe.T / tau, 1), torch.softmax(pn @ ql.T / tau, 1)
    kl = (s_en * (s_en / s_cl).log()).sum() / b
    assert t["kl"].item() == pytest.approx(kl.item(), rel=1e-5)
    assert clear_kl(p, q_en, q_en, tau).item() == pytest.approx(0.0, abs=1e-6)
    full = ClearLoss(tau)(q_en, p, p_hn, q_l, q_hn)
    assert full.item() == pytest.approx(
        (0.4 * t["nce_en"] + 0.4 * t["cl"] + 0.2 * t["kl"]).item(), rel=1e-5
    )
    fwd = ClearLoss(tau, reverse=False).terms(q_en, p, p_hn, q_l, q_hn)
    assert fwd["cl"].item() == pytest.approx(_hand_infonce(q_l, p, p_hn, tau), rel=1e-5)
    assert ClearLoss(tau, use_kl=False).terms(q_en, p, p_hn, q_l, q_hn)["kl"].item() == 0.0
    assert ClearLoss(tau, use_english=False).terms(q_en, p, p_hn, q_l, q_hn)["nce_en"].item() == 0.0


def test_mine_hard_negatives_skips_gold_and_duplicates():
    pool = torch.eye(4)
    anchors = torch.tensor([[1.0, 0.9, 0.5, 0.0]])
    idx = mine_hard_negatives(anchors, pool, torch.tensor([0]), torch.tensor([0, 1, 2, 3]), 2)
    assert idx.tolist() == [[1, 2]]
    idx = mine_hard_negatives(anchors, pool, torch.tensor([0]), torch.tensor([0, 0, 2, 3]), 1)
    assert idx.tolist() == [[2]]
    with pytest.raises(ValueError, match="lower k"):
        mine_hard_negatives(anchors, pool, torch.tensor([0]), torch.tensor([0, 0, 2, 3]), 3)


def test_lancer_zero_when_languages_share_class_means():
    g = torch.Generator().manual_seed(3)
    base = torch.randn(5, 6, generator=g)
    x = torch.cat([base, base[[4, 3, 2, 1, 0]], base[[1, 0, 3, 2, 4]]])  # same mean per language
    ids = torch.tensor([0] * 5 + [1] * 5 + [2] * 5)
    assert correlation_penalty(x, ids, 3).item() == pytest.approx(0.0, abs=1e-6)


def test_lancer_equals_mean_abs_pearson():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(12, 4, generator=g)
    ids = torch.tensor([0, 1, 2] * 4)
    x[ids == 1] += 0.7
    z = F.one_hot(ids, 3).numpy()
    hand = np.mean([abs(pearsonr(x[:, i].numpy(), z[:, j])[0]) for i in range(4) for j in range(3)])
    assert correlation_penalty(x, ids, 3).item() == pytest.approx(hand, rel=1e-4)


def test_lancer_single_language_is_zero_without_nan():
    x = torch.randn(6, 4, requires_grad=True)
    ids = torch.zeros(6, dtype=torch.long)
    pen = correlation_penalty(x, ids, 3)
    pen.backward()
    assert pen.item() == 0.0
    assert torch.isfinite(x.grad).all()
    # a constant embedding dimension (zero variance) must not give NaN gradients either
    x2 = torch.randn(6, 4)
    x2[:, 1] = 0.5
    x2.requires_grad_(True)
    pen2 = correlation_penalty(x2, torch.tensor([0, 1, 2, 0, 1, 2]), 3)
    pen2.backward()
    assert torch.isfinite(pen2) and torch.isfinite(x2.grad).all()
    with pytest.raises(ValueError, match="lang_ids"):
        correlation_penalty(x, torch.tensor([0, 1, 2, 3, 0, 0]), 3)


def test_stratified_batch_is_balanced():
    import random

    texts, ids = stratified_language_batch(
        {"en": ["a", "b", "c"], "de": ["x"]}, 2, random.Random(0)
    )
    assert ids == [0, 0, 1, 1] and texts[:2] == ["x", "x"]  # de sorts first, resampled
    assert len(set(texts[2:])) == 2 and set(texts[2:]) <= {"a", "b", "c"}


def test_jsd_matches_scipy():
    g = torch.Generator().manual_seed(5)
    za, zb = torch.randn(3, 10, generator=g), torch.randn(3, 10, generator=g)
    got = jsd_distance(za, zb, eps=0.0)
    for i in range(3):
        pa, pb = torch.softmax(za[i], 0).numpy(), torch.softmax(zb[i], 0).numpy()
        assert got[i].item() == pytest.approx(jensenshannon(pa, pb), rel=1e-4)
    assert jsd_distance(za, za, eps=1e-8).max().item() == pytest.approx(1e-4, rel=1e-3)
    # symmetric and bounded by sqrt(log 2)
    assert torch.allclose(got, jsd_distance(zb, za, eps=0.0), atol=1e-6)
    assert (got <= math.sqrt(math.log(2)) + 1e-6).all()


def test_jsd_loss_terms_and_ablations():
    g = torch.Generator().manual_seed(6)
    ze, zt, a, c = (torch.randn(4, 6, generator=g) for _ in range(4))
    jsd = jsd_distance(ze, zt, 1e-8).mean().item()
    nce = _hand_infonce(a, c, None, 0.1)
    assert JSDInfoNCELoss(0.1)(ze, zt, a, c).item() == pytest.approx(jsd + nce, rel=1e-5)
    assert JSDInfoNCELoss(0.1, use_nce=False)(ze, zt, a, c).item() == pytest.approx(jsd, rel=1e-5)
    assert JSDInfoNCELoss(0.1, use_jsd=False)(ze, zt, a, c).item() == pytest.approx(nce, rel=1e-5)
    psq = _hand_infonce(c, a, None, 0.1)
    got = JSDInfoNCELoss(0.1, use_jsd=False, psq=True)(ze, zt, a, c).item()
    assert got == pytest.approx(psq, rel=1e-5)
    with pytest.raises(ValueError, match="nothing to train"):
        JSDInfoNCELoss(use_jsd=False, use_nce=False)


def test_guided_loss_masks_guide_false_negatives():
    g = torch.Generator().manual_seed(7)
    a, p = torch.randn(3, 5, generator=g), torch.randn(3, 5, generator=g)
    # guide says row 1's positive is as close to anchor 0 as anchor 0's own positive
    ga = torch.eye(3)
    gp = torch.tensor([[1.0, 0, 0], [1.0, 0.2, 0], [0, 0, 1.0]])
    got = guided_info_nce(
        a, p, None, ga, gp, None, tau=0.1, contrast_anchors=False, contrast_positives=False
    )
    an, pn = F.normalize(a, dim=-1), F.normalize(p, dim=-1)
    s = an @ pn.T / 0.1
    # no guide similarity exceeds the anchor's own guide positive similarity: nothing masked
    hand = sum(-(s[i, i] - torch.logsumexp(s[i], 0)) for i in range(3)) / 3
    assert got.item() == pytest.approx(hand.item(), rel=1e-5)
    gp2 = torch.tensor([[1.0, 0, 0], [1.0, 0, 0], [0, 0, 1.0]])  # p1 duplicates p0 for the guide
    got2 = guided_info_nce(
        a,
        p,
        None,
        ga,
        gp2,
        None,
        tau=0.1,
        contrast_anchors=False,
        contrast_positives=False,
        margin=0.01,
    )
    # anchor 0: guide(a0, p1) = 1 > 1 - margin -> p1 dropped; anchor 1: its guide positive
    # similarity is 0, so every other candidate (guide 0 > -margin) is dropped
    keep = [[0, 2], [1], [0, 1, 2]]
    hand2 = sum(-(s[i, i] - torch.logsumexp(s[i, keep[i]], 0)) for i in range(3)) / 3
    assert got2.item() == pytest.approx(hand2.item(), rel=1e-5)
    # with guide == model and identical inputs the anchor/positive self pairs are masked
    full = guided_info_nce(a, p, p.unsqueeze(1), a, p, p.unsqueeze(1), tau=0.1)
    assert torch.isfinite(full)

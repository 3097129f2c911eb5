"""Baseline losses against hand computations and their invariants (papers 000-003)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.spatial.distance import jensenshannon
from scipy.stats import pearsonr

from lira.baselines.clear import ClearLoss, clear_kl, rank_window, sample_hard_negatives
from lira.baselines.composition import gist_features, gist_loss, mine_filtered_negatives
from lira.baselines.infonce import info_nce
from lira.baselines.jsd import JSDInfoNCELoss, jsd_distance
from lira.baselines.lancer import (
    correlation_penalty,
    non_parallel_texts,
    stratified_language_batch,
)
from lira.config import ConfigError
from lira.data.types import Record


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
    loss = ClearLoss(tau=0.05, lambdas=(0.5, 0.3, 0.2))(q_en, p, p_hn, q_l, q_hn)
    expected = 0.5 * math.log(b * (1 + k)) + 0.3 * math.log(b * (1 + m))
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def _hand_kl(q_en, q_l, p, tau):
    """CLEAR Eq. 5 by hand: S[i, j] over passages j for query i, KL summed over j, mean over i."""
    qe, ql, pn = (F.normalize(x, dim=-1) for x in (q_en, q_l, p))
    total = 0.0
    for i in range(p.shape[0]):
        s_en = torch.softmax(torch.stack([qe[i] @ pn[j] for j in range(p.shape[0])]) / tau, 0)
        s_cl = torch.softmax(torch.stack([pn[j] @ ql[i] for j in range(p.shape[0])]) / tau, 0)
        total += float((s_en * (s_en / s_cl).log()).sum())
    return total / p.shape[0]


def test_clear_terms_match_hand_and_ablations():
    g = torch.Generator().manual_seed(2)
    b, d, k, m, tau = 3, 5, 2, 1, 0.2
    q_en, p, q_l = (torch.randn(b, d, generator=g) for _ in range(3))
    p_hn, q_hn = torch.randn(b, k, d, generator=g), torch.randn(b, m, d, generator=g)
    t = ClearLoss(tau).terms(q_en, p, p_hn, q_l, q_hn)
    assert t["nce_en"].item() == pytest.approx(_hand_infonce(q_en, p, p_hn, tau), rel=1e-5)
    # reverse scheme (Eq. 3-4): the English passage is the anchor, target queries the candidates
    assert t["cl"].item() == pytest.approx(_hand_infonce(p, q_l, q_hn, tau), rel=1e-5)
    # Eq. 5 indexes rows by queries and columns by passages; the transposed reading differs
    assert t["kl"].item() == pytest.approx(_hand_kl(q_en, q_l, p, tau), rel=1e-5)
    pn, qe, ql = (F.normalize(x, dim=-1) for x in (p, q_en, q_l))
    s_en, s_cl = torch.softmax(pn @ qe.T / tau, 1), torch.softmax(pn @ ql.T / tau, 1)
    transposed = (s_en * (s_en / s_cl).log()).sum().item() / b
    assert abs(transposed - t["kl"].item()) > 1e-3
    assert clear_kl(p, q_en, q_en, tau).item() == pytest.approx(0.0, abs=1e-6)
    lam = (0.5, 0.3, 0.2)  # unequal: a swapped term changes the total
    full = ClearLoss(tau, lambdas=lam)(q_en, p, p_hn, q_l, q_hn)
    hand = (0.5 * _hand_infonce(q_en, p, p_hn, tau) + 0.3 * _hand_infonce(p, q_l, q_hn, tau)
            + 0.2 * _hand_kl(q_en, q_l, p, tau))  # fmt: skip
    assert full.item() == pytest.approx(hand, rel=1e-5)
    fwd = ClearLoss(tau, reverse=False).terms(q_en, p, p_hn, q_l, q_hn)
    assert fwd["cl"].item() == pytest.approx(_hand_infonce(q_l, p, p_hn, tau), rel=1e-5)
    assert ClearLoss(tau, use_kl=False).terms(q_en, p, p_hn, q_l, q_hn)["kl"].item() == 0.0
    assert ClearLoss(tau, use_english=False).terms(q_en, p, p_hn, q_l, q_hn)["nce_en"].item() == 0.0


def _ray(angles_deg):
    """Unit 2-d vectors at the given angles: cos to (1, 0) is cos(angle)."""
    a = torch.tensor(angles_deg, dtype=torch.float64) * math.pi / 180
    return torch.stack([a.cos(), a.sin()], 1).float()


def test_clear_negatives_come_from_the_rank_window(caplog):
    # pool ranked by angle to the anchor: item i has rank i + 1 (item 0 is the gold: skipped)
    pool = _ray([0, 5, 10, 15, 20, 25, 30, 35])
    anchor = _ray([0])
    ids = torch.arange(8)
    seen = set()
    for seed in range(30):
        g = torch.Generator().manual_seed(seed)
        idx = sample_hard_negatives(anchor, pool, torch.tensor([0]), ids, 2, (3, 5), g)
        assert len(set(idx[0].tolist())) == 2
        seen |= set(idx[0].tolist())
    # ranks 3-5 among the 7 non-gold items are items 3, 4, 5 (rank r = item r)
    assert seen == {3, 4, 5}
    with caplog.at_level("INFO", logger="lira.baselines.clear"):
        idx = sample_hard_negatives(anchor, pool, torch.tensor([0]), ids, 2, (30, 100))
    assert sorted(idx[0].tolist()) == [6, 7]  # window clamped to the last ranks 6-7
    assert "rank window 30-100 clamped to 6-7" in caplog.text
    assert rank_window(30, 100, 1000, 5) == (30, 100)
    assert rank_window(30, 100, 60, 5) == (30, 60)
    assert rank_window(30, 100, 20, 5) == (16, 20)
    with pytest.raises(ConfigError, match=r"'baselines.clear.negatives': asked for 1 .*lower it"):
        sample_hard_negatives(anchor, pool, torch.tensor([0]), torch.zeros(8).long(), 1)


def test_composition_negatives_apply_window_and_filters(caplog):
    # query at 0 deg, positive at 20 deg (cos 0.940): a negative needs cos <= 0.8 and
    # cos < 0.95 * 0.940 = 0.893; cos(30) = 0.866, cos(36.87) = 0.8, cos(40) = 0.766
    q, p = _ray([0]), _ray([20])
    pool = _ray([20, 5, 10, 30, 40, 45, 50, 60, 70, 80])  # item 0 is the gold
    ids = torch.arange(10)
    # ranks (non-gold): 5->1, 10->2, 30->3, 40->4, 45->5, 50->6, 60->7, ...
    got = mine_filtered_negatives(q, pool, p, torch.tensor([0]), ids, 2, (3, 9), 0.8, 0.95)
    assert got[0].tolist() == [4, 5]  # rank 3 (30 deg, cos 0.866 > 0.8) is filtered out
    got = mine_filtered_negatives(q, pool, p, torch.tensor([0]), ids, 2, (1, 9), 1.0, 0.95)
    assert got[0].tolist() == [3, 4]  # relative margin alone: 0.866 < 0.893 passes
    with caplog.at_level("INFO"):
        got = mine_filtered_negatives(q, pool, p, torch.tensor([0]), ids, 3, (50, 300))
    assert got[0].tolist() == [7, 8, 9]  # window clamped to ranks 7-9
    assert "rank window 50-300 clamped to 7-9" in caplog.text
    with caplog.at_level("WARNING"):  # only ranks 1-2 searched first; fill keeps k per row
        got = mine_filtered_negatives(q, pool, p, torch.tensor([0]), ids, 9, (1, 2))
    assert len(got[0]) == 9 and "filled with filtered-out" in caplog.text


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


def test_non_parallel_texts_give_each_group_to_one_language():
    recs = {
        lang: [
            Record(f"{lang}:{g}:{i}", f"{lang}-{g}-{i}", lang) for g in range(6) for i in range(2)
        ]
        for lang in ("en", "de", "es")
    }

    def group(r):
        return r.id.split(":")[1]

    pools = non_parallel_texts(recs, group, seed=3)
    owners = {}
    for lang, texts in pools.items():
        assert all(t.startswith(lang + "-") for t in texts)
        for t in texts:
            owners.setdefault(t.split("-")[1], set()).add(lang)
    assert all(len(v) == 1 for v in owners.values()) and len(owners) == 6
    assert sorted(len(v) for v in pools.values()) == [4, 4, 4]  # 2 groups x 2 sentences each
    assert pools == non_parallel_texts(recs, group, seed=3)
    with pytest.raises(ConfigError, match=r"'data.max_train_queries': LANCER.* got none\)"):
        non_parallel_texts({k: v[:2] for k, v in recs.items()}, group)


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
    p_en, p_tgt, q_en = (torch.randn(4, 6, generator=g) for _ in range(3))
    jsd = jsd_distance(p_en, p_tgt, 1e-8).mean().item()  # Eq. 6 on the passage pair
    nce = _hand_infonce(p_tgt, q_en, None, 0.1)  # Eq. 7: anchor p_tgt, English queries
    loss = JSDInfoNCELoss(0.1, jsd_weight=0.5)
    assert loss(p_en, p_tgt, q_en).item() == pytest.approx(0.5 * jsd + nce, rel=1e-5)
    # the roles are not interchangeable: queries as anchors, or JSD on (q_en, p_tgt), differ
    assert abs(_hand_infonce(q_en, p_tgt, None, 0.1) - nce) > 1e-3
    assert abs(jsd_distance(q_en, p_tgt, 1e-8).mean().item() - jsd) > 1e-3
    only_jsd = JSDInfoNCELoss(0.1, use_nce=False)(p_en, p_tgt, q_en).item()
    assert only_jsd == pytest.approx(jsd, rel=1e-5)
    only_nce = JSDInfoNCELoss(0.1, use_jsd=False)(p_en, p_tgt, q_en).item()
    assert only_nce == pytest.approx(nce, rel=1e-5)
    psq = JSDInfoNCELoss(0.1, use_jsd=False, psq=True)(p_en, p_tgt, q_en).item()
    assert psq == pytest.approx(_hand_infonce(p_tgt, p_en, None, 0.1), rel=1e-5)
    # rows sharing a gold passage are not each other's negatives
    ids = torch.tensor([0, 1, 0, 2])
    masked = JSDInfoNCELoss(0.1, use_jsd=False)(p_en, p_tgt, q_en, ids).item()
    assert masked == pytest.approx(info_nce(p_tgt, q_en, None, 0.1, ids).item(), rel=1e-6)
    assert masked < nce
    with pytest.raises(ValueError, match="nothing to train"):
        JSDInfoNCELoss(use_jsd=False, use_nce=False)


class _ToyEncoder(torch.nn.Module):
    """A lookup-table encoder with the Backbone's call: (texts, kind) -> unit vectors."""

    def __init__(self, vocab: list[str], d: int, seed: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.index = {t: i for i, t in enumerate(vocab)}
        self.emb = torch.nn.Parameter(torch.randn(len(vocab), d, generator=g))
        self.shift = torch.nn.Parameter(torch.randn(d, generator=g))

    def forward(self, texts, kind="query"):
        x = self.emb[[self.index[t] for t in texts]]
        return F.normalize(x + self.shift if kind == "query" else x, dim=-1)


def _hand_gist(model, guide, cols, tau):
    """GISTEmbed (Solatorio 2024) by hand: guide-masked in-batch CE over positives, anchors,
    positive-positive pairs and negatives; returns (loss, masked candidates other than self
    pairs)."""
    kinds = ["query"] + ["document"] * (len(cols) - 1)
    e = [model(c, kind=k) for c, k in zip(cols, kinds)]
    ge = [guide(c, kind=k) for c, k in zip(cols, kinds)]
    a, p, negs = e[0], e[1], e[2:]
    ga, gp, gnegs = ge[0], ge[1], ge[2:]
    b, total, masked = a.shape[0], 0.0, 0
    for i in range(b):
        thr = (ga[i] @ gp[i]).item()
        logits = []
        blocks = [(a[i], p, ga[i], gp, True), (a[i], a, ga[i], ga, False),
                  (p[i], p, gp[i], gp, False)]  # fmt: skip
        blocks += [(a[i], n, ga[i], gn, False) for n, gn in zip(negs, gnegs)]
        for first, (x, cands, gx, gcands, protect) in enumerate(blocks):
            for j in range(b):
                if (gx @ gcands[j]).item() > thr and not (protect and j == i):
                    masked += int(not (first in (1, 2) and j == i))  # not a self pair
                    continue
                logits.append((x @ cands[j]) / tau)
        # the positive is the first logit kept for row i at column i of block 0
        pos = (a[i] @ p[i]) / tau
        total = total - (pos - torch.logsumexp(torch.stack(logits), 0))
    return total / b, masked


def test_sentence_transformers_gist_loss_matches_hand_and_its_gradient():
    """Our trainer's GIST loss is sentence-transformers' CachedGISTEmbedLoss (paper 001 trained
    with it): on a batch its value and gradient equal the GISTEmbed definition by hand."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    vocab = [f"t{i}" for i in range(20)]
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"[UNK]": 0}, "[UNK]")))
    model, guide = _ToyEncoder(vocab, 6, 0), _ToyEncoder(vocab, 6, 1)
    cols = [["t0", "t1", "t2", "t3"], ["t4", "t5", "t4", "t7"],  # rows 0 and 2 share a positive
            ["t8", "t9", "t10", "t11"], ["t12", "t13", "t14", "t5"]]  # fmt: skip
    kinds = ["query"] + ["document"] * 3
    tau = 0.05
    hand, masked = _hand_gist(model, guide, cols, tau)
    assert masked > 0  # the guide masks some candidates: the comparison is not vacuous
    hand.backward()
    want = model.emb.grad.clone()
    model.zero_grad()
    loss = gist_loss(model, guide, tok, 32, tau, mini_batch=2)  # two mini-batches of 2
    got = loss(gist_features(loss, cols, kinds, torch.device("cpu")), None)
    assert got.item() == pytest.approx(hand.item(), rel=1e-5)
    got.backward()  # the cached loss back-propagates from a hook, re-embedding mini-batches
    torch.testing.assert_close(model.emb.grad, want, rtol=1e-4, atol=1e-6)
    assert guide.emb.grad is None

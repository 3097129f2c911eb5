"""Fusion head: shapes, unit norm, the gate's score fusion, English start, ablations, packing."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from arca.adaptor import Adaptor
from lasr.fusion import (
    BLOCKS,
    GATE_FEATURES,
    MAX_LOG_GATE,
    FusionHead,
    LaSRNet,
    gate_features,
    pack,
    text_type,
)
from lasr.losses import soft_ndcg_loss, standardize_rows
from lira.compat import HEAD_BLOCK_COLUMNS, head_state_with_blocks


def _feats(b: int, english_query: bool = False, doc: bool = False) -> torch.Tensor:
    en = torch.full((b,), 1.0 if english_query or doc else 0.0)
    chosen = torch.tensor([[5.5, 5.5, 5.5, 0.0]]).repeat(b, 1)
    return gate_features(en, torch.zeros(b), chosen, doc)


def test_untrained_head_is_the_fixed_score_fusion():
    """ẑ = normalize([n(E_en); r·n(E_lr)]) with r = gate_init: cos = (cos_en + r² cos_lr)/(1+r²)."""
    torch.manual_seed(0)
    head = FusionHead(12, 8, fusion_dim=16, layers=1, heads=2, dropout=0.0, gate_init=2.0).eval()
    e_en, e_lr = torch.randn(5, 12), torch.randn(5, 8)
    z = head(e_en, e_lr, _feats(5))
    assert z.shape == (5, 20) and head.dim == 20
    assert torch.allclose(z.norm(dim=-1), torch.ones(5), atol=1e-6)
    want = F.normalize(torch.cat([F.normalize(e_en, dim=-1), 2.0 * F.normalize(e_lr, dim=-1)], 1))
    assert torch.allclose(z, want, atol=1e-6)
    cos_en = F.normalize(e_en, dim=-1) @ F.normalize(e_en, dim=-1).T
    cos_lr = F.normalize(e_lr, dim=-1) @ F.normalize(e_lr, dim=-1).T
    assert torch.allclose(z @ z.T, (cos_en + 4.0 * cos_lr) / 5.0, atol=1e-5)


def test_paper_reading_keeps_english_queries_on_the_backbone():
    head = FusionHead(6, 4, fusion_dim=8, layers=1, heads=2, dropout=0.0, gate_init=1.0).eval()
    r_query = head.weight(_feats(3, english_query=True))
    r_doc = head.weight(_feats(3, doc=True))
    r_foreign = head.weight(_feats(3))
    assert torch.equal(r_query, torch.zeros(3, 1))  # English queries: the backbone, always
    torch.nn.init.normal_(head.gate_mlp[-1].weight)  # a trained gate cannot change that
    with torch.no_grad():
        head.type_logw.add_(1.0)  # nor can the learned table: the block is off
    assert torch.equal(head.weight(_feats(3, english_query=True)), torch.zeros(3, 1))
    assert torch.allclose(r_doc, torch.ones(3, 1)) and torch.allclose(r_foreign, torch.ones(3, 1))
    assert gate_features(torch.ones(1), torch.zeros(1), torch.zeros(1, 4), False).shape == (
        1,
        GATE_FEATURES,
    )


def test_stream_ablation_zeroes_the_multilingual_half_and_errors():
    torch.manual_seed(0)
    no_lr = FusionHead(6, 4, fusion_dim=8, layers=1, heads=2, dropout=0.0, use_lr=False).eval()
    e_en = torch.randn(3, 6)
    a, b = no_lr(e_en, torch.randn(3, 4), _feats(3)), no_lr(e_en, torch.randn(3, 4), _feats(3))
    assert torch.allclose(a, b) and torch.allclose(a[:, 6:], torch.zeros(3, 4))
    with pytest.raises(ValueError, match="at least one stream"):
        FusionHead(6, 4, use_en=False, use_lr=False)
    with pytest.raises(ValueError, match="gate_init"):
        FusionHead(6, 4, fusion_dim=8, heads=2, gate_init=0.0)


def test_gradients_reach_every_trainable_parameter_and_packing_roundtrips():
    torch.manual_seed(0)
    head = FusionHead(6, 4, fusion_dim=8, layers=1, heads=2, dropout=0.0, raw_view=True,
                      d_g=5, d_gt=5)  # fmt: skip
    net = LaSRNet(head, Adaptor(5, 4, hidden=8))
    e_en, bins, feats = torch.randn(3, 6), torch.randn(3, 2, 5), _feats(3)
    z = net(e_en, bins, feats)
    (z * torch.randn_like(z)).sum().backward()
    missing = [n for n, p in net.named_parameters() if p.grad is None]
    assert missing == ["head.logit_scale"], missing  # the loss's temperature, not part of ẑ
    assert torch.allclose(net.forward_packed(pack(e_en, bins, feats, e_en, bins.mean(1))), z)
    e_raw, g_tr = torch.randn(3, 6), torch.randn(3, 5)
    z_raw = net(e_en, bins, feats, e_raw, g_tr)
    assert not torch.allclose(z_raw[:, -5:], z[:, -5:])  # the translation block reads g_tr
    assert torch.allclose(net.forward_packed(pack(e_en, bins, feats, e_raw, g_tr)), z_raw)
    (z_raw * torch.randn_like(z_raw)).sum().backward()
    assert head.raw_gate.weight.grad is not None and head.raw_gate.weight.grad.abs().sum() > 0


def test_raw_view_mixes_the_untranslated_text_into_the_english_half():
    """English half = n(n(h(y*)) + w·n(h(x))), w = exp(ω(features)) = 1 at start; the identity
    when h(x) = h(y*) (English or untranslated text); nothing with raw_view=False."""
    torch.manual_seed(0)
    head = FusionHead(6, 4, fusion_dim=8, layers=1, heads=2, dropout=0.0, raw_view=True).eval()
    e_en, e_raw, e_lr = torch.randn(3, 6), torch.randn(3, 6), torch.randn(3, 4)
    feats = _feats(3)
    want = F.normalize(F.normalize(e_en, dim=-1) + F.normalize(e_raw, dim=-1), dim=-1)
    assert torch.allclose(head.english(e_en, e_raw, feats), want, atol=1e-6)
    z = head(e_en, e_lr, feats, e_raw)
    assert torch.allclose(z[:, :6], want / 2**0.5, atol=1e-6)  # r = 1: both halves weigh 1
    assert torch.allclose(head(e_en, e_lr, feats, e_en), head(e_en, e_lr, feats), atol=1e-6)
    with torch.no_grad():  # a large w: the backbone's own view of x
        head.raw_gate.bias.fill_(5.0)
    near = head.english(e_en, e_raw, feats)
    assert (F.cosine_similarity(near, e_raw) > F.cosine_similarity(want, e_raw)).all()
    off = FusionHead(6, 4, fusion_dim=8, layers=1, heads=2, dropout=0.0).eval()  # the default
    assert torch.allclose(off.english(e_en, e_raw, feats), F.normalize(e_en, dim=-1), atol=1e-6)
    feats = gate_features(torch.zeros(2), torch.ones(2), torch.zeros(2, 4), False,
                          torch.tensor([0.25, 0.5]))  # fmt: skip
    assert feats[:, -1].tolist() == [0.25, 0.5] and _feats(2)[:, -1].tolist() == [0.0, 0.0]


def test_regate_applies_the_current_gate_to_a_cached_embedding():
    """regate(ẑ cached, feats) keeps ẑ's two halves and swaps in the live r(feats), with
    gradient to the gate: = ẑ while the gate is unchanged, = a fresh forward after it moved."""
    torch.manual_seed(0)
    head = FusionHead(6, 4, fusion_dim=8, layers=1, heads=2, dropout=0.0, gate_init=2.0).eval()
    e_en, e_lr, feats = torch.randn(3, 6), torch.randn(3, 4), _feats(3, doc=True)
    cached = head(e_en, e_lr, feats).detach()
    assert torch.allclose(head.regate(cached, feats), cached, atol=1e-6)
    with torch.no_grad():
        head.type_logw[3, 1] += math.log(3.0)  # English documents' r: 2 -> 6
    fresh = head(e_en, e_lr, feats)
    assert torch.allclose(head.regate(cached, feats), fresh, atol=1e-6)
    head.regate(cached, feats)[:, 6:].sum().backward()
    assert head.type_logw.grad is not None and head.type_logw.grad[3, 1].abs() > 0
    assert torch.equal(head.type_logw.grad[:3], torch.zeros(3, 5))  # only their own row


def test_scale_free_scores_take_the_score_scale_away_from_the_gate():
    """An English query (r_q = 0) scores English documents (one shared r_d) cos_en/sqrt(1 + r_d²):
    on raw cosines the soft-nDCG loss falls as r_d shrinks (the gate learns a temperature);
    on standardised rows (lasr.scale_free) the loss does not depend on r_d at all."""
    torch.manual_seed(0)
    head = FusionHead(6, 4, fusion_dim=8, layers=1, heads=2, dropout=0.0).eval()
    q = head(torch.randn(1, 6), torch.randn(1, 4), _feats(1, english_query=True))
    d_en, d_lr = torch.randn(9, 6), torch.randn(9, 4)
    d_en[0] = q[0, :6] + 0.3 * torch.randn(6)  # the positive: near the query
    labels = torch.zeros(1, 9)
    labels[0, 0] = 1
    docs = head(d_en, d_lr, _feats(9, doc=True)).detach()

    def grad(scale_free: bool) -> float:
        head.zero_grad()
        s = q.detach() @ head.regate(docs, _feats(9, doc=True)).T
        if scale_free:
            s = standardize_rows(s, torch.ones_like(s, dtype=torch.bool), 0.1)
        soft_ndcg_loss(s, labels, safe_negatives=False).backward()
        return float(head.type_logw.grad[3, 1])  # English documents' multilingual weight

    assert grad(scale_free=False) > 1e-4  # descent lowers r_d: every score gets sharper
    assert abs(grad(scale_free=True)) < 1e-6


def test_block_weights_g_block_and_the_fused_cosine_by_hand():
    """ẑ = normalize([w_en n(E_en); w_lr n(E_lr); w_g n(ḡ(x)); w_gt n(ḡ(y*))]) per text type,
    so the cosine of a query and a document is Σ_b w_b(q) w_b(d) cos_b / (‖w(q)‖ ‖w(d)‖); an
    off block is an exact 0 that neither the table nor the per-text MLP can turn on."""
    torch.manual_seed(0)
    head = FusionHead(6, 4, fusion_dim=8, layers=1, heads=2, dropout=0.0, d_g=5, d_gt=5).eval()
    assert head.dim == 20 and head.splits == (6, 4, 5, 5, 0)  # no hx block (raw_h off)
    doc = [1.0, 1.0, 1.0, 1.0, 0.0]
    table = torch.tensor([[1.0, 0.5, 2.0, 0.25, 0.0], [1.0, 0.0, 3.0, 0.0, 0.0], doc, doc])
    head.set_weights(table)
    assert torch.allclose(head.table(), table, atol=1e-6)
    q = [torch.randn(4, 6), torch.randn(4, 4), torch.randn(4, 5), torch.randn(4, 5)]
    d = [torch.randn(7, 6), torch.randn(7, 4), torch.randn(7, 5), torch.randn(7, 5)]
    zq = head(q[0], q[1], _feats(4), g_vec=q[2], g_tr=q[3])  # foreign queries: row 0
    zd = head(d[0], d[1], _feats(7, doc=True), g_vec=d[2], g_tr=d[3])  # English documents: row 3
    cos = [F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T for a, b in zip(q, d)]
    want = (1.0 * cos[0] + 0.5 * cos[1] + 2.0 * cos[2] + 0.25 * cos[3]) / (5.3125**0.5 * 2)
    assert torch.allclose(zq @ zd.T, want, atol=1e-5)
    ze = head(q[0], q[1], _feats(4, english_query=True), g_vec=q[2])  # row 1: lr and gt off
    assert torch.equal(ze[:, 6:10], torch.zeros(4, 4)) and torch.equal(
        ze[:, 15:], torch.zeros(4, 5)
    )
    torch.nn.init.normal_(head.gate_mlp[-1].weight)
    with torch.no_grad():
        head.type_logw.add_(2.0)
    ze = head(q[0], q[1], _feats(4, english_query=True), g_vec=q[2])
    assert torch.equal(ze[:, 6:10], torch.zeros(4, 4)) and ze[:, 10:15].abs().sum() > 0
    assert torch.equal(ze[:, 15:], torch.zeros(4, 5))
    with pytest.raises(ValueError, match="g_vec"):
        head(q[0], q[1], _feats(4))
    with pytest.raises(ValueError, match=">= 0"):
        head.set_weights(-table)


def test_a_head_saved_with_four_blocks_loads_and_embeds_bit_identically():
    """A head saved before h's block on the untranslated text (4 columns in its tables and the
    per-text MLP's last layer) loads through :func:`lira.compat.head_state_with_blocks` with
    that block off, and embeds bit for bit as the 4-block head did (ẑ computed from the saved
    tensors, trained gate and Δ included); without the padding it does not load."""
    torch.manual_seed(0)
    kw = dict(fusion_dim=8, layers=1, heads=2, dropout=0.0, raw_view=True, d_g=5, d_gt=5)
    head = FusionHead(6, 4, **kw).eval()
    head.set_weights(torch.tensor([[1.0, 0.5, 2.0, 0.25, 0.0], [1.0, 0.0, 3.0, 0.0, 0.0]]
                                  + [[1.0, 1.0, 1.0, 1.0, 0.0]] * 2))  # fmt: skip
    for p in (head.gate_mlp[-1].weight, head.delta.weight, head.raw_gate.weight):
        torch.nn.init.normal_(p, std=0.3)
    saved = {k: v.clone() for k, v in head.state_dict().items()}
    for name in HEAD_BLOCK_COLUMNS:  # what a 4-block head saved
        saved[name] = saved[name][:, :4] if name.startswith("type_") else saved[name][:4]
    loaded = FusionHead(6, 4, **kw).eval()
    with pytest.raises(RuntimeError, match="size mismatch"):
        loaded.load_state_dict(saved)
    loaded.load_state_dict(head_state_with_blocks(saved, len(BLOCKS)))
    assert loaded.type_on[:, 4].eq(0).all() and loaded.dim == 20
    e_en, e_lr, e_raw = torch.randn(6, 6), torch.randn(6, 4), torch.randn(6, 6)
    g_vec, g_tr = torch.randn(6, 5), torch.randn(6, 5)
    feats = torch.cat([_feats(2), _feats(2, english_query=True), _feats(2, doc=True)])
    feats[:, 4:] = torch.rand(6, GATE_FEATURES - 4)  # critic scores, sim, disagree
    z = loaded(e_en, e_lr, feats, e_raw, g_vec, g_tr)
    t = text_type(feats)
    mlp = F.linear(loaded.gate_mlp[:2](feats), saved["gate_mlp.2.weight"], saved["gate_mlp.2.bias"])
    w = (saved["type_logw"][t] + mlp).clamp(-MAX_LOG_GATE, MAX_LOG_GATE).exp()
    w = w * saved["type_on"][t]  # the 4-block head's w_b(x) [6, 4]
    blocks = loaded.blocks(e_en, e_lr, feats, e_raw, g_vec, g_tr)
    assert blocks[4].shape == (6, 0)
    want = F.normalize(torch.cat([w[:, i : i + 1] * b for i, b in enumerate(blocks[:4])], -1))
    assert torch.equal(z, want)

"""The validation fit of LaSR's block weights: dense nDCG = pytrec_eval's, the grid search finds
the known best fusion, and LiRA at step 0 ranks exactly as the fitted fixed fusion."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from arca.adaptor import Adaptor
from lasr.fixed_fusion import block_cosines, fit_fusion, fitted_table
from lasr.fusion import FusionHead, LaSRNet, gate_features
from lira.metrics import ndcg_dense, ndcg_of_scores


def _feats(b: int, english: bool, doc: bool) -> torch.Tensor:
    chosen = torch.tensor([[5.5, 5.5, 5.5, 0.0]]).repeat(b, 1)
    return gate_features(torch.full((b,), float(english)), torch.zeros(b), chosen, doc)


def test_dense_ndcg_equals_pytrec_eval():
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(40, 30, generator=gen, dtype=torch.float64)
    labels = (torch.rand(40, 30, generator=gen) < 0.08).float()
    labels[0] = 0  # a query without a relevant document scores 0 in both
    for k in (1, 5, 10):
        want = ndcg_of_scores(scores.numpy(), labels.numpy(), k)
        got = ndcg_dense(scores, labels, k).numpy()
        assert abs(got - want).max() < 1e-9, k


def test_fit_finds_the_informative_block_and_reports_each_block_alone():
    """Block 2 ranks the relevant document first, block 0 is noise, block 1 anti-correlated:
    the fit must put its weight on block 2 and beat every block alone (or tie the best)."""
    gen = torch.Generator().manual_seed(1)
    q, d = 30, 20
    labels = torch.zeros(q, d)
    labels[torch.arange(q), torch.arange(q) % d] = 1
    cos = torch.randn(3, q, d, generator=gen) * 0.1
    cos[2] += 0.5 * labels
    cos[1] -= 0.5 * labels
    groups = {"de": list(range(15)), "ru": list(range(15, 30))}
    fit = fit_fusion(cos, labels, groups, [0.0, 0.5, 1.0, 2.0], k=10)
    assert fit.weights[2] > 0 and fit.weights[1] == 0.0
    assert fit.score >= max(fit.parts.values()) - 1e-9
    assert fit.parts["g"] > fit.parts["en"] > fit.parts["lr"]
    assert set(fit.by_lang) == {"de", "ru"}
    only_en = fit_fusion(cos, labels, groups, [0.0, 1.0], allowed=(True, False, False))
    assert only_en.weights == (1.0, 0.0, 0.0) and set(only_en.parts) == {"en"}


def test_step_zero_is_the_fitted_fixed_fusion_by_hand():
    """With the fitted table, ẑ_q · ẑ_d = Σ_b λ_b cos_b(q, d) / (‖λ‖ √3) for every foreign and
    English query against English documents (hand computation), so rankings are the fusion's."""
    torch.manual_seed(0)
    head = FusionHead(6, 4, fusion_dim=8, layers=1, heads=2, dropout=0.0, d_g=5)
    net = LaSRNet(head, Adaptor(5, 4, hidden=8)).eval()
    lam = {"foreign": (1.0, 0.25, 4.0), "en": (1.0, 0.0, 2.0)}
    head.set_weights(fitted_table(lam["foreign"], lam["en"]))
    d = (torch.randn(9, 6), torch.randn(9, 2, 5), _feats(9, True, True), torch.randn(9, 6))
    for kind, english in (("foreign", False), ("en", True)):
        q = (torch.randn(4, 6), torch.randn(4, 2, 5), _feats(4, english, False), torch.randn(4, 6))
        q = (q[0], q[1], q[2], q[0])  # raw view off: e_raw = e_en
        d = (d[0], d[1], d[2], d[0])
        cos = block_cosines(net, q, d)
        zq, zd = net(*q), net(*d)
        want = torch.einsum("b,bqd->qd", torch.tensor(lam[kind]), cos)
        norm = torch.tensor(lam[kind]).norm() * 3**0.5
        assert torch.allclose(zq @ zd.T, want / norm, atol=1e-5), kind
        # block cosines are those of the unit blocks: the English half is n(h), g's n(mean bins)
        want0 = F.normalize(q[0], dim=-1) @ F.normalize(d[0], dim=-1).T
        assert torch.allclose(cos[0], want0, atol=1e-6), (kind, (cos[0] - want0).abs().max())
        g_q, g_d = F.normalize(q[1].mean(1), dim=-1), F.normalize(d[1].mean(1), dim=-1)
        assert torch.allclose(cos[2], g_q @ g_d.T, atol=1e-6)


def test_foreign_documents_take_the_foreign_queries_weights():
    """An English query against a foreign document (En→L) scores Σ_b λ_en,b λ_f,b cos_b /
    (‖λ_en‖ ‖λ_f‖): a foreign document is embedded with the foreign queries' fitted row, not 1
    on every block (on xquad_minilm's validation En→L: 74.0 with 1s, 82.3 with the row)."""
    torch.manual_seed(0)
    head = FusionHead(6, 4, fusion_dim=8, layers=1, heads=2, dropout=0.0, d_g=5)
    net = LaSRNet(head, Adaptor(5, 4, hidden=8)).eval()
    lam_f, lam_en = (0.0, 0.5, 2.0), (1.0, 4.0, 1.0)
    head.set_weights(fitted_table(lam_f, lam_en))
    assert torch.equal(head.table()[2], torch.tensor(lam_f))  # foreign document row
    assert torch.equal(head.table()[3], torch.ones(3))  # English documents: 1 on every block
    q = (torch.randn(4, 6), torch.randn(4, 2, 5), _feats(4, True, False), None)
    q = (q[0], q[1], q[2], q[0])
    d = (torch.randn(7, 6), torch.randn(7, 2, 5), _feats(7, False, True), None)
    d = (d[0], d[1], d[2], d[0])
    cos = block_cosines(net, q, d)
    want = torch.einsum("b,bqd->qd", torch.tensor(lam_en) * torch.tensor(lam_f), cos)
    norm = torch.tensor(lam_en).norm() * torch.tensor(lam_f).norm()
    assert torch.allclose(net(*q) @ net(*d).T, want / norm, atol=1e-5)
    assert fitted_table(None, lam_en)[2].tolist() == [1.0, 1.0, 1.0]  # not fitted: 1s

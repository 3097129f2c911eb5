"""``arca.objective: distill`` (issue 39, item 4): the Adaptor maps g(y) to h(y) on English text."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from arca.adaptor import Adaptor, ridge_fit
from arca.config import ArcaConfig
from arca.data import ArcaItem
from arca.trainer import ArcaTrainer
from lira.config import ConfigError

from .conftest import make_items


def test_ridge_fit_is_the_closed_form_by_hand():
    rng = np.random.default_rng(0)
    g = rng.normal(size=(50, 6))
    h = g @ rng.normal(size=(6, 4)) + 0.3 + 0.01 * rng.normal(size=(50, 4))
    lam = 2.0
    gc, hc = g - g.mean(0), h - h.mean(0)
    w_hand = np.linalg.solve(gc.T @ gc + lam * np.eye(6), gc.T @ hc)
    b_hand = h.mean(0) - g.mean(0) @ w_hand
    w, b = ridge_fit(torch.tensor(g), torch.tensor(h), lam)
    assert np.allclose(w.numpy(), w_hand, atol=1e-5) and np.allclose(b.numpy(), b_hand, atol=1e-5)


def test_gradient_distillation_matches_the_ridge_solution_on_a_toy_case():
    torch.manual_seed(0)
    g = torch.randn(64, 8)
    h = g @ torch.randn(8, 5) + 0.5
    w, b = ridge_fit(g, h, 1e-6)
    a = Adaptor(8, 5, linear=True)
    opt = torch.optim.Adam(a.parameters(), lr=0.05)
    losses = []
    for _ in range(600):
        loss = ((a.embed_g(g.unsqueeze(1)) - h) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 1e-3 * losses[0]
    assert torch.allclose(a.mlp.weight.T, w, atol=1e-2) and torch.allclose(a.mlp.bias, b, atol=1e-2)


def test_distill_config():
    ArcaConfig(objective="distill", distill_solver="ridge", distill_ridge=0.5)
    with pytest.raises(ConfigError, match="anchor_target"):
        ArcaConfig(objective="distill", anchor_target="bins")
    with pytest.raises(ConfigError, match="distill_ridge"):
        ArcaConfig(objective="distill", distill_ridge=-1)
    with pytest.raises(ValueError, match="linear"):
        Adaptor(4, 4, linear=True, residual=True)


def test_distill_training_lowers_the_loss_on_held_out_english(build_model, xquad_pairs, tmp_path):
    from lira.translation.types import Candidate

    items = make_items(xquad_pairs)
    train = items[:72]
    # held-out English text y as its own source: cos(A(g(y)), h(y)) is what distill fits
    held = [ArcaItem(en, "en", [Candidate("gold", en, None)]) for _, en in xquad_pairs[72:]]
    cfg = ArcaConfig(objective="distill", steps=30, batch_size=8, log_every=5, save_every=100,
                     anchor_contrast=0.1)  # fmt: skip
    trainer = ArcaTrainer(cfg, build_model(cfg), train, tmp_path / "arca", eval_items=held,
                          distill_texts=["The river flows north.", "A small town."])  # fmt: skip
    before = trainer.evaluate(held)
    torch.manual_seed(1)
    after = trainer.train().summary["eval"]
    first = sum(h["l_anchor"] for h in trainer.history[:5]) / 5
    last = sum(h["l_anchor"] for h in trainer.history[-5:]) / 5
    assert last < first  # 1 - cos(A(g(y)), h(y)) on the training English
    assert after["cos"] > before["cos"] + 0.05  # and on English it never saw (0.001 -> 0.080)


def test_ridge_adaptor_is_fitted_once_then_kept(build_model, xquad_pairs, tmp_path):
    items = make_items(xquad_pairs[:24])
    cfg = ArcaConfig(objective="distill", distill_solver="ridge", distill_ridge=1.0, steps=2,
                     batch_size=4, log_every=1, save_every=100)  # fmt: skip
    model = build_model(cfg)
    english = [c.text for it in items for c in it.candidates]
    assert model.fit_ridge(english, 1.0) == len(set(english))
    uniq = list(dict.fromkeys(english))
    g = model.pooled_sources(uniq).mean(1)
    w, b = ridge_fit(g, model.english_targets(uniq), 1.0)
    assert torch.allclose(model.adaptor.embed_g(g.unsqueeze(1)), g @ w + b, atol=1e-4)
    weight = model.adaptor.mlp.weight.clone()
    ArcaTrainer(cfg, model, items, tmp_path / "arca").train()
    assert torch.equal(model.adaptor.mlp.weight, weight)  # the Actor trains, the map stays

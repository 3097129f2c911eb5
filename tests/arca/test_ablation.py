"""Table 5's critic ablations are trained into Arca (``arca.use_llm_critic`` /
``arca.use_embedding_critic``): the Actor's features, the reward (Eq. 7) and, for the embedding
critic, the anchor loss (Eq. 5) lose the removed critic, in training and at selection."""

from __future__ import annotations

import pytest
import torch

from arca.config import ArcaConfig
from arca.data import ArcaItem
from arca.losses import arca_reward
from arca.model import ArcaModel
from arca.trainer import ArcaTrainer
from lira.translation.types import NEUTRAL_SCORE, Candidate

from .conftest import make_items

pytestmark = pytest.mark.slow


def _permuted_scores(items: list[ArcaItem], seed: int = 0) -> list[ArcaItem]:
    """The same sources and candidate texts with other (random, partly missing) critic scores."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i, it in enumerate(items):
        cands = []
        for k, c in enumerate(it.candidates or []):
            new = tuple(float(v) for v in torch.randint(1, 11, (3,), generator=g))
            cands.append(Candidate(c.translator, c.text, None if (i + k) % 3 == 0 else new))
        out.append(ArcaItem(it.source, it.lang, cands))
    return out


def _swapped_texts(items: list[ArcaItem]) -> list[ArcaItem]:
    """Each source's candidate texts reversed, each slot keeping its critic scores (so only the
    similarities sim_k change place)."""
    out = []
    for it in items:
        cands = it.candidates or []
        texts = [c.text for c in cands][::-1]
        kept = [Candidate(c.translator, t, c.scores) for c, t in zip(cands, texts, strict=True)]
        out.append(ArcaItem(it.source, it.lang, kept))
    return out


def _train(build_model, items, cfg, out):
    trainer = ArcaTrainer(cfg, build_model(cfg), items, out)
    torch.manual_seed(5)
    trainer.train()
    return trainer


def _weights(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def test_reward_and_features_drop_the_removed_critic():
    scores = torch.tensor([[[9.0, 8.0, 7.0], [2.0, 3.0, 4.0]]])
    sim = torch.tensor([[0.2, 0.9]])
    perm = scores.flip(1)
    full = ArcaConfig()
    no_llm = ArcaConfig(use_llm_critic=False)
    no_emb = ArcaConfig(use_embedding_critic=False)
    assert not torch.equal(arca_reward(full, scores, sim), arca_reward(full, perm, sim))
    torch.testing.assert_close(arca_reward(no_llm, scores, sim), arca_reward(no_llm, perm, sim))
    torch.testing.assert_close(arca_reward(no_llm, scores, sim), full.delta * sim)
    torch.testing.assert_close(arca_reward(no_emb, scores, sim), arca_reward(no_emb, scores, -sim))
    torch.testing.assert_close(
        arca_reward(no_emb, scores, sim), 0.1 * (scores * torch.tensor([0.4, 0.3, 0.3])).sum(-1)
    )
    f = ArcaModel.features(scores, sim, False, True)
    assert (f[..., :3] == NEUTRAL_SCORE).all() and torch.equal(f[..., 3], sim)
    f = ArcaModel.features(scores, sim, True, False)
    assert torch.equal(f[..., :3], scores) and (f[..., 3] == 0).all()


def test_without_llm_critic_training_and_pick_ignore_the_critic_scores(
    build_model, xquad_pairs, tmp_path
):
    """An Arca trained with arca.use_llm_critic=false on other critic scores (shuffled, some
    missing) ends with the very same weights, and its picks do not move with the scores."""
    items = make_items(xquad_pairs[:12])
    other = _permuted_scores(items)
    cfg = ArcaConfig(steps=3, batch_size=4, log_every=1, save_every=10, use_llm_critic=False)
    a = _train(build_model, items, cfg, tmp_path / "a")
    b = _train(build_model, other, cfg, tmp_path / "b")
    for k, v in _weights(a.model).items():
        torch.testing.assert_close(v, _weights(b.model)[k], rtol=0, atol=0)
    assert [h["reward"] for h in a.history] == [h["reward"] for h in b.history]
    texts = [it.source for it in items]
    idx, feats = a.model.pick(texts, [it.candidates for it in items])
    idx2, feats2 = a.model.pick(texts, [it.candidates for it in other])
    assert idx == idx2 and torch.equal(feats, feats2) and (feats[:, :3] == NEUTRAL_SCORE).all()
    # the full model does read them (the check above could not pass by accident)
    full = ArcaConfig(steps=3, batch_size=4, log_every=1, save_every=10)
    c = _train(build_model, items, full, tmp_path / "c")
    d = _train(build_model, other, full, tmp_path / "d")
    assert not torch.equal(_weights(c.model.actor)["net.0.weight"],
                           _weights(d.model.actor)["net.0.weight"])  # fmt: skip


def test_without_embedding_critic_sim_and_anchor_leave_training(build_model, xquad_pairs, tmp_path):
    """arca.use_embedding_critic=false: sim_k is 0 in the features and gone from the reward, and
    L_anchor is not optimised (g and the Adaptor keep their initial weights); moving the
    similarities (candidate texts swapped, scores kept in place) changes neither the trained
    Actor nor the pick."""
    items = make_items(xquad_pairs[:12])
    swapped = _swapped_texts(items)
    cfg = ArcaConfig(steps=3, batch_size=4, log_every=1, save_every=10, use_embedding_critic=False)
    start = build_model(cfg)
    a = _train(build_model, items, cfg, tmp_path / "a")
    b = _train(build_model, swapped, cfg, tmp_path / "b")
    assert a.opt_names == ["actor"]
    for k, v in _weights(start.adaptor).items():
        torch.testing.assert_close(_weights(a.model.adaptor)[k], v, rtol=0, atol=0)
    for k, v in _weights(start.encoder).items():
        torch.testing.assert_close(_weights(a.model.encoder)[k], v, rtol=0, atol=0)
    trained, init = _weights(a.model.actor), _weights(start.actor)
    for k, v in trained.items():
        torch.testing.assert_close(v, _weights(b.model.actor)[k], rtol=0, atol=0)
    assert any(not torch.equal(v, init[k]) for k, v in trained.items())  # the Actor trained
    texts = [it.source for it in items]
    idx, feats = a.model.pick(texts, [it.candidates for it in items])
    idx2, _ = a.model.pick(texts, [it.candidates for it in swapped])
    assert idx == idx2 and (feats[:, 3] == 0).all()
    assert all(h["loss"] == pytest.approx(h["l_rl"]) for h in a.history)

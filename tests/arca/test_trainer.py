"""ArcaTrainer on demo models and XQuAD-R questions (paper 004 §4.1, App. D.1-D.2)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from arca.candidates import pad_candidates
from arca.config import ArcaConfig
from arca.data import ArcaItem
from arca.model import load_arca
from arca.trainer import ArcaTrainer
from lira.translation.types import Candidate

from .conftest import make_items


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _all_finite(model) -> bool:
    return all(bool(torch.isfinite(v).all()) for v in model.state_dict().values())


@pytest.mark.slow
def test_training_lowers_anchor_loss_and_raises_heldout_cos(build_model, xquad_pairs, tmp_path):
    items = make_items(xquad_pairs)
    train, held = items[:72], items[72:]
    cfg = ArcaConfig(steps=30, batch_size=8, log_every=5, save_every=100)
    trainer = ArcaTrainer(cfg, build_model(cfg), train, tmp_path / "arca", eval_items=held)
    before = trainer.evaluate(held)
    torch.manual_seed(1)
    summary = trainer.train().summary
    after = summary["eval"]
    first = sum(h["l_anchor"] for h in trainer.history[:5]) / 5
    last = sum(h["l_anchor"] for h in trainer.history[-5:]) / 5
    print(
        f"\nanchor loss (train, first 5 / last 5 steps): {first:.4f} -> {last:.4f}\n"
        f"held-out cos(E_lr, E_en): {before['cos']:.4f} -> {after['cos']:.4f} "
        f"(mismatched pairs {before['cos_shuffled']:.4f} -> {after['cos_shuffled']:.4f})\n"
        f"held-out eps1 {before['eps1']:.4f} -> {after['eps1']:.4f}, eps2 {after['eps2']:.4f}\n"
        f"selection share (train, sampled): {summary['selection']}"
    )
    assert last < first
    assert after["l_anchor"] < before["l_anchor"]
    assert after["cos"] > before["cos"]
    assert math.isfinite(after["eps2"]) and after["n"] == len(held)
    for key in ("loss", "l_rl", "l_anchor", "reward", "cos", "eps1", "entropy", "grad_norm"):
        assert key in trainer.history[-1]
    assert "eps2" in trainer.history[4] and "selection" in trainer.history[4]
    assert (tmp_path / "arca" / "log.jsonl").is_file()
    assert (tmp_path / "arca" / "final" / "metrics.json").is_file()


@pytest.mark.slow
def test_logged_eps1_is_eq25_on_the_raw_path_vectors(build_model, xquad_pairs, tmp_path):
    """Held-out eps1 is E_x ||E_lr(x) - E_en(y_hat)||_2 (paper 004 Eq. 25) over the arg-max
    candidate, on the unnormalised path vectors (Table 12's scale), not on unit vectors."""
    items = make_items(xquad_pairs[:8])
    cfg = ArcaConfig(steps=1, batch_size=8)
    trainer = ArcaTrainer(cfg, build_model(cfg), items, tmp_path / "arca")
    got = trainer.evaluate(items)["eps1"]
    model = trainer.model
    texts = [it.source for it in items]
    picks = model.select(texts, [it.candidates for it in items])
    chosen = [[it.candidates[k]] for it, k in zip(items, picks, strict=True)]
    scores, mask, cand_texts, slot = pad_candidates(chosen)
    with torch.no_grad():
        out = model(texts, model.english_inputs(cand_texts), scores, mask, slot)
    g, h = out["e_lr"].float(), out["e_en"].float()[:, 0]
    assert got == pytest.approx((g - h).norm(dim=-1).mean().item(), rel=1e-4)
    unit = (F.normalize(g, dim=-1) - F.normalize(h, dim=-1)).norm(dim=-1).mean().item()
    assert got != pytest.approx(unit, rel=1e-2)


@pytest.mark.slow
def test_policy_moves_toward_the_best_translator(build_model, xquad_pairs, tmp_path):
    """Synthetic pool: 'good' gives the gold English with top critic scores; the two others
    give noise with low scores. The Actor's share of 'good' must rise."""
    items = [
        ArcaItem(
            src,
            "de",
            [
                Candidate("bad-a", "Sure, here is the translation: " + en[::-1], (2, 3, 2)),
                Candidate("good", en, (9, 9, 10)),
                Candidate("bad-b", "I cannot help with that.", (1, 2, 1)),
            ],
        )
        for src, en in xquad_pairs[:48]
    ]
    cfg = ArcaConfig(
        steps=40, batch_size=8, actor_lr=2e-2, reward_baseline="mean", train_encoder=False,
        log_every=10, save_every=100,
    )  # fmt: skip
    trainer = ArcaTrainer(cfg, build_model(cfg), items, tmp_path / "arca")
    torch.manual_seed(3)
    trainer.train(steps=10)
    early = trainer.selection_share().get("good", 0.0)
    counts_early = dict(trainer.selection)
    trainer.train()
    late_counts = {k: v - counts_early.get(k, 0) for k, v in trainer.selection.items()}
    late = late_counts.get("good", 0) / sum(late_counts.values())
    evald = trainer.evaluate(items[:16])
    print(f"\nshare of 'good' (sampled): steps 1-10 {early:.3f} -> steps 31-40 {late:.3f}; "
          f"arg-max on 16 sources: {evald['selection']}")  # fmt: skip
    assert late > early + 0.15
    assert evald["selection"].get("good", 0.0) > 0.9


@pytest.mark.slow
def test_kill_and_resume_reproduces_the_uninterrupted_run(build_model, xquad_pairs, tmp_path):
    items = make_items(xquad_pairs[:24])
    cfg = ArcaConfig(steps=6, batch_size=4, log_every=2, save_every=3, reward_baseline="ema")

    def fresh(out):
        t = ArcaTrainer(cfg, build_model(cfg), items, out)
        torch.manual_seed(7)
        return t

    full = fresh(tmp_path / "full")
    full.train()

    killed = fresh(tmp_path / "killed")
    real_step = killed.train_step

    def dying_step():
        if killed.step == 4:
            raise KeyboardInterrupt("simulated kill")
        return real_step()

    killed.train_step = dying_step
    with pytest.raises(KeyboardInterrupt):
        killed.train()
    assert killed.step == 4 and (tmp_path / "killed" / "step-00000003").is_dir()
    assert not (tmp_path / "killed" / "final").exists()

    resumed = fresh(tmp_path / "killed")
    resumed.train(resume=True)
    assert resumed.step == 6
    for a, b in zip(full.history, resumed.history, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5, abs=1e-6)
    wa, wb = _weights(full.model), _weights(resumed.model)
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-5, atol=1e-6)
    assert full.selection == resumed.selection


@pytest.mark.slow
def test_checkpoint_loads_without_the_trainer_and_selects_like_it(
    build_model, xquad_pairs, tmp_path, arca_backbone
):
    """The saved folder loads without the trainer and reproduces the trained model: the same
    E_lr, the same Actor logits, the same arg-max picks, and a pick that follows its candidate
    when the candidates are swapped."""
    items = make_items(xquad_pairs[:16])
    cfg = ArcaConfig(steps=2, batch_size=4, log_every=1, save_every=2)
    trainer = ArcaTrainer(cfg, build_model(cfg), items, tmp_path / "arca")
    trainer.train()
    loaded = load_arca(tmp_path / "arca" / "final", backbone=arca_backbone)
    texts = [it.source for it in items[:5]]
    trainer.model.eval()
    torch.testing.assert_close(loaded.embed_lr(texts), trainer.model.embed_lr(texts))
    e_en = loaded.english_targets([c.text for c in items[0].candidates])
    assert e_en.shape == (2, loaded.dim) and loaded.bins_lr(texts).shape == (5, 4, loaded.dim)
    cands = [it.candidates for it in items[:5]]
    assert loaded.select(texts, cands) == trainer.model.select(texts, cands)
    feats = torch.tensor([[9.0, 9.0, 9.0, 0.5], [1.0, 1.0, 1.0, 0.1]])
    logits = trainer.model.actor(feats.unsqueeze(0))[0]
    torch.testing.assert_close(loaded.actor(feats.unsqueeze(0))[0], logits)
    best = int(logits.argmax())
    assert int(loaded.select(feats)) == best
    assert int(loaded.select(feats.flip(0))) == 1 - best
    assert not any(p.requires_grad for p in loaded.parameters())


@pytest.mark.slow
def test_lora_encoder_trains_and_roundtrips(build_model, xquad_pairs, tmp_path, arca_backbone):
    items = make_items(xquad_pairs[:16])
    cfg = ArcaConfig(steps=2, batch_size=4, lora=True, lora_r=4, log_every=1, save_every=2)
    model = build_model(cfg)
    trainer = ArcaTrainer(cfg, model, items, tmp_path / "arca")
    assert trainer.opt_names == ["actor", "encoder", "adaptor"]
    base = [p for n, p in model.encoder.named_parameters() if "lora" not in n]
    assert base and not any(p.requires_grad for p in base)
    trainer.train()
    final = tmp_path / "arca" / "final"
    assert (final / "encoder" / "adapter_config.json").is_file()
    loaded = load_arca(final, backbone=arca_backbone)
    model.eval()
    texts = [it.source for it in items[:3]]
    torch.testing.assert_close(loaded.embed_lr(texts), model.embed_lr(texts))


# ---------------------------------------------------------------------- bad input
def test_no_candidates_anywhere_is_a_clear_error(build_model, tmp_path):
    cfg = ArcaConfig(steps=1, batch_size=2)
    items = [ArcaItem("Hallo Welt", "de", []), ArcaItem("", "de", [Candidate("t", "x", None)])]
    with pytest.raises(ValueError, match=r"1 empty, 1 without any candidate.*lira translate"):
        ArcaTrainer(cfg, build_model(cfg), items, tmp_path)


def test_empty_sources_and_failed_candidates_are_dropped_and_counted(build_model, tmp_path):
    cfg = ArcaConfig(steps=2, batch_size=2, log_every=1, save_every=10)
    items = [
        ArcaItem("Wie alt ist er?", "de", [Candidate("t", "How old is he?", (8, 8, 8))]),
        ArcaItem("   ", "de", [Candidate("t", "nothing", (5, 5, 5))]),
        ArcaItem("Wo ist das?", "de", [Candidate("t", "", None)]),  # failed candidate
        ArcaItem("Was ist das?", "de", [Candidate("t", "What is that?", None)]),
    ]
    trainer = ArcaTrainer(cfg, build_model(cfg), items, tmp_path)
    assert trainer.counters["empty_sources"] == 1 and trainer.counters["no_candidates"] == 1
    assert len(trainer.items) == 2
    trainer.train()
    assert _all_finite(trainer.model)


def test_batch_whose_candidates_all_failed_is_skipped_and_counted(build_model, tmp_path):
    """Online mode: the pool returns no candidate for a whole batch -> skipped step, no update."""
    cfg = ArcaConfig(steps=3, batch_size=2, log_every=1, save_every=10)
    calls = {"n": 0}

    def pool(texts, lang):
        calls["n"] += 1
        if calls["n"] == 2:  # the second step: every candidate failed
            return [[] for _ in texts]
        return [[Candidate("mt", f"english {t}", (7, 7, 7))] for t in texts]

    items = [ArcaItem(f"Satz {i}", "de", None) for i in range(6)]
    model = build_model(cfg)
    trainer = ArcaTrainer(cfg, model, items, tmp_path, candidate_fn=pool)
    trainer.train_step()
    w1 = _weights(model)
    assert trainer.train_step() is None
    assert trainer.counters["skipped_steps"] == 1 and trainer.counters["skipped_sources"] == 2
    w2 = _weights(model)
    assert all(torch.equal(w1[k], w2[k]) for k in w1)
    assert trainer.train_step() is not None and trainer.step == 3


def test_nan_backbone_stream_is_guarded_and_counted(build_model, xquad_pairs, tmp_path):
    # the bins target reads h's token stream (the sentence target reads h.encode)
    cfg = ArcaConfig(steps=2, batch_size=4, log_every=1, save_every=10, anchor_target="bins")
    model = build_model(cfg)
    trainer = ArcaTrainer(cfg, model, make_items(xquad_pairs[:8]), tmp_path)
    real = model.backbone.token_stream

    class NaNBackbone:
        dim = model.backbone.dim

        def token_stream(self, texts, stream="input_embeddings"):
            tokens, mask = real(texts, stream=stream)
            tokens = tokens.clone()
            tokens[:, 0] = float("nan")
            return tokens, mask

    object.__setattr__(model, "backbone", NaNBackbone())
    trainer.train()
    assert trainer.counters["nan_guards"] >= 2
    assert _all_finite(model)
    assert all(math.isfinite(h["loss"]) for h in trainer.history)


def test_nonfinite_gradient_step_is_skipped(build_model, xquad_pairs, tmp_path, monkeypatch):
    """A loss that turns NaN: the update is skipped and counted, the weights stay as they were."""
    import arca.losses as trainer_mod  # anchor_terms reads encoder_anchor_loss there

    cfg = ArcaConfig(steps=2, batch_size=2, log_every=1, save_every=10)
    model = build_model(cfg)
    before = _weights(model)
    trainer = ArcaTrainer(cfg, model, make_items(xquad_pairs[:4]), tmp_path)
    real = trainer_mod.encoder_anchor_loss
    monkeypatch.setattr(trainer_mod, "encoder_anchor_loss", lambda a, b: real(a, b) * float("nan"))
    trainer.train()
    assert trainer.counters["nonfinite_steps"] == 2
    after = _weights(model)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_nan_critic_scores_count_as_missing(build_model, xquad_pairs, tmp_path):
    cfg = ArcaConfig(steps=1, batch_size=2, log_every=1, save_every=10)
    nan = float("nan")
    items = [ArcaItem(s, "de", [Candidate("t", e, (nan, 5, 5))]) for s, e in xquad_pairs[:2]]
    trainer = ArcaTrainer(cfg, build_model(cfg), items, tmp_path)
    trainer.train()
    assert trainer.counters["nonfinite_steps"] == 0 and _all_finite(trainer.model)


def test_grad_accum_and_bf16_autocast_run(
    build_model, xquad_pairs, tmp_path, fresh_accelerate_state
):
    cfg = ArcaConfig(
        steps=2, batch_size=2, grad_accum=2, mixed_precision="bf16", log_every=1, save_every=10
    )
    trainer = ArcaTrainer(cfg, build_model(cfg), make_items(xquad_pairs[:8]), tmp_path)
    trainer.train()
    assert trainer.step == 2 and len(trainer.history) == 2
    assert trainer.counters["nonfinite_steps"] == 0 and _all_finite(trainer.model)
    assert sum(trainer.selection.values()) == 2 * 2 * 2  # steps x grad_accum x batch


@pytest.mark.slow
def test_d1_fixed_target_cannot_collapse(build_model, xquad_pairs, tmp_path):
    """App. D.1 (the default objective): the English side is a fixed target of h, so the best
    constant Adaptor output (the normalised mean target, the optimum of mean cos over constants)
    scores worse than the trained Adaptor, and matched pairs end well above mismatched ones
    without any contrastive term."""
    import torch.nn.functional as F

    items = make_items(xquad_pairs[:48])
    cfg = ArcaConfig(steps=40, batch_size=8, adaptor_lr=1e-3, encoder_lr=1e-3, log_every=10,
                     save_every=100)  # fmt: skip
    assert cfg.objective == "d1" and cfg.anchor_contrast == 0.0
    trainer = ArcaTrainer(cfg, build_model(cfg), items, tmp_path / "d1")
    torch.manual_seed(1)
    trainer.train()
    ev = trainer.evaluate(items)
    model = trainer.model.eval()
    gold = model.english_targets([it.candidates[0].text for it in items])  # [N, d]
    noisy = model.english_targets([it.candidates[1].text for it in items])
    with torch.no_grad():
        e_lr = model.embed_lr([it.source for it in items])
    best_const = F.normalize(F.normalize(gold, dim=-1).mean(0, keepdim=True), dim=-1)
    const_loss = (1 - F.cosine_similarity(best_const.expand_as(gold), gold, dim=-1)).mean()
    trained_loss = (1 - F.cosine_similarity(e_lr, gold, dim=-1)).mean()
    print(f"\nD.1: anchor loss trained {trained_loss:.4f} vs best constant {const_loss:.4f}; "
          f"held cos {ev['cos']:.4f} vs mismatched {ev['cos_shuffled']:.4f}")  # fmt: skip
    assert trained_loss < const_loss - 0.02
    assert ev["cos"] > ev["cos_shuffled"] + 0.05
    assert not torch.allclose(gold, noisy)  # targets are the candidates' own embeddings


@pytest.mark.slow
def test_anchor_contrast_option_keeps_pairs_apart(build_model, xquad_pairs, tmp_path):
    """The shared reading of Eq. 4-5 lets the Adaptor collapse (mismatched pairs align as well
    as matched ones); the optional in-batch InfoNCE term keeps matched pairs above mismatched."""
    items = make_items(xquad_pairs[:48])
    result = {}
    for weight in (0.0, 1.0):
        cfg = ArcaConfig(
            steps=30, batch_size=8, anchor_contrast=weight, adaptor_lr=1e-3, encoder_lr=1e-3,
            log_every=10, save_every=100, objective="shared",
        )  # fmt: skip
        trainer = ArcaTrainer(cfg, build_model(cfg), items, tmp_path / f"w{weight}")
        torch.manual_seed(1)
        trainer.train()
        ev = trainer.evaluate(items)
        result[weight] = ev["cos"] - ev["cos_shuffled"]
        print(
            f"\nanchor_contrast={weight}: cos {ev['cos']:.4f}, mismatched {ev['cos_shuffled']:.4f}"
        )
    assert result[1.0] > 0.05
    assert result[1.0] > result[0.0] + 0.05


def test_actor_agreement_counts_sources_whose_argmax_is_the_rewards_argmax():
    from arca.losses import actor_agreement

    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 9.0], [1.0, 0.0, 5.0]])
    rewards = torch.tensor([[0.9, 0.1, 0.0], [0.2, 0.8, 0.0], [0.1, 0.7, 0.9]])
    mask = torch.tensor([[True, True, True], [True, True, True], [True, True, False]])
    # row 0 agrees (0 = 0); row 1 does not (2 vs 1); row 2: slot 2 is padding, so the reward's
    # arg-max is 1 and the Actor's (padding masked in its logits by the caller) would be 0
    masked = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
    assert float(actor_agreement(masked, rewards, mask)) == pytest.approx(1 / 3)
    assert float(actor_agreement(rewards.masked_fill(~mask, -1.0), rewards, mask)) == 1.0

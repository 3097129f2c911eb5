"""``lira tune-translator``: GRPO on Arca's anchor reward (beyond the paper; issue #20)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from arca.config import ArcaConfig, TuneTranslatorConfig
from arca.model import load_arca, pad_candidates
from arca.trainer import ArcaTrainer
from arca.tune_translator import (
    AnchorReward,
    anchor_similarity,
    format_check,
    run_tune_translator,
    tuned_translator,
)
from lira.config import DataConfig
from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from lira.translation.store import Row, TranslationStore, key_for
from lira.translation.types import Candidate
from pipeline.runconfig import RunConfig

from .conftest import make_items

SRC = "Wie viele Menschen leben in Berlin?"
EN = "How many people live in Berlin?"


def _reset_accelerate() -> None:
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)


@pytest.fixture(scope="module")
def arca_dir(models_config, arca_backbone, xquad_pairs, tmp_path_factory):
    """A tiny Arca (frozen demo mT5 as g, MiniLM as h) trained for 3 steps, saved as final/."""
    from arca.model import ArcaModel
    from lira.models import load_encoder

    torch.manual_seed(0)
    cfg = ArcaConfig(steps=3, batch_size=4, train_encoder=False, log_every=1, save_every=100)
    model = ArcaModel.from_config(
        models_config, cfg, backbone=arca_backbone, encoder=load_encoder(models_config)
    )
    out = tmp_path_factory.mktemp("arca")
    _reset_accelerate()
    ArcaTrainer(cfg, model, make_items(xquad_pairs[:16]), out).train()
    _reset_accelerate()
    return out / "final"


@pytest.fixture(scope="module")
def arca(arca_dir, arca_backbone):
    return load_arca(arca_dir, backbone=arca_backbone)


# ------------------------------------------------------------------------------ reward
def test_reward_matches_a_hand_computation(arca):
    """R = 0.1 (0.4 s + 0.3 e + 0.3 p) + delta sim - w penalty, sim = the Actor's sim_k."""
    tc = TuneTranslatorConfig(
        alpha=0.4, beta=0.3, gamma=0.3, delta=0.7, format_weight=2.0, center_sim=False
    )
    reward = AnchorReward(arca, tc, critic=lambda xs, ys, lang: [(8, 6, 4)] * len(xs))
    meta = "Sure, here is the translation: " + EN
    parts = reward.score([SRC, SRC], ["de", "de"], [EN, meta])
    # the similarity Arca's Actor sees for these candidates (Eq. 6), through ArcaModel.forward
    scores, mask, texts, slot = pad_candidates([[Candidate("a", EN, (8, 6, 4))]])
    with torch.no_grad():
        sim = float(arca([SRC], arca.english_inputs(texts), scores, mask, slot)["sim"][0, 0])
    assert math.isclose(parts[0]["sim"], sim, abs_tol=1e-5)
    assert math.isclose(float(anchor_similarity(arca, [SRC], [EN])[0]), sim, abs_tol=1e-5)
    hand = 0.1 * (0.4 * 8 + 0.3 * 6 + 0.3 * 4) + 0.7 * sim  # = 0.62 + 0.7 sim
    assert math.isclose(parts[0]["reward"], hand, abs_tol=1e-5)
    assert parts[0]["penalty"] == 0.0
    # the preamble is cleaned away (same sim) but costs the meta-text penalty 0.5 x w
    assert parts[1]["text"] == EN and parts[1]["reasons"] == ["meta"]
    assert math.isclose(parts[1]["reward"], hand - 2.0 * 0.5, abs_tol=1e-5)
    # TRL's interface: conversational completions + dataset columns, one float each
    got = reward(
        prompts=[None, None],
        completions=[
            [{"role": "assistant", "content": EN}],
            [{"role": "assistant", "content": meta}],
        ],
        source=[SRC, SRC],
        lang=["de", "de"],
    )
    assert got == pytest.approx([hand, hand - 1.0], abs=1e-5)
    # no critic weight: the critic is not called and the reward is delta * sim
    tc = TuneTranslatorConfig(center_sim=False)
    plain = AnchorReward(arca, tc, critic=lambda *a: pytest.fail("called"))
    assert plain.score([SRC], ["de"], [EN])[0]["reward"] == pytest.approx(sim, abs=1e-5)


def test_centred_reward_matches_a_hand_computation(arca):
    """center_sim: sim(x, y) - mean_x' cos(E_lr(x'), E_en(y)) over the reference sources."""
    refs = [SRC, "Wer gewann den Super Bowl 50?", "Wo liegt die Stadt Köln?"]
    reward = AnchorReward(arca, TuneTranslatorConfig(), reference_sources=refs)
    outs = [EN, "What is the purpose of the article?"]
    parts = reward.score([SRC, SRC], ["de", "de"], outs)
    for part, y in zip(parts, outs):
        cos = [float(anchor_similarity(arca, [x], [y])[0]) for x in refs]
        assert part["sim"] == pytest.approx(cos[0], abs=1e-5)
        assert part["margin"] == pytest.approx(cos[0] - sum(cos) / 3, abs=1e-5)
        assert part["reward"] == pytest.approx(part["margin"], abs=1e-5)  # delta = 1
    with pytest.raises(ValueError, match="training sources"):
        AnchorReward(arca, TuneTranslatorConfig())


def test_penalty_zeroes_copies_and_empty_outputs(arca):
    for out in (
        SRC,
        "  wie viele MENSCHEN leben in Berlin  ",
        '"Wie viele Menschen leben in Berlin?"',
        "Wie viele Menschen leben",  # a copy cut off by max_new_tokens: 24 of 35 characters
    ):
        check = format_check(SRC, out)
        assert check.hard and check.penalty == 1.0 and check.reasons == ("copy",)
    for out in ("", "   ", '""', "Sure, here is the translation:"):
        check = format_check(SRC, out)
        assert check.hard and check.penalty == 1.0 and check.reasons == ("empty",)
    assert format_check(SRC, EN).penalty == 0.0
    assert format_check(SRC, f'"{EN}"').penalty == 0.0  # quotes alone are not meta-text
    echo = format_check(SRC, f"{SRC} means {EN}")
    assert "echo" in echo.reasons and echo.penalty >= 0.5
    assert format_check(SRC, "Berlin").reasons == ("short",)  # ratio 6/35 < 0.3; not a copy
    assert not format_check(SRC, "Wie viele").hard  # 9 of 35 characters: a fragment, no copy
    # a paraphrase in the source language: 5 of its 6 words are source words (> 0.75)
    para = format_check(SRC, "Wie viele Leute leben in Berlin?")
    assert para.hard and para.reasons == ("untranslated",)
    # shared names and numbers are not source words enough: 2 of 4 words (50 is no word)
    assert not format_check("Wer gewann den Super Bowl 50?", "Who won Super Bowl 50?").hard
    long = format_check(SRC, EN * 8)  # ratio ~7.2: log2(7.2 / 4) ~ 0.85
    assert long.reasons == ("long",) and 0.5 < long.penalty < 1.0
    tc = TuneTranslatorConfig(format_weight=1.5)
    parts = AnchorReward(arca, tc, reference_sources=[SRC]).score(
        [SRC] * 3, ["de"] * 3, [SRC, "", EN]
    )
    assert [p["reward"] for p in parts[:2]] == [-1.5, -1.5]  # no similarity credit at all
    assert parts[2]["reward"] > -1.0 > parts[0]["reward"]


# ------------------------------------------------------------------------------ GRPO run
@pytest.fixture(scope="module")
def tuned_run(arca_dir, models_config, demo_cache, tmp_path_factory):
    """One GRPO step of the demo causal LM on two German training questions."""
    from lira.demo import resolve_model

    out = tmp_path_factory.mktemp("tune")
    lm = resolve_model("demo:qwen3-lm", str(demo_cache))
    base = TranslatorConfig(name="qwen-lm", model=lm, max_new_tokens=8, batch_size=4)
    cfg = RunConfig(
        output_dir=str(out),
        models=models_config,
        data=DataConfig(train_languages=["de"], eval_languages=["de"], max_train_queries=2,
                        max_eval_queries=2),
        translation=TranslationConfig(llm_translators=[base], pass_at_k=1, num_candidates=1,
                                      critic=CriticConfig(kind="none")),
        tune_translator=TuneTranslatorConfig(
            arca_checkpoint=str(arca_dir), steps=1, batch_size=2, num_generations=2,
            max_new_tokens=8, lr=1e-3, save_steps=1, logging_steps=1, lora_r=4, lora_alpha=8,
        ),
    )  # fmt: skip
    _reset_accelerate()
    summary = run_tune_translator(cfg, resume=False)
    _reset_accelerate()
    return cfg, summary


def test_one_grpo_step_moves_the_lora_weights_and_writes_a_loadable_model(tuned_run):
    from transformers import AutoModelForCausalLM

    cfg, summary = tuned_run
    out = cfg.output_dir + "/tune_translator/qwen-lm-grpo"
    assert summary["steps"] == 1 and summary["translator"]["name"] == "qwen-lm-grpo"
    assert summary["log"] and "reward" in summary["log"][0]
    lora = load_file(out + "/adapter/adapter_model.safetensors")
    b = [v for k, v in lora.items() if "lora_B" in k]
    assert b and any(bool(v.abs().sum() > 0) for v in b)  # B starts at 0: the step moved it
    tuned = AutoModelForCausalLM.from_pretrained(out + "/final")
    base = AutoModelForCausalLM.from_pretrained(cfg.translation.llm_translators[0].model)
    t, o = tuned.state_dict(), base.state_dict()
    assert set(t) == set(o)  # merged: a plain model of the base architecture
    assert any(not torch.equal(t[k], o[k]) for k in t)
    # adapter/ (what final/ holds with merge: false) is base + LoRA = the merged model, and the
    # pool's transformers backend loads it through its base reference
    from lira.translation.translators import TransformersTranslator

    unmerged = TransformersTranslator(TranslatorConfig(name="u", model=out + "/adapter"), "cpu")
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        diff = (unmerged.model(ids).logits - tuned(ids).logits).abs().max()
    assert float(diff) < 1e-4
    assert (
        Path(out, "checkpoint-1").is_dir() and Path(out, "final", "tune_translator.json").is_file()
    )
    assert "qwen-lm-grpo" in Path(out, "translator.yaml").read_text()


def test_resume_continues_from_the_last_checkpoint(tuned_run, tmp_path):
    import dataclasses
    import shutil

    cfg, _ = tuned_run
    src = Path(cfg.output_dir, "tune_translator", "qwen-lm-grpo")
    shutil.copytree(src / "checkpoint-1", tmp_path / "checkpoint-1")
    tc = dataclasses.replace(cfg.tune_translator, steps=2, output=str(tmp_path))
    _reset_accelerate()
    summary = run_tune_translator(dataclasses.replace(cfg, tune_translator=tc), resume=True)
    _reset_accelerate()
    assert summary["steps"] == 2  # step 1 came from the checkpoint (with its log row)
    assert [h["step"] for h in summary["log"]] == [1, 2]
    assert (tmp_path / "checkpoint-2").is_dir() and (tmp_path / "final").is_dir()


def test_store_keeps_tuned_and_base_candidates_apart(tuned_run, tmp_path):
    from lira.translation.runner import fill_store

    cfg, _ = tuned_run
    base = cfg.translation.llm_translators[0]
    tuned = tuned_translator(cfg)
    assert tuned.name != base.name and tuned.model.endswith("final")
    pool = TranslationConfig(llm_translators=[base, tuned], pass_at_k=2, num_candidates=2,
                             critic=CriticConfig(kind="none"))  # fmt: skip
    run = RunConfig(output_dir=str(tmp_path), models=cfg.models, translation=pool)
    texts = [SRC, "Wo liegt Berlin?"]
    assert key_for(SRC, "de", base) != key_for(SRC, "de", tuned)
    # the pool loads the tuned folder and generates with it, beside the base translator (the
    # tiny demo LM may produce nothing usable: a recorded empty output, never a load failure)
    fill_store(run, {"de": texts})
    with TranslationStore(tmp_path / "translations.sqlite") as store:
        assert store.count(base.name) == 2 and store.count(tuned.name) == 2
        rows = [store.row(x, "de", t) for t in (base, tuned) for x in texts]
        assert all("load" not in (r["error"] or "") for r in rows)
        assert {r["translator"] for r in rows} == {base.name, tuned.name}
        # the same source keeps one candidate per translator id, side by side
        store.write_rows([
            Row(SRC, "de", base, raw="base says", text="base says"),
            Row(SRC, "de", tuned, raw="tuned says", text="tuned says"),
        ])  # fmt: skip
        cands = store.candidates([SRC], "de", [base, tuned])[0]
    assert [(c.translator, c.text) for c in cands] == [
        (base.name, "base says"),
        (tuned.name, "tuned says"),
    ]


def test_evaluate_compares_the_backbone_on_base_and_tuned_translations(tuned_run, tmp_path):
    import dataclasses
    import json

    from evaluators.translators import TranslatedQueries, run_translator_eval
    from lira.errors import UserInputError
    from lira.models import load_backbone

    cfg, _ = tuned_run
    summary = run_translator_eval(cfg, pairs=5)
    base, tuned = "h(qwen-lm)", "h(qwen-lm-grpo)"
    nd = summary["ndcg@10"]
    assert {
        f"{m} {lg}" for m in ("backbone (raw question)", base, tuned) for lg in ("de", "all")
    } <= set(nd)
    # the tuned translator's paired Δ is the difference of the two means (same questions)
    delta = summary["paired_delta"]["de"][0]
    assert delta == pytest.approx(nd[f"{tuned} de"][0] - nd[f"{base} de"][0], abs=0.02)
    out = Path(cfg.output_dir, "tune_translator", "qwen-lm-grpo", "evaluation")
    assert json.loads((out / "summary.json").read_text())["questions"] == 2
    assert (out / "pairs.md").read_text().count("\n| de |") == 2  # 2 held-out questions
    # both translators' candidates of the held-out questions are in the run's store
    with TranslationStore(Path(cfg.output_dir, "translations.sqlite")) as store:
        assert store.count("qwen-lm") >= 2 and store.count("qwen-lm-grpo") >= 2
    # the encoder embeds the stored translation, and the source where none is stored
    backbone = load_backbone(cfg.models)
    with TranslationStore(tmp_path / "t.sqlite") as store:
        t = cfg.translation.llm_translators[0]
        store.write_rows([Row(SRC, "de", t, raw=EN, text=EN)])
        enc = TranslatedQueries(backbone, store, t)
        got = enc.encode([SRC, "Wo liegt Berlin?"], ["de", "de"])
        want = backbone.encode([EN, "Wo liegt Berlin?"])
        assert torch.allclose(torch.as_tensor(got), torch.as_tensor(want), atol=1e-5)
        assert enc.missing == 1
    # no tuned model yet: one clear error naming the command
    gone = dataclasses.replace(cfg.tune_translator, output=str(tmp_path / "none"))
    with pytest.raises(UserInputError, match="run `lira tune-translator"):
        run_translator_eval(dataclasses.replace(cfg, tune_translator=gone))

"""The reward of ``lira tune-translator``: Arca's composite reward for a translation."""

from __future__ import annotations

import math

import pytest
import torch

from arca.candidates import pad_candidates
from arca.tuning.config import TuneTranslatorConfig
from arca.tuning.reward import AnchorReward, anchor_similarity
from lira.translation.checks import format_check
from lira.translation.types import Candidate

from .conftest import EN, SRC


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


def test_a_completion_prompts_reward_reads_the_first_line_only(arca):
    """A base model continues the few-shot text after its translation; the pool keeps the first
    line, so the reward scores exactly that line (and without first_line_only, the whole)."""
    tc = TuneTranslatorConfig(center_sim=False)
    tail = EN + "\n\nGerman: Wo liegt Berlin?\nEnglish: Where is Berlin?"
    lines = AnchorReward(arca, tc, first_line_only=True)
    whole = AnchorReward(arca, tc)
    kw = {"prompts": [None, None], "source": [SRC, SRC], "lang": ["de", "de"]}
    got = lines(completions=[" " + EN + "\n", tail], **kw)
    want = whole.score([SRC], ["de"], [EN])[0]["reward"]
    assert got == pytest.approx([want, want], abs=1e-5)
    assert whole(completions=[EN, tail], **kw)[1] != pytest.approx(want, abs=1e-3)

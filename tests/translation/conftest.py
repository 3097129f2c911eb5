"""Fixtures of the translation tests: demo model folders and small store configs.

``LIRA_TEST_LM`` / ``LIRA_TEST_MT`` point the tests at other local folders (a causal LM with a
chat template / a seq2seq MT model) instead of ``demo:qwen3-lm`` / ``demo:marian``.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """A stand-in ``vllm`` module (no engine cache): returns the kwargs of every ``vllm.LLM``
    built, so a test sees what reached the engine."""
    import sys
    import types

    from lira.translation import translators

    calls: list[dict] = []

    class LLM:
        def __init__(self, **kwargs: object) -> None:
            calls.append(kwargs)

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM))
    monkeypatch.setattr(translators, "_ENGINES", {})
    return calls


def _resolve(request: pytest.FixtureRequest, env: str, ref: str) -> str:
    if os.environ.get(env):
        return os.environ[env]
    try:
        from lira.demo.references import resolve_model
    except ImportError as e:
        pytest.skip(f"lira.demo is not available ({e}); set {env} to a local model folder")
    try:
        cache = str(request.getfixturevalue("demo_cache"))
    except pytest.FixtureLookupError:
        cache = os.environ.get("LIRA_CACHE", "")
    return resolve_model(ref, cache)


@pytest.fixture(scope="session")
def lm_path(request: pytest.FixtureRequest) -> str:
    """A tiny causal LM with a chat template (demo:qwen3-lm)."""
    return _resolve(request, "LIRA_TEST_LM", "demo:qwen3-lm")


@pytest.fixture(scope="session")
def mt_path(request: pytest.FixtureRequest) -> str:
    """A tiny seq2seq MT model (demo:marian)."""
    return _resolve(request, "LIRA_TEST_MT", "demo:marian")

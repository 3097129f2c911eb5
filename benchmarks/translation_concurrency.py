"""Requests in flight and throughput of ``lira translate`` against slow servers (target: >= 0.8x).

    PYTHONPATH=. .venv/bin/python benchmarks/translation_concurrency.py [--n 256]
        [--servers 2] [--max-concurrency 32] [--delay 1.0]

A local fake OpenAI-compatible server (``tests/translation/fake_openai.py``, 127.0.0.1 only, a
bounded run) answers every request after ``--delay`` seconds; a pool of ``--servers`` kind=openai
translators (one model name each, ``max_concurrency`` each) fills a fresh store with ``--n``
German sentences (no critic). Prints, per translator, the most requests in flight at once, and
the pool's throughput against the ideal: ``servers x max_concurrency / delay`` texts/s.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time

from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from lira.translation.engine import fill_store
from pipeline.runconfig import RunConfig
from tests.translation.fake_openai import FakeServer


def main() -> None:
    """Fill a store through the fake server and print in-flight requests and throughput."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256, help="source sentences")
    ap.add_argument("--servers", type=int, default=2, help="translators in the pool")
    ap.add_argument("--max-concurrency", type=int, default=32)
    ap.add_argument("--delay", type=float, default=1.0, help="seconds per answer")
    ap.add_argument("--commit-every", type=int, default=16)
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    server = FakeServer(delay_s=a.delay).start()
    try:
        translators = [
            TranslatorConfig(
                name=f"t{i}",
                kind="openai",
                role="llm",
                model=f"m{i}",
                base_url=server.url,
                max_concurrency=a.max_concurrency,
                max_retries=0,
                timeout_s=30,
            )
            for i in range(a.servers)
        ]
        tc = TranslationConfig(llm_translators=translators, mt_translators=[],
                               pass_at_k=a.servers, num_candidates=a.servers,
                               commit_every=a.commit_every, critic=CriticConfig(kind="none"))  # fmt: skip
        texts = [f"Das ist der Satz Nummer {i}, er ist kurz." for i in range(a.n)]
        with tempfile.TemporaryDirectory() as out:
            cfg = RunConfig(output_dir=out, translation=tc)
            t0 = time.perf_counter()
            summary = fill_store(cfg, {"de": texts})
            seconds = time.perf_counter() - t0
    finally:
        server.stop()
    done = summary["generated"]
    assert done == a.n * a.servers, summary
    ideal = a.servers * a.max_concurrency / a.delay
    rate = done / seconds
    print(f"{a.servers} translators x max_concurrency {a.max_concurrency}, delay {a.delay}s, "
          f"{a.n} texts each, commit_every {a.commit_every}")  # fmt: skip
    for i in range(a.servers):
        print(f"  t{i}: max requests in flight {server.max_in_flight.get(f'm{i}', 0)} "
              f"(max_concurrency {a.max_concurrency})")  # fmt: skip
    print(f"  max in flight, all servers: {max(server.max_in_flight.values())} per model, "
          f"{done} texts in {seconds:.2f}s")  # fmt: skip
    print(f"  throughput {rate:.1f} texts/s, ideal {ideal:.1f} texts/s, ratio {rate / ideal:.2f}")


if __name__ == "__main__":
    main()

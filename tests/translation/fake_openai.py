"""A canned OpenAI-compatible server (no model) and a ``fill_store`` worker for process tests.

``FakeServer`` answers ``POST /v1/chat/completions`` on 127.0.0.1: model ``critic-fake`` gets
valid critic scores (HTTP 500 while ``fail_critic`` is set), any other model a deterministic
"translation" of the prompt. Every request's model, prompt and ``Authorization`` header are
recorded, so tests can count duplicated work across processes and check what was sent.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SCORES = {"semantic": 7, "emotional": 6, "pragmatic": 5}


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # a runner may open hundreds of connections at once


class FakeServer:
    """Threaded HTTP server with a request log (``requests``: (model, prompt, auth header))."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.fail_critic = False
        self.requests: list[tuple[str, str, str | None]] = []
        self.in_flight = 0
        """Requests being answered now."""
        self.max_in_flight: dict[str, int] = {}
        """The most requests in flight at once, per model."""
        self.max_total = 0
        """The most requests in flight at once, all models."""
        self.lock = threading.Lock()
        busy: dict[str, int] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model = body.get("model", "")
                prompt = body["messages"][-1]["content"]
                with server.lock:
                    server.requests.append((model, prompt, self.headers.get("Authorization")))
                    busy[model] = busy.get(model, 0) + 1
                    server.in_flight += 1
                    server.max_total = max(server.max_total, server.in_flight)
                    top = server.max_in_flight.get(model, 0)
                    server.max_in_flight[model] = max(top, busy[model])
                time.sleep(server.delay_s)
                with server.lock:  # answered: the client may send its next request now
                    busy[model] -= 1
                    server.in_flight -= 1
                if model == "critic-fake" and server.fail_critic:
                    self.send_response(500)
                    self.end_headers()
                    self.wfile.write(b'{"error": "overloaded"}')
                    return
                if model == "critic-fake":
                    content = json.dumps(SCORES)
                else:
                    content = "English " + hashlib.sha256(prompt.encode()).hexdigest()[:12]
                out = json.dumps({"choices": [{"message": {"content": content}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> FakeServer:
        """Serve in a daemon thread."""
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Shut the server down."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def prompts(self, model: str) -> list[str]:
        """Prompts received for ``model``."""
        with self.lock:
            return [p for m, p, _ in self.requests if m == model]


def run_config(out_dir: str, url: str, commit_every: int = 4) -> Any:
    """A RunConfig with one fake OpenAI translator and the fake OpenAI critic."""
    from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
    from pipeline.runconfig import RunConfig

    mt = TranslatorConfig(name="fake", kind="openai", role="mt", model="mt-fake", base_url=url,
                          max_concurrency=2, max_retries=0, timeout_s=10)  # fmt: skip
    critic = CriticConfig(kind="openai", model="critic-fake", base_url=url, max_retries=0,
                          batch_size=commit_every, max_concurrency=2, timeout_s=10)  # fmt: skip
    tc = TranslationConfig(mt_translators=[mt], pass_at_k=0, num_candidates=1,
                           commit_every=commit_every, critic=critic)  # fmt: skip
    return RunConfig(output_dir=out_dir, translation=tc)


def fill_worker(out_dir: str, url: str, texts: list[str], barrier: Any, results: Any) -> None:
    """Process target: wait at ``barrier``, fill the store, put the summary on ``results``."""
    import logging

    from lira.translation import engine as runner

    logging.basicConfig(level=logging.WARNING)
    runner.LEASE_POLL_S = 0.05
    cfg = run_config(out_dir, url)
    barrier.wait(timeout=60)
    results.put(runner.fill_store(cfg, {"de": texts}))

"""A small OpenAI-compatible chat server for tests (http.server + threads, 127.0.0.1 only).

Serves ``POST /v1/chat/completions`` with a local transformers causal LM (chat template,
greedy or sampled), honouring ``max_tokens``, ``temperature`` and
``response_format={"type": "json_schema", ...}`` through an xgrammar logits processor —
the same contract as ``vllm serve``. Model names ``slow`` (sleeps ``slow_s``) and ``boom``
(HTTP 500) let tests exercise timeouts and retries. The server stops by itself after
``idle_timeout_s`` without requests or ``max_requests`` requests.

    python tests/translation/openai_server.py MODEL_DIR --port 8765
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch
import xgrammar as xgr
from transformers import AutoModelForCausalLM, AutoTokenizer
from xgrammar.contrib.hf import LogitsProcessor


class ChatModel:
    """The model behind the server; one generation at a time (a lock)."""

    def __init__(self, path: str) -> None:
        self.tok = AutoTokenizer.from_pretrained(path)
        self.tok.padding_side = "left"
        if self.tok.pad_token is None:
            self.tok.pad_token = self.tok.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(path).eval()
        self.info = xgr.TokenizerInfo.from_huggingface(
            self.tok, vocab_size=self.model.config.vocab_size
        )
        self.compiler = xgr.GrammarCompiler(self.info)
        self.lock = threading.Lock()

    def chat(self, messages: list[dict], max_tokens: int, temperature: float, schema: Any) -> str:
        """One completion for ``messages`` (JSON-constrained when ``schema`` is given)."""
        text = self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        enc = self.tok([text], return_tensors="pt", add_special_tokens=False)
        kw: dict[str, Any] = {"max_new_tokens": max_tokens, "do_sample": temperature > 0}
        if temperature > 0:
            kw["temperature"] = temperature
        with self.lock:
            if schema is not None:
                grammar = self.compiler.compile_json_schema(
                    json.dumps(schema), any_whitespace=False
                )
                kw["logits_processor"] = [LogitsProcessor(grammar)]
            with torch.no_grad():
                out = self.model.generate(**enc, **kw, pad_token_id=self.tok.pad_token_id)
        return self.tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)


class Server:
    """The HTTP server in a daemon thread; ``url`` is its ``…/v1`` base URL."""

    def __init__(
        self,
        model_path: str,
        port: int = 0,
        idle_timeout_s: float = 300.0,
        max_requests: int = 10_000,
        slow_s: float = 5.0,
    ) -> None:
        self.model = ChatModel(model_path)
        self.requests = 0
        self.last = time.monotonic()
        self.idle_timeout_s = idle_timeout_s
        self.max_requests = max_requests
        self.slow_s = slow_s
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": "local"}]})

            def do_POST(self) -> None:
                server.requests += 1
                server.last = time.monotonic()
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model = req.get("model", "")
                if model == "boom":
                    self._send(500, {"error": {"message": "internal error (test)"}})
                    return
                if model == "slow":
                    time.sleep(server.slow_s)
                rf = req.get("response_format") or {}
                schema = (
                    rf.get("json_schema", {}).get("schema")
                    if rf.get("type") == "json_schema"
                    else None
                )
                text = server.model.chat(
                    req["messages"],
                    int(req.get("max_tokens") or 64),
                    float(req.get("temperature") or 0.0),
                    schema,
                )
                self._send(200, {
                    "id": f"chatcmpl-{server.requests}", "object": "chat.completion",
                    "created": int(time.time()), "model": model,
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                })  # fmt: skip
                if server.requests >= server.max_requests:
                    threading.Thread(target=server.stop, daemon=True).start()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = False  # server_close() joins in-flight requests
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._watch = threading.Thread(target=self._watchdog, daemon=True)
        self._stopped = threading.Event()

    def _watchdog(self) -> None:
        while not self._stopped.wait(1.0):
            if time.monotonic() - self.last > self.idle_timeout_s:
                self.stop()

    def start(self) -> Server:
        """Start serving (returns self)."""
        self._thread.start()
        self._watch.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        if not self._stopped.is_set():
            self._stopped.set()
            self.httpd.shutdown()
            self.httpd.server_close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("model")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--idle-timeout", type=float, default=300.0)
    a = ap.parse_args()
    s = Server(a.model, a.port, a.idle_timeout).start()
    print(f"serving {a.model} at {s.url}", flush=True)
    s._stopped.wait()

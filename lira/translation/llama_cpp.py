"""The ``llama_cpp`` translator kind: GGUF files run as they are (no dequantizing) by llama.cpp.

llama.cpp runs through ``xllamacpp`` (its server in-process, MIT, a manylinux wheel;
``pip install xllamacpp``). One request carries a whole batch of prompts; the server decodes
them in ``batch_size`` parallel slots, each with :data:`CONTEXT_PER_SLOT` tokens of context, on
``threads`` CPU threads. Completion prompts (``fewshot-v1``, base models) stop at the first
newline; chat prompts (``paper-v1``) go through the GGUF's own chat template. Every slot keeps
the KV cache of its last prompt, so the few-shot prefix that all prompts share is read once per
slot, not once per text.

On 2 idle cores this runs Gemma-3-270M 3.0 times as fast as transformers' ``generate`` on the
dequantized weights, 8.5 times on busy ones (``benchmarks/translate_engines.py``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lira.errors import UserInputError
from lira.prompts import first_line, is_completion, translation_prompt
from lira.translation.config import TranslatorConfig
from lira.translation.types import Translation, chat_messages, per_item

log = logging.getLogger(__name__)

CONTEXT_PER_SLOT = 1024
"""Tokens of the shared KV pool per parallel slot (the few-shot prompt is ~130 tokens); one text
may take more while the others leave room, and a request that overflows the pool is retried one
text at a time."""
REQUEST_SLOTS = 2
"""Prompts per request, in multiples of the slots: a slot that ends takes the next queued prompt
instead of idling until the batch's longest text ends (2x with kv_unified: 6.9 vs 6.0 texts/s,
benchmarks/translate_engines.py; 16 slots, or 4 slots with 4x, were slower)."""
INSTALL = "pip install xllamacpp"
"""The command that installs the llama.cpp runtime."""


def gguf_file(model: str, cache_dir: str = "") -> Path:
    """The GGUF file that ``model`` names: a ``.gguf`` file, a folder holding exactly one, or a
    ``demo:`` alias of such a folder; UserInputError naming the path otherwise."""
    from lira.demo.references import resolve_model

    path = Path(resolve_model(model, cache_dir)).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return path
    found = sorted(path.glob("*.gguf")) if path.is_dir() else []
    if len(found) == 1:
        return found[0]
    why = "does not exist" if not path.exists() else f"holds {len(found)} .gguf files"
    if path.is_file():
        why = "is not a .gguf file"
    raise UserInputError(
        f"translator model {model!r}: {path} {why}; kind=llama_cpp needs a .gguf file or a folder "
        "with exactly one (e.g. demo:gemma3-gguf, demo:qwen25-1.5b)"
    )


def default_threads() -> int:
    """Threads when a config sets none: the CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def llama_server(gguf: Path, threads: int, slots: int) -> Any:
    """An in-process llama.cpp server for ``gguf`` with ``slots`` parallel sequences."""
    try:
        import xllamacpp
    except ImportError as e:
        raise UserInputError(f"kind=llama_cpp needs the llama.cpp runtime: {INSTALL}") from e
    params = xllamacpp.CommonParams()
    params.model.path = str(gguf)
    params.n_parallel = slots
    params.n_ctx = CONTEXT_PER_SLOT * slots
    params.n_batch = params.n_ubatch = min(2048, CONTEXT_PER_SLOT * slots)
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
    params.warmup = False
    # a full-size cache for sliding-window layers (Gemma 3) so that each slot reuses the shared
    # few-shot prefix of its previous prompt instead of re-reading it (a batch of 8: 1-2 s, was 7-13 s)
    params.swa_full = True
    # one KV pool for all slots: a slot's prompt reuses the few-shot prefix any slot read, and
    # a long text may take what short ones leave (with REQUEST_SLOTS: +13-16% texts/s)
    params.kv_unified = True
    params.verbosity = -1  # llama.cpp's own log lines off; errors come back in replies
    try:
        return xllamacpp.Server(params)
    except RuntimeError as e:  # llama.cpp says no more than "failed to init server"
        raise UserInputError(
            f"llama.cpp could not load {gguf} ({e}); check that it is a complete GGUF file (its "
            "size and sha256), or delete a demo model's folder to build it again"
        ) from e


def _text(reply: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The ``choices`` of a server reply; a reply with an error raises RuntimeError with it."""
    if "error" in reply:
        err = reply["error"]
        raise RuntimeError(err.get("message", err) if isinstance(err, dict) else err)
    return sorted(reply[key], key=lambda c: c.get("index", 0))


class LlamaCppTranslator:
    """llama.cpp on a GGUF file: one batched completion request per call, ``batch_size`` slots."""

    def __init__(self, cfg: TranslatorConfig, cache_dir: str = "") -> None:
        self.cfg = cfg
        self.gguf = gguf_file(cfg.model, cache_dir)
        self.threads = cfg.threads or default_threads()
        self.server = llama_server(self.gguf, self.threads, cfg.batch_size)
        log.info(
            "llama.cpp: %s, %d slots, %d threads", self.gguf.name, cfg.batch_size, self.threads
        )

    def _sampling(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"max_tokens": self.cfg.max_new_tokens}
        kw["temperature"] = self.cfg.temperature
        if self.cfg.temperature > 0:
            kw["top_p"] = self.cfg.top_p
        else:
            kw["top_k"] = 1  # greedy
        return kw

    def _generate(self, texts: list[str], lang: str) -> list[str]:
        version = self.cfg.prompt_version
        if is_completion(version):  # a base model continues the few-shot text: one line out
            prompts = [translation_prompt(t, lang, version) for t in texts]
            req = {"prompt": prompts, "stop": ["\n"], **self._sampling()}
            choices = _text(self.server.handle_completions(req), "choices")
            return [first_line(c["text"]) for c in choices]
        outs = []
        for t in texts:  # the chat endpoint takes one conversation a request
            req = {"messages": chat_messages(translation_prompt(t, lang, version))}
            reply = self.server.handle_chat_completions({**req, **self._sampling()})
            outs.append(_text(reply, "choices")[0]["message"]["content"] or "")
        return outs

    def translate(self, texts: Sequence[str], lang: str) -> list[Translation]:
        """Translate ``texts`` (language ``lang``) in requests of :data:`REQUEST_SLOTS` x
        ``batch_size`` prompts, which the server queues over its slots."""
        size = REQUEST_SLOTS * self.cfg.batch_size
        out: list[Translation] = []
        for i in range(0, len(texts), size):
            batch = list(texts[i : i + size])
            out += per_item(lambda b: self._generate(b, lang), batch)
        return out

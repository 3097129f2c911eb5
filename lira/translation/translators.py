"""The translator pool's backends: transformers, vLLM offline engine, OpenAI-compatible server
(llama.cpp on GGUF files: :mod:`lira.translation.llama_cpp`).

Every backend turns a list of source texts (one language) into a list of
:class:`Translation` — the raw output or a recorded error — and never raises for one bad
text: a text that fails (exception, timeout) becomes a failed :class:`Translation` while the
rest of the batch goes on. The prompt is the paper's translation prompt
(:mod:`lira.prompts`, App. C.2) for LLMs; seq2seq MT models get the bare source with their
source/target language codes (``lang_codes``: NLLB ``deu_Latn``, M2M100 ``de``).

Decisions: the vLLM engine is cached per (model, tensor-parallel size, engine options) so a
translator and a critic on the same model share one engine; vLLM sizing for small machines
comes from the ``LIRA_VLLM_*`` environment variables, which a translator's ``engine_kwargs``
override (see :func:`vllm_engine`).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import os
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from lira.encoding import length_batches
from lira.errors import UserInputError
from lira.prompts import first_line, is_completion, translation_prompt
from lira.translation.config import TranslatorConfig
from lira.translation.types import Translation, TranslatorBackend, chat_messages, per_item

if TYPE_CHECKING:
    import torch
    from vllm import LLM

log = logging.getLogger(__name__)


def _default_dtype_for(device: str) -> torch.dtype | str:
    """The ``dtype`` to load a translator/critic with on ``device``: float32 on CPU (bf16 matmuls
    are slow there), the checkpoint's own dtype (``"auto"``) on GPU. Not
    ``lira.models.torch_dtype``, which maps a configured dtype name to a torch dtype."""
    import torch

    return torch.float32 if device == "cpu" else "auto"


# ------------------------------------------------------------------------------ transformers
class TransformersTranslator:
    """Local ``generate``: seq2seq MT (Marian, M2M100, NLLB), a causal LM with chat template, or
    a base (completion) LM with a few-shot prompt (``prompt_version`` ``fewshot-v1``).

    The model loads through :mod:`lira.models` (``cache_dir``: ``models.cache_dir``, where demo
    models are built); a peft adapter folder loads as its base model plus the adapter.
    """

    def __init__(
        self, cfg: TranslatorConfig, device: str | None = None, cache_dir: str = ""
    ) -> None:
        # imported here: an API-only translate pass never loads torch or transformers
        import torch

        from lira.models.generators import is_seq2seq, load_causal_lm, load_seq2seq

        self.cfg = cfg
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype = _default_dtype_for(self.device)
        self.seq2seq = is_seq2seq(cfg.model, cache_dir)
        load = load_seq2seq if self.seq2seq else load_causal_lm
        self.model, self.tokenizer = load(cfg.model, cache_dir, dtype=self.dtype)
        self.model.to(self.device).eval()
        self._line_ends: list[int] | None = None
        limit = getattr(self.tokenizer, "model_max_length", 0) or 0
        self.max_input_tokens = limit if 0 < limit < 100_000 else 1024

    def _code(self, lang: str) -> str:
        codes = self.cfg.lang_codes
        if codes and lang not in codes:
            raise ValueError(
                f"translator {self.cfg.name!r} has no language code for {lang!r}; known codes: "
                f"{sorted(codes)} (add it to lang_codes)"
            )
        return codes.get(lang, lang)

    def seq2seq_codes(self, lang: str) -> tuple[str | None, int | None]:
        """(tokenizer ``src_lang`` for ``lang``, forced BOS id of English) for MT models.

        From ``lang_codes`` (NLLB ``deu_Latn``/``eng_Latn``, M2M100 ``de``/``en``); (None, None)
        when the config gives no codes (Marian/OPUS-MT xx->en needs none).
        """
        if not self.cfg.lang_codes:
            return None, None
        tok = self.tokenizer
        src = self._code(lang) if hasattr(tok, "src_lang") else None
        tgt = self.cfg.lang_codes.get("en", "")
        if not tgt:
            return src, None
        bos = (
            tok.get_lang_id(tgt) if hasattr(tok, "get_lang_id") else tok.convert_tokens_to_ids(tgt)
        )
        if bos is None or bos == tok.unk_token_id:
            raise ValueError(
                f"translator {self.cfg.name!r}: target code {tgt!r} (lang_codes['en']) is not a "
                "token of this tokenizer; use the model's code for English (NLLB: eng_Latn)"
            )
        return src, bos

    def _gen_kwargs(self) -> dict[str, int | float | bool]:
        kw: dict[str, int | float | bool] = {"max_new_tokens": self.cfg.max_new_tokens}
        if self.cfg.temperature > 0:
            kw.update(do_sample=True, temperature=self.cfg.temperature, top_p=self.cfg.top_p)
        else:
            kw.update(do_sample=False)
        return kw

    def line_end_ids(self) -> list[int]:
        """:func:`lira.models.generators.line_end_ids` of this tokenizer, computed once."""
        if self._line_ends is None:
            from lira.models.generators import line_end_ids

            self._line_ends = line_end_ids(self.tokenizer)
        return self._line_ends

    def _generate(self, texts: list[str], lang: str) -> list[str]:
        import torch

        tok = self.tokenizer
        kw = self._gen_kwargs()
        if self.seq2seq:
            src, bos = self.seq2seq_codes(lang)
            if src is not None:
                tok.src_lang = src
            enc = tok(
                texts, return_tensors="pt", padding=True, truncation=True,
                max_length=self.max_input_tokens,
            ).to(self.device)  # fmt: skip
            if bos is not None:
                kw["forced_bos_token_id"] = bos
            with torch.no_grad():
                out = self.model.generate(**enc, **kw)
            return tok.batch_decode(out, skip_special_tokens=True)
        version = self.cfg.prompt_version
        if is_completion(version):  # a base model continues the few-shot text: one line out
            prompts = [translation_prompt(t, lang, version) for t in texts]
            kw["eos_token_id"] = self.line_end_ids()
        else:
            prompts = [
                tok.apply_chat_template(
                    chat_messages(translation_prompt(t, lang, version)),
                    tokenize=False,
                    add_generation_prompt=True,
                )
                for t in texts
            ]
        # no token truncation here: it would cut the chat template's generation prompt; sources
        # are already capped by source_max_chars (a prompt too long for the model fails alone).
        # A completion prompt is plain text: the tokenizer adds the model's BOS itself.
        enc = tok(
            prompts, return_tensors="pt", padding=True, add_special_tokens=is_completion(version)
        )
        enc = enc.to(self.device)
        with torch.no_grad():
            out = self.model.generate(**enc, **kw, pad_token_id=tok.pad_token_id)
        outs = tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        return [first_line(o) for o in outs] if is_completion(version) else outs

    def translate(self, texts: Sequence[str], lang: str) -> list[Translation]:
        """Translate ``texts`` (language ``lang``) to English in batches of ``batch_size``."""
        if self.seq2seq:
            self._code(lang)
        out: list[Translation | None] = [None] * len(texts)
        for idx in length_batches(texts, self.cfg.batch_size, longest_first=False):
            for j, r in zip(
                idx, per_item(lambda b: self._generate(b, lang), [texts[j] for j in idx])
            ):
                out[j] = r
        return out  # type: ignore[return-value]


# ------------------------------------------------------------------------------ vLLM
_ENGINES: dict[tuple[str, int, str], LLM] = {}
"""The vLLM engines built in this process, by (model path, tensor parallel size, options)."""


N = TypeVar("N", int, float)


def env_number(var: str, default: N) -> N:
    """Environment variable ``var`` as a number > 0 of ``default``'s type (``default`` when
    unset); any other value raises UserInputError naming the variable."""
    raw = os.environ.get(var)
    if raw is None:
        return default
    try:
        value = type(default)(raw)
        ok = 0 < value < math.inf
    except ValueError:
        ok = False
    if not ok:
        kind = "an integer" if isinstance(default, int) else "a number"
        raise UserInputError(
            f"environment variable {var}={raw!r:.40} is not {kind} > 0; set it like "
            f"{var}={default} or unset it"
        )
    return value


def default_max_num_seqs() -> int:
    """vLLM's sequences in flight when a config sets none (``LIRA_VLLM_MAX_NUM_SEQS``, 64)."""
    return env_number("LIRA_VLLM_MAX_NUM_SEQS", 64)


def vllm_engine(
    model: str, tensor_parallel_size: int = 1, *, cache_dir: str = "", **options: object
) -> LLM:
    """A cached ``vllm.LLM`` for ``model`` (sizing from ``LIRA_VLLM_*`` environment variables).

    ``model`` resolves as :func:`lira.models.resolve_path` does (``cache_dir``: where demo
    models are built, ``models.cache_dir``).

    ``LIRA_VLLM_MAX_MODEL_LEN`` (default 2048), ``LIRA_VLLM_MAX_NUM_SEQS`` (default 64),
    ``LIRA_VLLM_ENFORCE_EAGER`` (default 0), ``LIRA_VLLM_DTYPE`` (default auto),
    ``LIRA_VLLM_GPU_MEMORY_UTILIZATION`` (default 0.85). ``options`` go to ``vllm.LLM`` as they
    are (e.g. ``enable_prompt_embeds=True``, a translator's ``engine_kwargs``), override those
    defaults, and are part of the cache key.
    """
    from lira.models.loading import resolve_path  # here: loading imports torch

    path = resolve_path(model, cache_dir, "qwen3-lm")
    key = (path, tensor_parallel_size, json.dumps(options, sort_keys=True, default=repr))
    if key not in _ENGINES:
        from vllm import LLM

        env = os.environ.get
        kwargs: dict[str, object] = {
            "trust_remote_code": False,
            "dtype": env("LIRA_VLLM_DTYPE", "auto"),
            "max_model_len": env_number("LIRA_VLLM_MAX_MODEL_LEN", 2048),
            "max_num_seqs": default_max_num_seqs(),
            "enforce_eager": env("LIRA_VLLM_ENFORCE_EAGER", "0") == "1",
            "gpu_memory_utilization": env_number("LIRA_VLLM_GPU_MEMORY_UTILIZATION", 0.85),
        }
        kwargs.update(options)
        _ENGINES[key] = LLM(model=path, tensor_parallel_size=tensor_parallel_size, **kwargs)
    return _ENGINES[key]


def vllm_max_num_seqs(cfg: TranslatorConfig) -> int:
    """The sequences a kind=vllm translator's engine runs at once: ``engine_kwargs.max_num_seqs``,
    else ``max_concurrency`` raised to ``LIRA_VLLM_MAX_NUM_SEQS`` (default 64); 0 for the other
    kinds."""
    if cfg.kind != "vllm":
        return 0
    if "max_num_seqs" in cfg.engine_kwargs:
        return int(cfg.engine_kwargs["max_num_seqs"])
    return max(cfg.max_concurrency, default_max_num_seqs())


def in_flight(cfg: TranslatorConfig) -> int:
    """Backend calls ``lira translate`` keeps running at once for ``cfg``: ``max_concurrency``
    requests of one text each (kind=openai), else 1 (a local engine batches inside its call)."""
    return cfg.max_concurrency if cfg.kind == "openai" else 1


class VLLMTranslator:
    """vLLM offline engine: one batched ``llm.chat`` over all pending texts, with
    :func:`vllm_max_num_seqs` sequences at once."""

    def __init__(self, cfg: TranslatorConfig, cache_dir: str = "") -> None:
        self.cfg = cfg
        options = dict(cfg.engine_kwargs)
        seqs = vllm_max_num_seqs(cfg)
        if seqs != default_max_num_seqs():
            options["max_num_seqs"] = seqs  # else the default: the critic's engine is shared
        self.llm = vllm_engine(cfg.model, cfg.tensor_parallel_size, cache_dir=cache_dir, **options)

    def _generate(self, texts: list[str], lang: str) -> list[str]:
        from vllm import SamplingParams

        version = self.cfg.prompt_version
        params = SamplingParams(
            temperature=self.cfg.temperature,
            top_p=self.cfg.top_p if self.cfg.temperature > 0 else 1.0,
            max_tokens=self.cfg.max_new_tokens,
            stop=["\n"] if is_completion(version) else None,
        )
        if is_completion(version):  # a base model: plain text in, its first line out
            prompts = [translation_prompt(t, lang, version) for t in texts]
            outs = self.llm.generate(prompts, params, use_tqdm=False)
            return [first_line(o.outputs[0].text) for o in outs]
        msgs = [chat_messages(translation_prompt(t, lang, version)) for t in texts]
        outs = self.llm.chat(msgs, params, use_tqdm=False)
        return [o.outputs[0].text for o in outs]

    def translate(self, texts: Sequence[str], lang: str) -> list[Translation]:
        """Translate all ``texts`` in one engine call (continuous batching inside vLLM)."""
        return per_item(lambda b: self._generate(b, lang), list(texts))


# ------------------------------------------------------------------------------ OpenAI API
NO_KEY = "EMPTY"
"""What the ``openai`` client sends when no key is configured (vLLM's convention; no secret)."""


def is_loopback(url: str) -> bool:
    """True when ``url``'s host is this machine (localhost, 127.0.0.0/8, ::1)."""
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def api_key(api_key_env: str, base_url: str) -> str | None:
    """The key to send to ``base_url``: only from the environment variable the config names.

    No ``api_key_env`` means no key (never an implicit ``$OPENAI_API_KEY``). A key sent over
    plain http to a host other than this machine is logged as a warning.
    """
    if not api_key_env:
        return None
    key = os.environ.get(api_key_env, "")
    if not key:
        log.warning(
            "api_key_env=%s but that environment variable is empty or unset; "
            "no API key is sent to %s", api_key_env, base_url,
        )  # fmt: skip
        return None
    if urllib.parse.urlsplit(base_url).scheme.lower() != "https" and not is_loopback(base_url):
        log.warning(
            "the API key from $%s is sent to %s over plain http (readable on the network); "
            "use an https:// base_url or a server on 127.0.0.1", api_key_env, base_url,
        )  # fmt: skip
    return key


class ChatClient:
    """Chat completions against an OpenAI-compatible server, with timeout and retries.

    Uses the ``openai`` package when installed, else ``urllib``. Retries use exponential
    backoff with jitter (0.5 s, 1 s, 2 s, …); the last error is raised. An API key is sent
    only when ``api_key_env`` names an environment variable (see :func:`api_key`).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "",
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key(api_key_env, self.base_url)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        try:
            import openai

            self._client = openai.OpenAI(
                base_url=self.base_url,
                api_key=self.api_key or NO_KEY,  # never falls back to $OPENAI_API_KEY
                timeout=timeout_s,
                max_retries=0,
            )
        except ImportError:
            self._client = None

    def _once(self, messages: list[dict[str, str]], **kw: object) -> str:
        if self._client is not None:
            r = self._client.chat.completions.create(model=self.model, messages=messages, **kw)
            return r.choices[0].message.content or ""
        body = json.dumps({"model": self.model, "messages": messages, **kw}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(
            f"{self.base_url}/chat/completions", data=body, headers=headers
        )
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
            data = json.loads(resp.read())
        return data["choices"][0]["message"]["content"] or ""

    def complete(self, messages: list[dict[str, str]], **kw: object) -> str:
        """The assistant's reply; retried ``max_retries`` times with exponential backoff."""
        for attempt in range(self.max_retries + 1):
            try:
                return self._once(messages, **kw)
            except Exception as e:
                if attempt == self.max_retries:
                    raise
                wait = self.backoff_s * 2**attempt * (1 + 0.1 * random.random())
                log.warning("%s: %s; retry %d in %.1fs", self.base_url, e, attempt + 1, wait)
                time.sleep(wait)
        raise AssertionError("unreachable")


class OpenAITranslator:
    """An OpenAI-compatible server (vLLM, SGLang, TGI…) with bounded concurrency."""

    def __init__(self, cfg: TranslatorConfig) -> None:
        self.cfg = cfg
        self.client = ChatClient(
            cfg.base_url, cfg.model, cfg.api_key_env, cfg.timeout_s, cfg.max_retries
        )

    def _one(self, text: str, lang: str) -> Translation:
        t0 = time.perf_counter()
        kw: dict[str, float | int] = {
            "temperature": self.cfg.temperature,
            "max_tokens": self.cfg.max_new_tokens,
        }
        if self.cfg.temperature > 0:
            kw["top_p"] = self.cfg.top_p
        try:
            msgs = chat_messages(translation_prompt(text, lang, self.cfg.prompt_version))
            return Translation(self.client.complete(msgs, **kw), None, time.perf_counter() - t0)
        except Exception as e:
            return Translation(None, f"{type(e).__name__}: {e}", time.perf_counter() - t0)

    def translate(self, texts: Sequence[str], lang: str) -> list[Translation]:
        """Translate ``texts`` with at most ``max_concurrency`` requests in flight (the runner
        sends one text per call, from ``max_concurrency`` threads of its own)."""
        if len(texts) == 1:
            return [self._one(texts[0], lang)]
        with ThreadPoolExecutor(max_workers=self.cfg.max_concurrency) as pool:
            return list(pool.map(lambda t: self._one(t, lang), texts))


def build_translator(cfg: TranslatorConfig, cache_dir: str = "") -> TranslatorBackend:
    """The backend object for ``cfg.kind`` (``reference`` translators are never built);
    ``cache_dir`` (``models.cache_dir``) is where local backends find demo models."""
    if cfg.kind == "transformers":
        return TransformersTranslator(cfg, cache_dir=cache_dir)
    if cfg.kind == "vllm":
        return VLLMTranslator(cfg, cache_dir=cache_dir)
    if cfg.kind == "openai":
        return OpenAITranslator(cfg)
    if cfg.kind == "llama_cpp":
        from lira.translation.llama_cpp import LlamaCppTranslator  # here: llama_cpp imports this

        return LlamaCppTranslator(cfg, cache_dir=cache_dir)
    raise ValueError(
        f"translator {cfg.name!r} has kind={cfg.kind!r}, which is never generated; "
        "fill it with `lira translate CONFIG --import FILE --translator NAME`"
    )

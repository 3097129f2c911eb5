"""The LLM judge (Translation Critic, paper 004 §4.1, App. C.2): scores 1-10 per candidate.

For each (source, candidate) the judge reads the paper's critic prompt and returns
``{"semantic": s, "emotional": e, "pragmatic": p}``. The output is constrained by
:data:`SCORE_SCHEMA` *at decoding time*: vLLM structured outputs on the ``vllm`` path,
``response_format`` json_schema on the ``openai`` path, and an xgrammar logits processor on
the ``transformers`` path. Parsing still validates (:func:`parse_scores`); items that fail are
retried (sampled, temperature ``RETRY_TEMPERATURE``) up to ``max_retries`` times and then
recorded as failures with their raw text — never a crash, never a silent default.
``kind: none`` builds no critic (ablation): candidates carry no scores.

``kind: embedding`` (:class:`EmbeddingCritic`, beyond the paper) needs no LLM: a multilingual
encoder e (the run's g, or ``critic.encoder``) scores semantic = round(1 + 9 (cos(e(x), e(y)) -
cos_low) / (cos_high - cos_low)), clipped to 1-10. An encoder measures meaning only, so
emotional and pragmatic repeat the semantic score (Eq. 7's 0.1 (alpha s + beta e + gamma p)
then reads 0.1 s with the paper's weights, which sum to 1). It costs one encoding per text
(the caller's ``encode`` may cache them: the pipeline passes g's embedding cache) and scales to
any number of candidates; its raw reply records the cosine. A candidate that is no English
translation of its source (:func:`lira.translation.checks.echo_reason`: empty, a copy of the
source, a paraphrase in the source's words, mostly non-Latin letters, or the source quoted inside
an English frame) scores (1, 1, 1) whatever its cosine (a copy has cosine 1): it conveys nothing
to an English reader, so all three dimensions get the lowest score; the raw reply names the
reason (``{"echo": "copy"}``).

:func:`parse_scores` accepts anything (non-str, bytes, huge numbers, deep nesting, random
bytes) and raises only :class:`CriticParseError`; it accepts exactly a JSON object with the
three keys, each an integer 1-10 (no duplicate keys, no extra keys, no floats or booleans).
A pair whose critic failed (a request error, or no usable reply after the retries) is stored
with ``critic_status='failed'`` and no scores; the next ``lira translate`` scores it again.
"""

from __future__ import annotations

import json
import logging
import math
import reprlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lira.prompts import critic_prompt
from lira.translation.checks import echo_reason
from lira.translation.config import CriticConfig
from lira.translation.translators import (
    ChatClient,
    _default_dtype_for,
    chat_messages,
    vllm_engine,
)

if TYPE_CHECKING:
    import numpy as np
    import torch

log = logging.getLogger(__name__)

DIMENSIONS = ("semantic", "emotional", "pragmatic")
SCORE_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {k: {"type": "integer", "minimum": 1, "maximum": 10} for k in DIMENSIONS},
    "required": list(DIMENSIONS),
    "additionalProperties": False,
}
"""JSON schema of the critic's answer (integers 1-10 for the three dimensions)."""
RETRY_TEMPERATURE = 0.7
MAX_REPLY_CHARS = 4096
"""Longer replies are rejected unparsed (a valid answer is ~60 characters)."""
_MAX_NUMBER_CHARS = 32
"""Longer JSON number literals are rejected before conversion (no 4300-digit ints)."""


class CriticParseError(ValueError):
    """The critic's output is not a valid score object."""


_short = reprlib.Repr()
_short.maxstring = _short.maxother = 60
_short.maxlevel = 2


def _show(value: object) -> str:
    """A short, never-failing description of a parsed JSON value for error messages."""
    try:
        return _short.repr(value)
    except Exception:  # e.g. repr of a pathological object; the type is enough
        return f"<{type(value).__name__}>"


def _number(text: str) -> int | float:
    if len(text) > _MAX_NUMBER_CHARS:
        raise CriticParseError(f"number literal of {len(text)} characters: {text[:20]}…")
    return float(text) if any(c in text for c in ".eE") else int(text)


def _constant(name: str) -> float:
    raise CriticParseError(f"{name} is not a valid score")


def _pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [k for k, _ in pairs]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise CriticParseError(f"duplicate keys {_show(dup)}")
    return dict(pairs)


def validate_scores(obj: object) -> tuple[int, int, int]:
    """(semantic, emotional, pragmatic) from a parsed reply; raises CriticParseError."""
    if not isinstance(obj, dict):
        raise CriticParseError(f"expected a JSON object, got {type(obj).__name__}: {_show(obj)}")
    missing = [k for k in DIMENSIONS if k not in obj]
    if missing:
        raise CriticParseError(f"missing keys {missing} in {_show(obj)}")
    extra = sorted(str(k) for k in set(obj) - set(DIMENSIONS))
    if extra:
        raise CriticParseError(f"unexpected keys {_show(extra)}")
    out = []
    for k in DIMENSIONS:
        v = obj[k]
        if isinstance(v, bool) or not isinstance(v, int):
            raise CriticParseError(f"{k}={_show(v)} is not an integer")
        if not 1 <= v <= 10:
            raise CriticParseError(f"{k}={_show(v)} is outside 1-10")
        out.append(int(v))
    return out[0], out[1], out[2]


def parse_scores(raw: object) -> tuple[int, int, int]:
    """(semantic, emotional, pragmatic) from the critic's raw JSON; raises only CriticParseError."""
    if isinstance(raw, (bytes, bytearray)):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as e:
            raise CriticParseError(f"reply is not UTF-8 ({e.reason} at byte {e.start})") from None
    if not isinstance(raw, str):
        raise CriticParseError(f"expected the reply as text, got {type(raw).__name__}")
    if len(raw) > MAX_REPLY_CHARS:
        raise CriticParseError(
            f"reply of {len(raw)} characters (> {MAX_REPLY_CHARS}): {raw[:80]!r}"
        )
    try:
        obj = json.loads(
            raw,
            parse_int=_number,
            parse_float=_number,
            parse_constant=_constant,
            object_pairs_hook=_pairs,
        )
    except CriticParseError as e:
        raise CriticParseError(f"{e}: {raw[:200]!r}") from None
    except (ValueError, RecursionError, TypeError, OverflowError, MemoryError) as e:
        # JSONDecodeError (a ValueError), nesting too deep, or a value the decoder rejects
        raise CriticParseError(f"not valid JSON ({type(e).__name__}: {_show(str(e))}): "
                               f"{raw[:200]!r}") from None  # fmt: skip
    return validate_scores(obj)


@dataclass
class CriticResult:
    """One judgement: the scores, or the failure with the last raw output."""

    scores: tuple[int, int, int] | None
    raw: str
    error: str | None = None
    attempts: int = 1
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when valid scores were obtained."""
        return self.scores is not None


EMBEDDING_RULE = "echo1"
"""Version of the embedding critic's scoring rule, part of its id (``echo1``: echoes score 1);
changed with the rule, so stores scored by an older rule are scored again."""


def critic_id(cfg: CriticConfig, g_name: str = "") -> str:
    """Identity of a critic (stored with its scores; another critic re-scores). An embedding
    critic is its encoder (``g_name``, the run's g, when ``critic.encoder`` is empty), map and
    rule (:data:`EMBEDDING_RULE`)."""
    if cfg.kind == "embedding":
        enc = cfg.encoder or g_name or "g"
        return f"embedding:{enc}:{cfg.cos_low:g}-{cfg.cos_high:g}:{EMBEDDING_RULE}"
    return f"{cfg.kind}:{cfg.model}:{cfg.prompt_version}"


Encode = Callable[[list[str]], "np.ndarray | torch.Tensor"]
"""texts -> [N, d] sentence vectors (any scale; cosines are taken)."""


def cos_to_score(cos: float, low: float = 0.0, high: float = 1.0) -> int:
    """The embedding critic's 1-10 score of a cosine: 1 + 9 (cos - low) / (high - low) rounded
    half up, clipped to 1-10 (a non-finite cosine scores 1)."""
    if not math.isfinite(cos):
        return 1
    return int(min(10, max(1, math.floor(1.5 + 9 * (cos - low) / (high - low)))))


class EmbeddingCritic:
    """Scores (source, candidate) by cos(e(source), e(candidate)) mapped to 1-10 (``kind:
    embedding``), echoes 1: one ``encode`` of the distinct texts per call; never raises per item."""

    def __init__(self, cfg: CriticConfig, encode: Encode, g_name: str = "") -> None:
        if cfg.kind != "embedding":
            raise ValueError(f"EmbeddingCritic needs critic kind 'embedding', got {cfg.kind!r}")
        self.cfg, self.encode = cfg, encode
        self.id = critic_id(cfg, g_name)

    def cosines(self, sources: Sequence[str], candidates: Sequence[str]) -> list[float]:
        """cos(e(source_i), e(candidate_i)) per pair (each distinct text encoded once)."""
        import torch
        import torch.nn.functional as F

        texts = list(dict.fromkeys([*sources, *candidates]))
        if not texts:
            return []
        vecs = F.normalize(
            torch.as_tensor(self.encode(texts)).float().reshape(len(texts), -1), dim=-1
        )
        row = {t: i for i, t in enumerate(texts)}
        a = vecs[[row[t] for t in sources]]
        b = vecs[[row[t] for t in candidates]]
        return (a * b).sum(-1).tolist()

    def score(
        self, sources: Sequence[str], candidates: Sequence[str], lang: str = ""
    ) -> list[CriticResult]:
        """Judge each pair: (s, s, s) with s = :func:`cos_to_score` of its cosine, or (1, 1, 1)
        for an echo (:func:`~lira.translation.checks.echo_reason`; not encoded)."""
        if len(sources) != len(candidates):
            raise ValueError(f"{len(sources)} sources but {len(candidates)} candidates")
        t0 = time.perf_counter()
        echo = [echo_reason(s, c) for s, c in zip(sources, candidates)]
        live = [i for i, r in enumerate(echo) if r is None]
        try:
            cos = self.cosines([sources[i] for i in live], [candidates[i] for i in live])
        except Exception as e:  # an encoder failure fails the chunk, scored again next run
            err = f"encoder failed: {type(e).__name__}: {e}"
            return [CriticResult(None, f"<{err}>", err) for _ in sources]
        dt = (time.perf_counter() - t0) / max(len(sources), 1)
        by_item = dict(zip(live, cos))
        out = []
        for i, reason in enumerate(echo):
            if reason is not None:
                out.append(CriticResult((1, 1, 1), json.dumps({"echo": reason}), None, 1, dt))
                continue
            c = by_item[i]
            s = cos_to_score(c, self.cfg.cos_low, self.cfg.cos_high)
            out.append(CriticResult((s, s, s), json.dumps({"cos": round(c, 6)}), None, 1, dt))
        return out


class Critic:
    """Scores (source, candidate) pairs; the backend (``cfg.kind``) decides how it decodes.

    ``constrained=False`` turns the decode-time schema off (benchmarks only). ``cache_dir``
    (``models.cache_dir``) is where the local backends find demo models (:mod:`lira.models`).
    """

    def __init__(self, cfg: CriticConfig, constrained: bool = True, cache_dir: str = "") -> None:
        if cfg.kind == "none":
            raise ValueError("critic kind 'none' has no judge; use build_critic (returns None)")
        self.cfg = cfg
        self.constrained = constrained
        self.id = critic_id(cfg)
        if cfg.kind == "transformers":
            self._init_transformers(cache_dir)
        elif cfg.kind == "vllm":
            self.llm = vllm_engine(cfg.model, cfg.tensor_parallel_size, cache_dir=cache_dir)
        elif cfg.kind == "openai":
            self.client = ChatClient(
                cfg.base_url, cfg.model, cfg.api_key_env, cfg.timeout_s, max_retries=2
            )
        else:
            raise ValueError(f"unknown critic kind {cfg.kind!r}; use transformers|vllm|openai|none")

    # ------------------------------------------------------------------ backends
    def _init_transformers(self, cache_dir: str) -> None:
        # imported here: an API or embedding critic never loads torch, transformers or xgrammar
        import torch
        import xgrammar as xgr

        from lira.models.generators import load_causal_lm

        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = _default_dtype_for(self.device)
        self.model, self.tokenizer = load_causal_lm(self.cfg.model, cache_dir, dtype=dtype)
        self.model.to(self.device).eval()
        info = xgr.TokenizerInfo.from_huggingface(
            self.tokenizer, vocab_size=self.model.config.vocab_size
        )
        self.grammar = xgr.GrammarCompiler(info).compile_json_schema(
            json.dumps(SCORE_SCHEMA), any_whitespace=False
        )

    def _generate_transformers(self, prompts: list[str], sample: bool) -> list[str]:
        import torch
        from xgrammar.contrib.hf import LogitsProcessor

        tok = self.tokenizer
        texts = [
            tok.apply_chat_template(chat_messages(p), tokenize=False, add_generation_prompt=True)
            for p in prompts
        ]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(
            self.device
        )
        kw: dict[str, object] = {"max_new_tokens": self.cfg.max_new_tokens, "do_sample": sample}
        if sample:
            kw["temperature"] = RETRY_TEMPERATURE
        if self.constrained:
            kw["logits_processor"] = [LogitsProcessor(self.grammar)]  # one per generate call
        with torch.no_grad():
            out = self.model.generate(**enc, **kw, pad_token_id=tok.pad_token_id)
        return tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)

    def _generate_vllm(self, prompts: list[str], sample: bool) -> list[str]:
        from vllm import SamplingParams

        kw: dict[str, object] = {}
        if self.constrained:
            from vllm.sampling_params import StructuredOutputsParams

            kw["structured_outputs"] = StructuredOutputsParams(json=SCORE_SCHEMA)
        params = SamplingParams(
            temperature=RETRY_TEMPERATURE if sample else 0.0,
            max_tokens=self.cfg.max_new_tokens,
            **kw,
        )
        outs = self.llm.chat([chat_messages(p) for p in prompts], params, use_tqdm=False)
        return [o.outputs[0].text for o in outs]

    def _generate_openai(self, prompts: list[str], sample: bool) -> list[str]:
        kw: dict[str, object] = {
            "temperature": RETRY_TEMPERATURE if sample else 0.0,
            "max_tokens": self.cfg.max_new_tokens,
        }
        if self.constrained:
            kw["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "critic_scores", "strict": True, "schema": SCORE_SCHEMA},
            }

        def one(p: str) -> str:
            try:
                return self.client.complete(chat_messages(p), **kw)
            except Exception as e:  # recorded as the raw text of a failed attempt
                return f"<request failed: {type(e).__name__}: {e}>"

        with ThreadPoolExecutor(max_workers=self.cfg.max_concurrency) as pool:
            return list(pool.map(one, prompts))

    def _generate(self, prompts: list[str], sample: bool) -> list[str]:
        fn = {
            "transformers": self._generate_transformers,
            "vllm": self._generate_vllm,
            "openai": self._generate_openai,
        }[self.cfg.kind]
        out: list[str] = []
        bs = len(prompts) if self.cfg.kind == "vllm" else self.cfg.batch_size
        for i in range(0, len(prompts), bs):
            chunk = prompts[i : i + bs]
            try:
                out += fn(chunk, sample)
            except Exception as e:  # a backend crash becomes a failed attempt for the chunk
                out += [f"<generation failed: {type(e).__name__}: {e}>"] * len(chunk)
        return out

    # ------------------------------------------------------------------ public
    def score(
        self, sources: Sequence[str], candidates: Sequence[str], lang: str
    ) -> list[CriticResult]:
        """Judge each (source, candidate) pair (source language ``lang``); never raises per item."""
        if len(sources) != len(candidates):
            raise ValueError(f"{len(sources)} sources but {len(candidates)} candidates")
        prompts = [
            critic_prompt(s, c, lang, self.cfg.prompt_version) for s, c in zip(sources, candidates)
        ]
        results: list[CriticResult | None] = [None] * len(prompts)
        raws = [""] * len(prompts)
        errors = [""] * len(prompts)
        todo = list(range(len(prompts)))
        t0 = time.perf_counter()
        for attempt in range(self.cfg.max_retries + 1):
            outs = self._generate([prompts[i] for i in todo], sample=attempt > 0)
            left = []
            for i, raw in zip(todo, outs):
                raws[i] = raw
                try:
                    text = raw.strip() if isinstance(raw, str) else raw
                    results[i] = CriticResult(parse_scores(text), raw, None, attempt + 1)
                except CriticParseError as e:
                    errors[i] = str(e)
                    left.append(i)
            todo = left
            if not todo:
                break
        dt = (time.perf_counter() - t0) / max(len(prompts), 1)
        if todo:
            log.warning(
                "critic failed on %d/%d pairs after %d attempts (first: %s)",
                len(todo), len(prompts), self.cfg.max_retries + 1, errors[todo[0]],
            )  # fmt: skip
        for i in todo:
            results[i] = CriticResult(None, raws[i], errors[i], self.cfg.max_retries + 1)
        for r in results:
            r.seconds = dt  # type: ignore[union-attr]
        return results  # type: ignore[return-value]


def build_critic(
    cfg: CriticConfig,
    constrained: bool = True,
    cache_dir: str = "",
    encode: Encode | None = None,
    g_name: str = "",
) -> Critic | EmbeddingCritic | None:
    """The configured critic, or None for ``kind: none`` (ablation: candidates carry no scores).
    ``kind: embedding`` needs ``encode`` (texts -> vectors; :func:`st_encode` for
    ``critic.encoder``, the caller's g otherwise) and names it ``g_name``."""
    if cfg.kind == "none":
        return None
    if cfg.kind == "embedding":
        if encode is None:
            if not cfg.encoder:
                raise ValueError(
                    "critic kind 'embedding' with the run's g needs an encode function"
                )
            encode = st_encode(cfg.encoder, cache_dir)
        return EmbeddingCritic(cfg, encode, g_name)
    return Critic(cfg, constrained, cache_dir)


def st_encode(ref: str, cache_dir: str = "") -> Encode:
    """texts -> vectors of the sentence-transformers model ``ref`` (folder, hub id, demo alias),
    with its ``query`` prompt where it has one; a folder that asks for its own code, or will not
    load, is a one-line user error."""
    # imported here: only this critic's encoder needs sentence-transformers (and torch)
    from sentence_transformers import SentenceTransformer

    from lira.demo.references import resolve_model
    from lira.models.loading import load_checked

    path = resolve_model(ref, cache_dir)
    model = load_checked(
        lambda: SentenceTransformer(path, device="cpu", trust_remote_code=False),
        ref,
        path,
        "minilm",
    )
    # a model with a query prompt (EmbeddingGemma) reads source and candidate as it reads queries
    kw = {"prompt_name": "query"} if "query" in (getattr(model, "prompts", None) or {}) else {}
    return lambda texts: model.encode(texts, convert_to_numpy=True, show_progress_bar=False, **kw)

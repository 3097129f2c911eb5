"""The translation stage's configuration: the translator pool, the critic and the store.

``translation.*`` of a run (:class:`TranslationConfig`, with one :class:`TranslatorConfig` per
pool entry and its :class:`CriticConfig`); :class:`TranslationRun` is what the stage's engine
reads of a whole run config.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from lira.config import (
    ConfigError,
    DataConfig,
    ModelsConfig,
    check,
    check_at_least,
    check_model_ref,
)
from lira.prompts import is_completion, unknown_prompt_version

MAX_PATH_CHARS = 4096
"""Longest path a config may name (Linux's PATH_MAX); each part at most 255 bytes (NAME_MAX)."""


def path_too_long(path: str) -> str | None:
    """Why ``path`` cannot name a file on Linux (too long, a part over 255 bytes, NUL), else
    None; the message shows only its start."""
    start = f"{path[:40]!r}…" if len(path) > 40 else repr(path)
    if "\0" in path:
        return f"{start} holds a NUL character; name a file"
    if len(path) > MAX_PATH_CHARS:
        return f"{start} is {len(path)} characters long (at most {MAX_PATH_CHARS}); name a file"
    for part in Path(path).parts:
        if len(part.encode("utf-8", "surrogatepass")) > 255:
            return f"{start} has a part longer than 255 bytes; name a file with shorter names"
    return None


def output_relative_problem(path: str) -> str | None:
    """Why a path read relative to ``output_dir`` is unusable (empty, or leaves it), else None.

    An absolute path is the user's explicit choice and accepted; a relative one must name a
    file inside ``output_dir`` (``../x`` or ``a/../../x`` would write outside the run)."""
    if not path.strip():
        return "is empty; name a file (e.g. translations.sqlite, inside output_dir)"
    too_long = path_too_long(path)
    if too_long:
        return too_long
    p = Path(path).expanduser()
    if p.is_absolute():
        return None
    depth = 0
    for part in p.parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 0:
            break
    if depth < 0:
        return (
            f"{path!r} leaves output_dir (relative paths are inside output_dir); name a file "
            "inside it (e.g. translations.sqlite) or give an absolute path to use a file elsewhere"
        )
    if depth == 0:
        return f"{path!r} is output_dir itself; name a file inside it (e.g. translations.sqlite)"
    return None


LOCAL_KINDS = ("transformers", "vllm", "llama_cpp")
"""Translator kinds that run a model in this process (and so can take a completion prompt)."""

ENGINE_INTS = {
    "max_num_seqs": 1,
    "max_model_len": 1,
    "max_num_batched_tokens": 1,
    "pipeline_parallel_size": 1,
    "seed": 0,
}
"""The integer ``vllm.LLM`` arguments of ``engine_kwargs`` checked here, with their least value."""


def check_client(cfg: TranslatorConfig | CriticConfig, needs_model: bool) -> None:
    """The checks a translator and the critic share: batch and request limits, the endpoint
    of ``kind=openai``, the model (when ``needs_model``) and the prompt version."""
    check_at_least(cfg, batch_size=1, max_retries=0, max_concurrency=1, tensor_parallel_size=1)
    check(cfg.timeout_s > 0, "timeout_s", "must be > 0")
    if cfg.kind == "openai":
        check(bool(cfg.base_url), "base_url", "kind=openai needs base_url (…/v1)")
    if needs_model:
        check(bool(cfg.model), "model", f"kind={cfg.kind} needs a model")
    check_model_ref(cfg.model, "model")
    problem = unknown_prompt_version(cfg.prompt_version)
    check(problem is None, "prompt_version", f"{problem}")
    if is_completion(cfg.prompt_version):
        check(
            isinstance(cfg, TranslatorConfig) and cfg.kind in LOCAL_KINDS,
            "prompt_version",
            f"{cfg.prompt_version!r} is a completion prompt for base models, used by translators "
            "of kind transformers, vllm or llama_cpp (kind=openai and the critic send chat messages); "
            "use paper-v1",
        )


def installed(module: str) -> bool:
    """True when ``module`` can be imported here (found, not imported)."""
    return importlib.util.find_spec(module) is not None


def cuda_present() -> bool:
    """True when torch sees a CUDA GPU (asked only where vLLM is installed, so torch is too)."""
    import torch

    return bool(torch.cuda.is_available())


def pick_engine(model: str, gguf: str) -> tuple[str, str, str]:
    """kind=auto's engine as (kind, model, why): vLLM on a CUDA GPU, else llama.cpp on the GGUF
    file, else transformers (benchmarks/translate_engines.py: llama.cpp 3.0x transformers on 2
    CPU cores)."""
    if not (model or gguf):
        raise ConfigError(
            "model", "kind=auto needs a model (folder, hub id or demo alias) or a gguf file"
        )
    if model and installed("vllm") and cuda_present():
        return "vllm", model, "vLLM is installed and a CUDA GPU is present"
    if gguf and installed("xllamacpp"):
        return (
            "llama_cpp",
            gguf,
            "no vLLM on a CUDA GPU here; llama.cpp (xllamacpp) runs the GGUF file",
        )
    if model:
        why = "GGUF file (gguf)" if not gguf else "llama.cpp (pip install -e '.[llama]')"
        return "transformers", model, f"no vLLM on a CUDA GPU and no {why}"
    raise ConfigError(
        "gguf",
        f"{gguf!r} is a GGUF file and llama.cpp is not installed here (xllamacpp): run "
        "`.venv/bin/pip install -e '.[llama]'`, or set `model` to a folder or hub id that "
        "transformers or vLLM can run",
    )


@dataclass
class TranslatorConfig:
    """One translator of the pool (paper Table 15)."""

    name: str = ""
    """Unique id; it is part of the translation-store key."""
    kind: Literal["auto", "vllm", "openai", "transformers", "llama_cpp", "reference"] = "auto"
    """auto: the fastest engine installed here (vllm on a CUDA GPU, else llama_cpp on ``gguf``,
    else transformers on ``model``); vllm: offline engine; openai: compatible server;
    transformers: local generate; llama_cpp: a GGUF file through llama.cpp (xllamacpp);
    reference: candidates imported with ``lira translate --import`` (never generated)."""
    role: Literal["llm", "mt"] = "llm"
    """llm translators count towards pass@k; mt models fill the remaining slots."""
    model: str = ""
    """Hub id, folder or demo alias (unused for kind=reference; kind=auto: what vLLM and
    transformers run)."""
    gguf: str = ""
    """kind=auto: the same model as one GGUF file (path or demo alias), run by llama.cpp on a
    machine without vLLM on a GPU; empty = never llama.cpp."""
    base_url: str = ""
    """OpenAI-compatible endpoint (kind=openai), e.g. http://127.0.0.1:8000/v1."""
    api_key_env: str = ""
    """Environment variable holding the API key sent to base_url; empty = send no key."""
    temperature: float = 0.0
    """0 = greedy decoding."""
    top_p: float = 1.0
    """Nucleus sampling mass (1 = off)."""
    max_new_tokens: int = 128
    """Generation limit per translation."""
    batch_size: int = 8
    """Texts per generate call / request batch (kind=llama_cpp: its parallel slots; a request
    carries twice as many)."""
    threads: int = 0
    """kind=llama_cpp: CPU threads of the engine; 0 = every CPU this process may use."""
    tensor_parallel_size: int = 1
    """vLLM: GPUs one engine splits the model over; for data parallel run one --shard per group."""
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    """vLLM: extra vllm.LLM(...) arguments over the LIRA_VLLM_* defaults; not in the store key."""
    max_concurrency: int = 8
    """Requests in flight (kind=openai, one text each, refilled as each one ends); kind=vllm:
    the engine's max_num_seqs when above LIRA_VLLM_MAX_NUM_SEQS (default 64)."""
    timeout_s: float = 60.0
    """Per-request timeout in seconds (kind=openai)."""
    max_retries: int = 3
    """Retries of a failed request before the row is recorded as failed."""
    lang_codes: dict[str, str] = field(default_factory=dict)
    """Language-code map for MT models (NLLB: {'de': 'deu_Latn', 'en': 'eng_Latn'})."""
    prompt_version: str = "paper-v1"
    """Version of the translation prompt (lira/prompts.py); part of the store key. paper-v1:
    chat models; fewshot-v1: base (completion) models such as demo:gemma3."""
    train_only: bool = False
    """Use this translator's candidates for training only, never at evaluation (gold refs)."""
    engine_reason: ClassVar[str] = ""
    """Why kind=auto picked this engine (set on the instance; empty where kind was given)."""

    def __post_init__(self) -> None:
        check(bool(self.name), "name", "every translator needs a unique name")
        if self.kind == "auto":  # resolved once, here: the store key names the engine that ran
            check_model_ref(self.gguf, "gguf")
            self.kind, self.model, why = pick_engine(self.model, self.gguf)  # type: ignore[assignment]
            self.engine_reason = why  # type: ignore[misc]
            self.gguf = ""
        check(not self.gguf, "gguf", f"is read by kind=auto only; kind={self.kind} runs `model`")
        check(self.temperature >= 0, "temperature", "must be >= 0")
        check(0 < self.top_p <= 1, "top_p", "must be in (0, 1]")
        check_at_least(self, max_new_tokens=1, threads=0)
        own = sorted({"model", "tensor_parallel_size"} & set(self.engine_kwargs))
        check(not own, "engine_kwargs", f"set {own} as the translator's own key, not here")
        check(
            self.engine_kwargs.get("data_parallel_size", 1) in (1, "1"),
            "engine_kwargs",
            "vllm.LLM does not run data parallel in one process; run one `lira translate "
            "--shard I/N` per GPU group instead (README: Translating on several nodes)",
        )
        for name, low in ENGINE_INTS.items():
            value = self.engine_kwargs.get(name, low)
            check(
                isinstance(value, int) and not isinstance(value, bool) and value >= low,
                f"engine_kwargs.{name}",
                f"expected an integer >= {low}, got {value!r}",
            )
        check_client(self, needs_model=self.kind in (*LOCAL_KINDS, "openai"))


@dataclass
class CriticConfig:
    """The judge scoring (source, candidate) on semantic/emotional/pragmatic 1-10: an LLM (the
    paper's critic), or a multilingual encoder's cosine (``kind: embedding``, beyond the paper)."""

    kind: Literal["vllm", "openai", "transformers", "embedding", "none"] = "transformers"
    """none: no critic (ablation); every candidate gets neutral scores flagged as such;
    embedding: cos(e(source), e(candidate)) of a multilingual encoder mapped to 1-10 (semantic;
    emotional and pragmatic repeat it), one encoding per text, no LLM."""
    model: str = "demo:smollm2"
    """Hub id, folder or demo alias of the critic LLM."""
    base_url: str = ""
    """OpenAI-compatible endpoint (kind=openai), e.g. http://127.0.0.1:8000/v1."""
    api_key_env: str = ""
    """Environment variable holding the API key sent to base_url; empty = send no key."""
    max_new_tokens: int = 48
    """Generation limit of a critic reply (a JSON object of three scores)."""
    batch_size: int = 8
    """(source, candidate) pairs per generate call / request batch."""
    max_retries: int = 2
    """Retries of a failed or unparsable reply before neutral scores are used."""
    timeout_s: float = 60.0
    """Per-request timeout in seconds (kind=openai)."""
    max_concurrency: int = 8
    """Concurrent requests (kind=openai)."""
    tensor_parallel_size: int = 1
    """vLLM: GPUs one critic engine splits the model over."""
    prompt_version: str = "paper-v1"
    """Version of the critic prompt (lira/prompts.py); part of the store key."""
    encoder: str = ""
    """kind=embedding: sentence-transformers model (folder, hub id or demo alias) whose cosine
    scores a pair; empty = the run's g (models.encoder, through its embedding cache)."""
    cos_low: float = 0.0
    """kind=embedding: the cosine mapped to score 1 (lower cosines also score 1)."""
    cos_high: float = 1.0
    """kind=embedding: the cosine mapped to score 10; score = 1 + 9 (cos - cos_low) / (cos_high -
    cos_low) rounded half up, clipped to 1-10."""

    def __post_init__(self) -> None:
        check(self.max_new_tokens >= 16, "max_new_tokens", "JSON scores need >= 16 tokens")
        check_client(self, needs_model=self.kind not in ("none", "embedding"))
        check_model_ref(self.encoder, "encoder")
        check(
            -1.0 <= self.cos_low < self.cos_high <= 1.0,
            "cos_low",
            f"needs -1 <= cos_low < cos_high <= 1 (got {self.cos_low}, {self.cos_high})",
        )


@dataclass
class TranslationConfig:
    """The translator pool and its pass@k budget (paper §4.1.2, App. D.3, Table 15).

    The K candidates of a source text are the first ``pass_at_k`` LLM translators followed by
    the first ``num_candidates - pass_at_k`` MT models; pass@0 uses MT models only.
    """

    llm_translators: list[TranslatorConfig] = field(default_factory=list)
    """LLM translators (pass@k draws from these first), one TranslatorConfig each."""
    mt_translators: list[TranslatorConfig] = field(default_factory=list)
    """MT models filling the remaining num_candidates - pass_at_k slots."""
    pass_at_k: int = 0
    """k: LLM candidates among the K (Table 15; 0 = MT only). Tables 1-2 are pass@4; 0 here because
    the default pool is empty (configs/retrieval_qwen3_8b.yaml sets 4)."""
    num_candidates: int = 4
    """K: candidates per source text (paper Table 15: T1-T4, so 4)."""
    critic: CriticConfig = field(default_factory=CriticConfig)
    """The LLM critic scoring each candidate (``translation.critic.*``)."""
    store: str = "translations.sqlite"
    """SQLite store path: a relative path is inside the run's output directory (it may not
    leave it with '..'); an absolute path points anywhere (logged when used)."""
    source_max_chars: int = 2000
    """Longer sources are truncated (with a warning, recorded in the store)."""
    commit_every: int = 16
    """Rows written per transaction."""

    def __post_init__(self) -> None:
        check(self.num_candidates >= 1, "num_candidates", "must be >= 1")
        check(self.pass_at_k >= 0, "pass_at_k", "must be >= 0 (pass@0 = MT models only)")
        check(
            self.pass_at_k <= len(self.llm_translators),
            "pass_at_k",
            f"pass@{self.pass_at_k} needs {self.pass_at_k} LLM translators but "
            f"llm_translators lists {len(self.llm_translators)}; add translators or lower pass_at_k",
        )
        check(
            self.pass_at_k <= self.num_candidates,
            "pass_at_k",
            f"must be <= num_candidates ({self.num_candidates})",
        )
        names = [t.name for t in self.llm_translators + self.mt_translators]
        dup = sorted({n for n in names if names.count(n) > 1})
        check(not dup, "llm_translators", f"translator names must be unique, repeated: {dup}")
        for t in self.llm_translators:
            check(t.role == "llm", "llm_translators", f"'{t.name}' has role={t.role}")
        for t in self.mt_translators:
            check(t.role == "mt", "mt_translators", f"'{t.name}' has role={t.role}; set role: mt")
        check(self.source_max_chars >= 16, "source_max_chars", "must be >= 16")
        check(self.commit_every >= 1, "commit_every", "must be >= 1")
        problem = output_relative_problem(self.store)
        check(problem is None, "store", f"{problem}")

    def active_translators(self) -> list[TranslatorConfig]:
        """The translators of the pass@k budget: k LLMs, then MT models up to K candidates."""
        mt = self.mt_translators[: max(self.num_candidates - self.pass_at_k, 0)]
        return self.llm_translators[: self.pass_at_k] + mt

    def required_translators(self, test_time: bool = False) -> list[TranslatorConfig]:
        """:meth:`active_translators` (``test_time``: those that are not ``train_only``); a
        ConfigError naming the ``translation.*`` keys when none is left."""
        active = [t for t in self.active_translators() if not (test_time and t.train_only)]
        what = "active translator that is not train_only" if test_time else "active translator"
        check(
            bool(active),
            "translation",
            f"no {what} (translation.pass_at_k={self.pass_at_k} of "
            f"{len(self.llm_translators)} translation.llm_translators, translation.num_candidates="
            f"{self.num_candidates} with {len(self.mt_translators)} translation.mt_translators); "
            "add an MT model to translation.mt_translators (with num_candidates > pass_at_k) or "
            "an LLM to translation.llm_translators (with pass_at_k >= 1)",
        )
        return active


class ModelsRun(Protocol):
    """A run config's models (every stage's run config is one)."""

    models: ModelsConfig


class PoolRun(ModelsRun, Protocol):
    """What translating with the pool reads of a run config (a ``RunConfig`` is one)."""

    output_dir: str
    translation: TranslationConfig


@dataclass
class Pool:
    """A :class:`PoolRun` outside a whole run (a saved model translating with its own pool)."""

    models: ModelsConfig
    translation: TranslationConfig
    output_dir: str = ""


class TranslationRun(PoolRun, Protocol):
    """The parts of a run config the translation stage reads (a ``RunConfig`` is one)."""

    seed: int
    data: DataConfig

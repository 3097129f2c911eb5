"""Resolving model references and loading them: hub id, local folder or ``demo:<name>``.

Every loader of :mod:`lira.models` goes through :func:`resolve_path` (demo aliases are built by
:mod:`lira.demo`), so the same code serves the tiny demo models on a CPU and the paper's models
on a GPU node, and a missing folder or an offline hub gives one message naming the fix.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch
from torch import Tensor, nn
from transformers import (
    AutoConfig,
    AutoTokenizer,
    BatchEncoding,
    PretrainedConfig,
    PreTrainedTokenizerBase,
)

from lira.demo.references import resolve_model
from lira.errors import LiRAError, MissingFileError, UserInputError
from lira.model_paths import looks_local, missing_model

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
POOLINGS = ("mean", "cls", "last")
T = TypeVar("T")

# --------------------------------------------------------------------------------------------
# Pooling (pure functions)
# --------------------------------------------------------------------------------------------


def last_token_index(mask: Tensor) -> Tensor:
    """Index of the last attended position of each row, for left or right padding: [B]."""
    length = mask.shape[1]
    flipped = mask.flip(dims=[1]).to(torch.long)  # [B, L]
    return length - 1 - flipped.argmax(dim=1)


def pool(hidden: Tensor, mask: Tensor, how: str) -> Tensor:
    """Pool token states [B, L, d] with mask [B, L] into sentence vectors [B, d].

    ``mean``: average over attended tokens; ``cls``: the first position (right padding, as
    BERT-style tokenizers produce); ``last``: the last attended token (Qwen3-Embedding).
    """
    if how == "mean":
        m = mask.unsqueeze(-1).to(hidden.dtype)  # [B, L, 1]
        return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)
    if how == "cls":
        return hidden[:, 0]
    if how == "last":
        idx = last_token_index(mask)  # [B]
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), idx]
    raise ValueError(f"unknown pooling {how!r}; choose one of {', '.join(POOLINGS)}")


# --------------------------------------------------------------------------------------------
# Resolving and loading
# --------------------------------------------------------------------------------------------


def torch_dtype(dtype: str | torch.dtype) -> torch.dtype | str:
    """``'float32'|'bfloat16'|'float16'|'auto'`` or a torch dtype -> what ``from_pretrained`` takes."""
    if isinstance(dtype, torch.dtype) or dtype == "auto":
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)} or 'auto'")
    return DTYPES[dtype]


def resolve_path(ref: str, cache_dir: str = "", suggest: str = "minilm") -> str:
    """A model reference as something ``from_pretrained`` takes; clear errors for bad folders."""
    if not ref:
        raise ValueError(f"empty model reference; give a hub id, a folder or demo:{suggest}")
    path = resolve_model(ref, cache_dir)
    local = Path(path).expanduser()
    if local.exists():
        if not local.is_dir():
            raise FileNotFoundError(f"model path {local} is a file, not a model folder")
        if not (local / "config.json").is_file() and not (local / "adapter_config.json").is_file():
            raise FileNotFoundError(
                f"{local} has no config.json: not a Hugging Face model folder "
                f"(write one with save_pretrained, or use demo:{suggest})"
            )
        return str(local)
    if looks_local(path):
        raise missing_model(local, suggest)
    return path


def peft_base(path: str) -> str | None:
    """The base model of a peft adapter folder (``adapter_config.json``, no ``config.json``),
    e.g. an unmerged ``lira tune-translator`` output; None for any other reference."""
    folder = Path(path)
    adapter = folder / "adapter_config.json"
    if not adapter.is_file() or (folder / "config.json").is_file():
        return None
    return json.loads(adapter.read_text(encoding="utf-8")).get("base_model_name_or_path") or None


class Pretrained(Protocol):
    """A class with ``from_pretrained`` (a transformers Auto class, a model or a config class)."""

    def from_pretrained(self, path: str, *args: object, **kwargs: object) -> object:
        """The object loaded from ``path`` (a folder or a hub id)."""


def _load(cls: Pretrained, path: str, ref: str, suggest: str, **kwargs: object) -> Any:
    """``cls.from_pretrained(path, trust_remote_code=False)``, naming the fix when the hub cannot
    provide ``ref`` (the result's type is whatever ``cls`` loads)."""
    return load_checked(
        lambda: cls.from_pretrained(path, trust_remote_code=False, **kwargs), ref, path, suggest
    )


CODE_CONFIGS = (
    "config.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
    "processor_config.json",
    "feature_extractor_config.json",
    "image_processor_config.json",
    "video_preprocessor_config.json",
    "adapter_config.json",
)
"""The JSON files of a model folder whose ``auto_map`` makes transformers import the folder's
own Python modules."""


def remote_code_key(folder: str | Path, modules: bool = True) -> str | None:
    """``<file>: <key> ...`` when a local model folder (or a sub-folder of it) asks for its own
    Python code: an ``auto_map`` in a config transformers reads, or (``modules``) a
    sentence-transformers module class outside ``sentence_transformers``; None otherwise (and
    for a hub id)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    names = (*CODE_CONFIGS, "modules.json") if modules else CODE_CONFIGS
    for where in (folder, *sorted(p for p in folder.iterdir() if p.is_dir())):
        for name in names:
            f = where / name
            if not f.is_file() or f.stat().st_size > 1 << 20:
                continue
            try:
                doc = json.loads(f.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError, RecursionError, OSError):
                continue  # the loader names a damaged file
            rel = f.relative_to(folder).as_posix()
            if name == "modules.json":
                types = (
                    [m.get("type") for m in doc if isinstance(m, dict)]
                    if isinstance(doc, list)
                    else []
                )
                foreign = [t for t in types if not str(t).startswith("sentence_transformers.")]
                if foreign:
                    return f"{rel}: module class {str(foreign[0])[:100]!r} (not sentence_transformers')"
            elif isinstance(doc, dict) and doc.get("auto_map"):
                return f"{rel}: auto_map {json.dumps(doc['auto_map'])[:100]}"
    return None


def refuse_remote_code(ref: str, path: str | Path) -> None:
    """UserInputError (one line naming the file and the key) when the local folder ``path`` of
    model ``ref`` asks for its own Python code: LiRA never runs it, whatever stdin answers."""
    key = remote_code_key(path)
    if key is not None:
        raise UserInputError(
            f"model {ref!r} ({path}) needs its own Python code ({key}); LiRA never runs code "
            "from a model folder or repository: remove that key if the folder's model is one "
            "transformers supports natively, or use such a model"
        )


def load_checked(load: Callable[[], T], ref: str, path: str, suggest: str) -> T:
    """``load()`` of model ``ref`` (resolved to ``path``), with a one-line user error when it
    cannot load: refused code (:func:`refused_payload`, and a local folder that asks for its
    own code is refused before ``load`` runs: :func:`refuse_remote_code`), a damaged folder, a
    name the hub did not provide (:func:`unloadable`)."""
    refuse_remote_code(ref, path)
    try:
        return load()
    except LiRAError:
        raise
    except (pickle.UnpicklingError, ValueError) as e:
        refused = refused_payload(ref, path, e)
        if refused is not None:
            raise refused from None
        if not Path(path).exists():
            raise
        raise unloadable(ref, path, suggest, e) from e
    except OSError as e:
        if e.errno is not None:  # the disk refused (permissions, space): the CLI names it
            raise
        raise unloadable(ref, path, suggest, e) from e


def unloadable(ref: str, path: str, suggest: str, e: BaseException) -> LiRAError:
    """The one-line error for a model that would not load: a local folder that is incomplete
    or damaged (UserInputError), or a name the hub did not provide (MissingFileError)."""
    why = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
    if Path(path).exists():
        return UserInputError(
            f"could not load model {ref!r} from {path} ({why}); give a folder holding a "
            f"complete Hugging Face model (config.json, weights, tokenizer) or demo:{suggest}"
        )
    return MissingFileError(
        f"could not load model {ref!r}: it is not a local folder and the Hugging Face hub did "
        f"not provide it ({why}); check the name and the network (offline?), or give a local "
        f"folder path or demo:{suggest}"
    )


def refused_payload(ref: str, path: str, e: BaseException) -> UserInputError | None:
    """The one-line error when transformers refused to run code from a model: a pickle that
    ``torch.load(weights_only=True)`` will not unpickle, or a repository that needs its own
    Python code (``trust_remote_code``); None for any other error."""
    text = str(e)
    if isinstance(e, pickle.UnpicklingError) or "weights_only" in text:
        return UserInputError(
            f"model {ref!r} ({path}): its weights file is a pickle holding more than tensors, "
            "which could run code; LiRA loads weights only: use a model saved as safetensors "
            "(or convert it where you trust it)"
        )
    if "trust_remote_code" in text:
        return UserInputError(
            f"model {ref!r} ({path}) needs its own Python code (trust_remote_code); LiRA never "
            "runs code from a model repository or folder: use a model that transformers "
            "supports natively"
        )
    return None


def from_pretrained(
    cls: Pretrained, path: str, ref: str, suggest: str, *, cache_dir: str = "", **kwargs: object
) -> Any:
    """``cls.from_pretrained(path)``; a peft adapter folder loads its base and wraps it."""
    base_ref = peft_base(path)
    if base_ref is None:
        return _load(cls, path, ref, suggest, **kwargs)
    from peft import PeftModel

    base_path = resolve_path(base_ref, cache_dir, suggest)
    base = from_pretrained(cls, base_path, base_ref, suggest, cache_dir=cache_dir, **kwargs)
    return load_checked(lambda: PeftModel.from_pretrained(base, path), ref, path, suggest)


def load_model_config(
    path: str, ref: str, suggest: str, *, cache_dir: str = ""
) -> PretrainedConfig:
    """``AutoConfig`` of a resolved path (of a peft adapter folder: its base model's)."""
    base_ref = peft_base(path)
    if base_ref is not None:
        path, ref = resolve_path(base_ref, cache_dir, suggest), base_ref
    return _load(AutoConfig, path, ref, suggest)


def load_tokenizer(
    path: str, ref: str, suggest: str, *, cache_dir: str = "", **kwargs: object
) -> PreTrainedTokenizerBase:
    """``AutoTokenizer`` of a resolved path, with the same clear errors as the model; a peft
    adapter folder without tokenizer files gives its base model's."""
    base_ref = peft_base(path)
    if base_ref is not None and not (Path(path) / "tokenizer_config.json").is_file():
        path, ref = resolve_path(base_ref, cache_dir, suggest), base_ref
    return _load(AutoTokenizer, path, ref, suggest, **kwargs)


def with_pad_token(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """Batched generation needs a pad token: EOS (else UNK) where the tokenizer has none."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    return tokenizer


CHARS_PER_TOKEN = 16
"""Default character cap per token of the limit (``models.max_chars: 0``): an English token is
about 4 characters, so the cap never cuts what the tokenizer would keep in practice."""


def char_cap(max_chars: int, max_length: int) -> int:
    """The character cap of texts fed to a model: ``max_chars``, or 16 x its token limit."""
    return max_chars if max_chars > 0 else CHARS_PER_TOKEN * max_length


def cap_chars(texts: list[str], max_chars: int) -> list[str]:
    """Each text cut to ``max_chars`` characters (0 = uncut), so a 60,000-character text is
    not tokenised in full only to be truncated to the token limit."""
    return [t[:max_chars] for t in texts] if max_chars > 0 else list(texts)


def tokenize_batch(
    tokenizer: PreTrainedTokenizerBase,
    texts: list[str],
    max_length: int,
    prompt: str = "",
    max_chars: int = 0,
) -> BatchEncoding:
    """``prompt + text`` of each text (cut to ``max_chars`` characters first; 0 = uncut),
    padded and truncated to ``max_length`` tokens, as CPU tensors."""
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings, not a single string")
    return tokenizer(
        [prompt + t for t in cap_chars(texts, max_chars)],
        padding=True,
        truncation=True,
        max_length=max_length,
        return_tensors="pt",
    )


def hidden_size(config: PretrainedConfig) -> int:
    """The hidden width of a transformers config (``hidden_size``, ``d_model`` or ``dim``)."""
    for key in ("hidden_size", "d_model", "dim"):
        value = getattr(config, key, None)
        if isinstance(value, int):
            return value
    raise ValueError(f"cannot find the hidden size of a {type(config).__name__}")


def folder_fingerprint(folder: Path) -> str:
    """Names, sizes and mtimes of a model folder's weight/config files (cheap, no hashing)."""
    parts = []
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.suffix in (".safetensors", ".bin", ".json", ".pt", ".model"):
            st = p.stat()
            parts.append(f"{p.relative_to(folder)}:{st.st_size}:{int(st.st_mtime)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def module_device(module: nn.Module) -> torch.device:
    """The device of a module's first parameter (cpu for a parameter-free module)."""
    try:
        return next(module.parameters()).device
    except StopIteration:
        return torch.device("cpu")


class HFModule(nn.Module):
    """A transformers model and its tokenizer as one module (h and the token-level g):
    ``model``, ``tokenizer``, ``max_length``, ``name``, the hidden size ``dim`` and ``device``;
    texts are cut to ``max_chars`` characters before tokenising (0: 16 x ``max_length``)."""

    def __init__(
        self,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        max_length: int = 128,
        name: str = "",
        max_chars: int = 0,
    ) -> None:
        super().__init__()
        self.model, self.tokenizer = model, tokenizer
        self.max_length, self.name = max_length, name
        self.max_chars = char_cap(max_chars, max_length)
        self.dim = hidden_size(model.config)
        self.token_dim = self.dim
        """Width of the token stream (the hidden size); ``dim`` is the sentence vector's."""

    @property
    def device(self) -> torch.device:
        """The device of the module's parameters."""
        return module_device(self)

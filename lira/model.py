"""``lira.LiRAModel``: the whole LiRA stack behind one ``encode`` (paper §4, Fig. 1-3).

For a text x in language l the model computes two streams and fuses them (paper §4.2):

- E_en: the backbone h's sentence vector (its pooling and query/document prompts) of the
  English translation y* chosen by Arca's Actor among the stored candidates of x (pass@k
  translators of the config; ``train_only`` translators are never used at inference). English
  input (l = "en") is embedded directly, without translation;
- E_lr: Arca's g(x) → temporal pooling → Adaptor, mean over bins;

and returns ẑ = FusionHead(E_en, E_lr), ℓ2-normalised. Translations come from the translation
store (offline) or, with ``online=True``, the translator pool first fills the store for texts
missing there (:func:`lira.translation.runner.fill_store`, same pass@k translators and critic). ``save_pretrained`` writes a self-describing folder::

    lira_config.json   models / translation / arca / lasr sections + stream dimensions
    head.safetensors   the LaSR fusion head (EMA weights after training)
    arca/              Arca encoder g + Adaptor + Actor (Arca's own format)

The backbone is stored as a reference (hub id, folder or demo alias), not copied.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from lasr.fusion import FusionHead
from lira.checkpoint import read_meta
from lira.config import (
    ArcaConfig,
    LaSRConfig,
    ModelsConfig,
    RunConfig,
    TranslationConfig,
    from_dict,
    to_dict,
)
from lira.translation.types import Candidate

log = logging.getLogger(__name__)

CONFIG_NAME = "lira_config.json"
HEAD_NAME = "head.safetensors"
FORMAT = "lira-v1"
UNKNOWN_LANG = "xx"
"""Language of texts given without ``langs``: never translated (the store keys on language)."""


class LiRAModel(nn.Module):
    """Backbone h + Arca (g, Adaptor, Actor) + LaSR fusion head, with translation look-up."""

    def __init__(
        self,
        models: ModelsConfig,
        translation: TranslationConfig,
        arca_cfg: ArcaConfig,
        lasr: LaSRConfig,
        backbone: Any,
        arca: Any,
        store: Any = None,
        online: bool = False,
        head: FusionHead | None = None,
    ) -> None:
        super().__init__()
        self.models_cfg, self.translation_cfg = models, translation
        self.arca_cfg, self.lasr_cfg = arca_cfg, lasr
        self.backbone = backbone
        self.arca = arca
        self.store, self.online = store, online
        if online and store is None:
            raise ValueError(
                "online translation writes into a store: pass store=TranslationStore(path)"
            )
        self.d_en = int(backbone.dim)
        self.d_lr = int(arca.dim)
        self.head = head or FusionHead(
            self.d_en,
            self.d_lr,
            fusion_dim=lasr.fusion_dim,
            layers=lasr.fusion_layers,
            heads=lasr.fusion_heads,
            dropout=lasr.dropout,
            residual=lasr.fusion_residual,
            use_en=True,
            use_lr=lasr.use_multilingual_encoder,
        )
        self.missing_translations = 0
        self.eval()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(
        cls,
        cfg: RunConfig,
        arca_path: str | Path | None = None,
        store: Any = None,
        online: bool = False,
    ) -> LiRAModel:
        """Build a model from a run config: a trained Arca checkpoint, or a fresh Adaptor."""
        from lira.models import load_backbone

        backbone = load_backbone(cfg.models)
        arca = _load_arca(cfg, backbone, arca_path)
        return cls(cfg.models, cfg.translation, cfg.arca, cfg.lasr, backbone, arca, store, online)

    def save_pretrained(self, path: str | Path) -> None:
        """Write the self-describing folder described in the module docstring."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        meta = {
            "format": FORMAT,
            "models": to_dict(self.models_cfg),
            "translation": to_dict(self.translation_cfg),
            "arca": to_dict(self.arca_cfg),
            "lasr": to_dict(self.lasr_cfg),
            "d_en": self.d_en,
            "d_lr": self.d_lr,
            "store": str(Path(self.store.path).resolve()) if _store_path(self.store) else "",
        }
        (path / CONFIG_NAME).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        state = {k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()}
        save_file(state, str(path / HEAD_NAME))
        self.arca.save_pretrained(path / "arca")

    @classmethod
    def from_pretrained(
        cls, path: str | Path, store: Any = None, online: bool = False, load_store: bool = True
    ) -> LiRAModel:
        """Load a folder written by :meth:`save_pretrained` (the backbone from its reference)."""
        from lira.models import load_backbone

        path = Path(path)
        meta = read_meta(path, CONFIG_NAME, FORMAT,
                         f"a LiRA model folder (no {CONFIG_NAME}); "
                         "write one with LiRAModel.save_pretrained or `lira lasr`")  # fmt: skip
        models = from_dict(ModelsConfig, meta["models"], "models")
        translation = from_dict(TranslationConfig, meta["translation"], "translation")
        arca_cfg = from_dict(ArcaConfig, meta["arca"], "arca")
        lasr = from_dict(LaSRConfig, meta["lasr"], "lasr")
        backbone = load_backbone(models)
        arca = _arca_from_folder(path / "arca", backbone)
        if store is None and load_store and meta.get("store") and Path(meta["store"]).is_file():
            from lira.translation.store import TranslationStore

            store = TranslationStore(meta["store"])
        model = cls(models, translation, arca_cfg, lasr, backbone, arca, store, online)
        model.head.load_state_dict(load_file(str(path / HEAD_NAME)))
        return model.eval()

    # ------------------------------------------------------------------ streams
    def inference_translators(self, train: bool = False) -> list[Any]:
        """The pass@k translators; ``train_only`` ones (gold references) only when training."""
        active = self.translation_cfg.active_translators()
        return active if train else [t for t in active if not t.train_only]

    def candidates(
        self, texts: Sequence[str], langs: Sequence[str], train: bool = False
    ) -> list[list[Candidate]]:
        """Stored English candidates per text (online: the pool first translates missing ones)."""
        out: list[list[Candidate]] = [[] for _ in texts]
        translators = self.inference_translators(train)
        if not translators or self.store is None:
            return out
        groups: dict[str, list[int]] = {}
        for i, lang in enumerate(langs):
            if lang not in ("en", UNKNOWN_LANG):
                groups.setdefault(lang, []).append(i)
        for lang, rows in groups.items():
            sub = [texts[i] for i in rows]
            if self.online:
                from lira.translation.runner import fill_store

                run = RunConfig(models=self.models_cfg, translation=self.translation_cfg)
                fill_store(run, {lang: list(dict.fromkeys(sub))}, self.store)
            found = self.store.candidates(sub, lang, translators)
            for i, c in zip(rows, found):
                out[i] = list(c)
        return out

    @torch.no_grad()
    def english_texts(
        self,
        texts: Sequence[str],
        langs: Sequence[str],
        e_lr: Tensor | None = None,
        train: bool = False,
        batch_size: int = 32,
    ) -> list[str]:
        """The text the backbone embeds for each input: the Actor's arg-max candidate, or the
        input itself (English input, ``use_translations=False``, or no candidate available).

        ``e_lr`` [B, d]: Arca's E_lr of ``texts`` when already computed (saves a pass of g).
        """
        if not self.lasr_cfg.use_translations:
            return list(texts)
        cands = self.candidates(texts, langs, train)
        chosen = list(texts)
        rows = [i for i, c in enumerate(cands) if c]
        self.missing_translations += sum(
            1 for i, lang in enumerate(langs) if lang not in ("en", UNKNOWN_LANG) and not cands[i]
        )
        if not rows:
            return chosen
        if e_lr is None:
            e_lr = self.arca.embed_lr([texts[i] for i in rows], batch_size)
        else:
            e_lr = e_lr[rows]
        for i, k in zip(rows, self._select(e_lr, [cands[i] for i in rows], batch_size)):
            chosen[i] = cands[i][k].text
        return chosen

    def _select(
        self, e_lr: Tensor, cands: list[list[Candidate]], batch_size: int = 32
    ) -> list[int]:
        """Arca's evaluation rule: arg-max of the Actor over c_k = [s, e, p, sim_k] (Eq. 6)."""
        from arca.model import ArcaModel, pad_candidates

        if all(len(c) == 1 for c in cands):
            return [0] * len(cands)
        scores, mask, cand_texts, slot = pad_candidates(cands)
        b, k = mask.shape
        e_c = self.arca.embed_en(cand_texts, batch_size)  # [N, d]
        e_en = e_c.new_zeros(b * k, e_c.shape[-1]).index_copy(0, slot, e_c).view(b, k, -1)
        sim = torch.nn.functional.cosine_similarity(e_lr.float().unsqueeze(1), e_en, dim=-1)
        feats = ArcaModel.features(
            scores, sim, self.lasr_cfg.use_llm_critic, self.lasr_cfg.use_embedding_critic
        )
        dev = next(self.arca.actor.parameters()).device
        logits = self.arca.actor(feats.to(dev), mask.to(dev))  # [B, K]
        return logits.argmax(dim=-1).tolist()

    @torch.no_grad()
    def streams(
        self,
        texts: Sequence[str],
        langs: Sequence[str] | None = None,
        kind: str = "query",
        batch_size: int | None = None,
    ) -> tuple[Tensor, Tensor]:
        """(E_en [B, d_en], E_lr [B, d_lr]) of ``texts`` at inference selection (E_lr zero when
        g is ablated); the encoders run in batches of ``batch_size`` (default: all at once)."""
        if kind not in ("query", "document"):
            raise ValueError(f"kind must be 'query' or 'document', got {kind!r}")
        texts = list(texts)
        langs = list(langs) if langs is not None else [UNKNOWN_LANG] * len(texts)
        if len(langs) != len(texts):
            raise ValueError(
                f"got {len(texts)} texts but {len(langs)} langs; pass one lang per text"
            )
        lc = self.lasr_cfg
        need_lr = lc.use_multilingual_encoder or (lc.use_translations and lc.use_embedding_critic)
        bs = batch_size or max(len(texts), 1)
        e_lr = self.arca.embed_lr(texts, bs).float().cpu() if need_lr and texts else None
        english = self.english_texts(texts, langs, e_lr, batch_size=bs)
        e_en = torch.as_tensor(
            np.asarray(self.backbone.encode(english, langs=None, kind=kind, batch_size=bs))
        ).float()
        if not lc.use_multilingual_encoder or e_lr is None:
            e_lr = torch.zeros(len(texts), self.d_lr)
        return e_en, e_lr

    @torch.no_grad()
    def encode(
        self,
        texts: Sequence[str],
        langs: Sequence[str] | None = None,
        kind: str = "query",
        batch_size: int = 32,
        convert_to_numpy: bool = True,
    ) -> np.ndarray | Tensor:
        """L2-normalised embeddings [N, d_en] (numpy, or torch with convert_to_numpy=False).

        ``langs`` gives each text's language (ISO 639-1); "en" skips translation. The store
        is keyed by language, so without ``langs`` (language "xx" = unknown) texts are
        embedded untranslated.
        """
        if isinstance(texts, str):
            raise TypeError("encode takes a list of texts, got a single string; wrap it in a list")
        texts = list(texts)
        langs = list(langs) if langs is not None else [UNKNOWN_LANG] * len(texts)
        if len(langs) != len(texts):
            raise ValueError(
                f"got {len(texts)} texts but {len(langs)} langs; pass one lang per text"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        was_training = self.head.training
        self.head.eval()
        # Each chunk of many batches: the encoders sort it by length (little padding), the
        # selected translations are batched by their own length, memory stays bounded.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        chunk = batch_size * 16
        z = torch.zeros(len(texts), self.d_en)
        dev = next(self.head.parameters()).device
        for s in range(0, len(texts), chunk):
            idx = order[s : s + chunk]
            sub, sub_langs = [texts[i] for i in idx], [langs[i] for i in idx]
            e_en, e_lr = self.streams(sub, sub_langs, kind, batch_size=batch_size)
            z[idx] = self.head(e_en.to(dev), e_lr.to(dev)).float().cpu()  # a few-token head
        self.head.train(was_training)
        return z.numpy() if convert_to_numpy else z

    def as_sentence_encoder(self, lang: str | None = None) -> SentenceEncoderAdapter:
        """An object with ``encode(sentences, **kw)`` for sentence-transformers/MTEB code."""
        return SentenceEncoderAdapter(self, lang)


class SentenceEncoderAdapter:
    """``encode(sentences, batch_size=..., **kwargs)`` as sentence-transformers / MTEB call it.

    MTEB's ``prompt_type`` (query / document / passage) selects the kind; ``encode_queries``
    and ``encode_corpus`` serve BEIR-style callers. All texts share ``lang`` (None = unknown).
    """

    def __init__(self, model: LiRAModel, lang: str | None = None) -> None:
        self.model, self.lang = model, lang

    def encode(
        self, sentences: Sequence[str] | str, batch_size: int = 32, **kwargs: Any
    ) -> np.ndarray:
        """Embeddings [N, d] (a single string gives [d]), rows L2-normalised."""
        single = isinstance(sentences, str)
        texts = [sentences] if single else list(sentences)
        prompt = str(kwargs.get("prompt_type") or kwargs.get("kind") or "query").lower()
        kind = (
            "document" if any(w in prompt for w in ("document", "passage", "corpus")) else "query"
        )
        langs = [self.lang] * len(texts) if self.lang else None
        z = self.model.encode(texts, langs, kind=kind, batch_size=batch_size)
        return z[0] if single else z

    def encode_queries(
        self, queries: Sequence[str], batch_size: int = 32, **kwargs: Any
    ) -> np.ndarray:
        """BEIR-style query encoding."""
        return self.encode(list(queries), batch_size=batch_size, prompt_type="query")

    def encode_corpus(
        self, corpus: Sequence[Any], batch_size: int = 32, **kwargs: Any
    ) -> np.ndarray:
        """BEIR-style corpus encoding (dicts with 'title'/'text' or plain strings)."""
        texts = [
            (f"{c.get('title', '')} {c.get('text', '')}".strip() if isinstance(c, dict) else str(c))
            for c in corpus
        ]
        return self.encode(texts, batch_size=batch_size, prompt_type="document")


def _store_path(store: Any) -> bool:
    return store is not None and bool(getattr(store, "path", ""))


def _load_arca(cfg: RunConfig, backbone: Any, arca_path: str | Path | None) -> Any:
    """A trained Arca checkpoint when ``arca_path`` holds one, else a fresh Adaptor + Actor."""
    from arca.model import CONFIG_NAME as ARCA_CONFIG
    from arca.model import ArcaModel, load_arca

    if arca_path is not None and (Path(arca_path) / ARCA_CONFIG).is_file():
        arca = load_arca(arca_path, backbone=backbone)
    else:
        if arca_path is not None:
            log.warning(
                "no Arca checkpoint at %s: LaSR starts from a fresh (untrained) Adaptor and "
                "Actor; run `lira arca` first for the full method",
                arca_path,
            )
        # g is never trained here: save it as a reference (frozen), not as a weight copy
        fresh_cfg = dataclasses.replace(cfg.arca, train_encoder=False, lora=False)
        arca = ArcaModel.from_config(cfg.models, fresh_cfg, backbone=backbone)
    for p in arca.parameters():
        p.requires_grad_(False)
    return arca.eval()


def _arca_from_folder(path: Path, backbone: Any) -> Any:
    from arca.model import load_arca

    return load_arca(path, backbone=backbone)

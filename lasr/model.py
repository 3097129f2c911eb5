"""``LiRAModel``: the whole LiRA stack behind one ``encode`` (paper §4, Fig. 1-3).

For a text x in language l the model computes two streams and fuses them (paper §4.2):

- E_en: the backbone h's sentence vector (its pooling and query/document prompts) of the
  English translation y* chosen by Arca's Actor among the stored candidates of x (pass@k
  translators of the config; ``train_only`` translators are never used at inference). English
  input (l = "en") is embedded directly, without translation;
- E_lr: Arca's g(x) → temporal pooling → Adaptor, mean over bins (anchored to h's space);
- gate features: is x English, was it translated, the critic scores and anchor similarity of
  the chosen candidate, query or document, the backbone's disagreement 1 − cos(h(x), h(y*))
  (:func:`lasr.fusion.gate_features`);
- h(x): the backbone on the untranslated text (the raw view, ``lasr.raw_view``), mixed into the
  English half by a learned weight (= E_en for English and untranslated texts);
- ḡ(x), ḡ(y*): g's own vector (``lasr.raw_g``) and g on the chosen English text
  (``lasr.translated_g``); h(x) is also a block of its own with ``lasr.raw_h``;

and returns ẑ = FusionHead(E_en, E_lr, features, h(x), ḡ(x), ḡ(y*)), ℓ2-normalised
(:mod:`lasr.fusion`: a per-text weighted concatenation, so English keeps the backbone's order).
Translations come from the store (offline) or, with ``online=True``, the translator pool fills
it first (:func:`lira.translation.engine.fill_store`). ``save_pretrained`` writes a
self-describing folder (:mod:`lasr.folder`, :mod:`lasr.pretrained`; the backbone as a reference,
not copied); a hub id loads like a folder; :meth:`LiRAModel.push_to_hub` uploads.
"""

from __future__ import annotations

import copy
import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from arca.config import ArcaConfig
from arca.model import ArcaModel
from lasr.config import LaSRArchitecture, LaSRRun, split_lasr
from lasr.folder import run_arca
from lasr.fusion import BLOCKS, FusionHead, LaSRNet
from lasr.hub import push_to_hub
from lasr.interop import input_texts, mteb_meta, resolve_kind
from lasr.model_card import parts_sentence
from lasr.pretrained import load_fusion_weights, load_parts, save_folder
from lasr.streams import (
    UNKNOWN_LANG,
    Streams,
    chosen_english,
    compute_streams,
    stored_candidates,
    texts_and_langs,
    untranslated_note,
)
from lira.config import ModelsConfig
from lira.encoding import length_batches
from lira.errors import UserInputError
from lira.models import Backbone, load_backbone
from lira.models.devices import resolve_device
from lira.mteb_encoder import MTEBEncoder
from lira.translation.config import TranslationConfig, TranslatorConfig
from lira.translation.store import TranslationStore
from lira.translation.types import Candidate

if TYPE_CHECKING:  # mteb is imported only when it is used
    from mteb.models.model_meta import ModelMeta

log = logging.getLogger(__name__)


class LiRAModel(nn.Module):
    """Backbone h + Arca (g, Adaptor, Actor) + LaSR fusion head, with translation look-up."""

    def __init__(
        self,
        models: ModelsConfig,
        translation: TranslationConfig,
        arca_cfg: ArcaConfig,
        lasr: LaSRArchitecture,
        backbone: Backbone,
        arca: ArcaModel,
        store: TranslationStore | None = None,
        online: bool = False,
        head: FusionHead | None = None,
    ) -> None:
        super().__init__()
        self.models_cfg, self.translation_cfg = models, translation
        self.arca_cfg, self.lasr_cfg = arca_cfg, lasr
        self.lasr_training: dict[str, object] = {}
        """LaSR's training settings of a loaded folder, which :meth:`save_pretrained` keeps."""
        self.backbone, self.arca = backbone, arca
        self.store, self.online = store, online
        self.caller_translation: TranslationConfig | None = translation
        """The config whose translators online translation runs (a loaded folder's: the
        caller's ``translation=``, never the folder's own translators; None: none runs)."""
        self.foreign_store: Path | None = None
        """A loaded folder's store that lies outside the folder and its run (an older layout):
        read, never written by online translation."""
        if online and store is None:
            raise ValueError(
                "online translation writes into a store: pass store=TranslationStore(path)"
            )
        self.d_en = int(backbone.dim)
        self.d_lr = int(arca.dim)
        self.set_head(lasr, head)
        self.missing_translations = 0
        """Non-English texts looked up in the store without a usable translation (so far)."""
        self.translation_lookups = 0
        """Non-English texts looked up in the store (so far)."""
        self.cache_streams = False
        """Memoise streams per (kind, lang, text): for evaluations that encode a text for
        several models or scenarios (streams depend on Arca's Adaptor, which LaSR does not
        train, only through selection)."""
        self._memo: dict[tuple[str, str, str], tuple[Tensor, ...]] = {}
        self.card: dict[str, Any] = {}
        """What the model card says beyond the configs (data, languages, metrics; see
        :mod:`lasr.model_card`), saved in ``lira_config.json``."""
        self.name_or_path = ""
        """The folder or hub id the model was loaded from (mteb's model name)."""
        self._mteb: MTEBEncoder | None = None
        self._parts_said = False
        self._untranslated_said = False
        self.eval()

    @property
    def dim(self) -> int:
        """Embedding dimension d_en + d_lr (+ d_g with lasr.raw_g and with lasr.translated_g,
        + d_en with lasr.raw_h)."""
        return self.head.dim

    def set_head(self, lasr: LaSRArchitecture, head: FusionHead | None = None) -> None:
        """Use ``lasr``'s settings with ``head`` (default: a fresh, untrained head)."""
        self.lasr_cfg = lasr
        self.head = head or FusionHead(
            self.d_en,
            self.d_lr,
            fusion_dim=lasr.fusion_dim,
            layers=lasr.fusion_layers,
            heads=lasr.fusion_heads,
            dropout=lasr.dropout,
            gate_init=lasr.gate_init,
            use_en=True,
            use_lr=lasr.use_multilingual_encoder,
            raw_view=lasr.raw_view,
            d_g=self.arca.adaptor.d_g if lasr.raw_g else 0,
            d_gt=self.arca.adaptor.d_g if lasr.translated_g else 0,
            d_hx=self.d_en if lasr.raw_h else 0,
        )
        # LaSR's own Adaptor (App. D.1, trained end to end); Arca's keeps scoring candidates
        adaptor = copy.deepcopy(self.arca.adaptor)
        for p in adaptor.parameters():
            p.requires_grad_(False)
        self.net = LaSRNet(self.head, adaptor)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(
        cls,
        cfg: LaSRRun,
        arca_path: str | Path | None = None,
        store: TranslationStore | None = None,
        online: bool = False,
    ) -> LiRAModel:
        """Build a model from a run config: a trained Arca checkpoint, or a fresh Adaptor."""
        backbone = load_backbone(cfg.models)
        arca = run_arca(cfg, backbone, arca_path)
        return cls(cfg.models, cfg.translation, cfg.arca, cfg.lasr, backbone, arca, store, online)

    def save_pretrained(
        self, path: str | Path, store_snapshot: bool = True, model_id: str = ""
    ) -> None:
        """Write the self-describing folder of :mod:`lasr.folder` (no endpoints, key variables
        or absolute paths), with a snapshot of its translation store (``store_snapshot``) and a
        model card whose snippets load ``model_id``, default the folder's own name
        (:func:`lasr.pretrained.save_folder`)."""
        save_folder(self, Path(path), store_snapshot, model_id)

    def lasr_sections(self) -> tuple[LaSRArchitecture, dict[str, object]]:
        """LaSR's architecture and its training settings, which a folder saves apart."""
        return split_lasr(self.lasr_cfg, self.lasr_training)

    def push_to_hub(
        self, repo_id: str, private: bool | None = None, token: str | None = None
    ) -> str:
        """Save the model into a temporary folder and upload it to the hub repo ``repo_id``
        (:func:`lasr.hub.push_to_hub`); returns the commit URL."""
        with tempfile.TemporaryDirectory() as tmp:
            self.save_pretrained(tmp, model_id=repo_id)
            return push_to_hub(tmp, repo_id, private=private, token=token)

    def share_streams(self, other: LiRAModel) -> None:
        """Memoise streams in ``other``'s table (the same Arca, backbone and store give the same
        streams; checked here on the saved configs), so a text is encoded once for both."""
        mine = (self.models_cfg, self.arca_cfg, self.translation_cfg, self.lasr_sections())
        theirs = (other.models_cfg, other.arca_cfg, other.translation_cfg, other.lasr_sections())
        if mine != theirs:
            raise ValueError("share_streams needs two models of one run (same configs)")
        self._memo = other._memo

    def unmemoised(
        self, texts: Sequence[str], langs: Sequence[str], kind: str
    ) -> tuple[list[str], list[str]]:
        """(texts, langs) of the distinct ``kind`` texts whose streams are not memoised yet, in
        first-seen order."""
        keys = dict.fromkeys((kind, lang, t) for t, lang in zip(texts, langs))
        todo = [k for k in keys if k not in self._memo]
        return [k[2] for k in todo], [k[1] for k in todo]

    def memoise(self, texts: Sequence[str], langs: Sequence[str], kind: str, s: Streams) -> None:
        """Memoise the streams ``s`` (row i: ``texts[i]`` in ``langs[i]``) of ``kind`` texts
        computed elsewhere (another process: :func:`lasr.banks.build_bank`)."""
        for j, (t, lang) in enumerate(zip(texts, langs)):
            self._memo[(kind, lang, t)] = tuple(x[j] for x in s.tensors())

    def use_run_cache(self, output_dir: str | Path) -> bool:
        """Read a frozen g's embeddings from the run's cache (``<output_dir>/cache/``); True if so."""
        return self.arca.attach_g_cache(output_dir)

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        store: TranslationStore | None = None,
        online: bool | None = None,
        load_store: bool = True,
        translation: TranslationConfig | None = None,
        device: str | torch.device | None = None,
        backbone: Backbone | None = None,
        revision: str | None = None,
    ) -> LiRAModel:
        """Load a folder written by :meth:`save_pretrained`, or a hub id at ``revision``, onto
        ``device`` (None: CUDA when available, as sentence-transformers picks), every part
        (:mod:`lasr.pretrained`; ``backbone``, ``store``: already loaded, shared). The caller's
        ``translation`` gives the endpoints of the folder's translators, and is the opt-in to
        translate texts missing from the store at ``encode`` (:meth:`translate_new_texts`;
        ``online=False`` keeps to the stored translations)."""
        p = load_parts(path, revision, translation, backbone, store, load_store)
        s = p.saved
        online = translation is not None if online is None else online
        model = cls(
            s.models, s.translation, s.arca, s.architecture, p.backbone, p.arca, p.store, online
        )
        model.name_or_path, model.card, model.lasr_training = str(path), s.card, s.training
        model.caller_translation = translation  # what runs online: the caller's, not the folder's
        model.foreign_store = p.foreign
        load_fusion_weights(model.head, model.net.adaptor, p.folder)
        return model.to(resolve_device(device)).eval()

    def translate_new_texts(self, translation: TranslationConfig) -> None:
        """Translate the texts missing from the store when they are encoded, with the caller's
        translators ``translation`` (those named like the model's; endpoints and key variables
        from there only) into the model's store (its working copy)."""
        if self.store is None:
            raise UserInputError(
                "translating new texts writes into the model's translation store, and this "
                "model has none: load it with LiRAModel.from_pretrained(folder, "
                "store=TranslationStore(path), translation=cfg.translation)"
            )
        self.caller_translation, self.online = translation, True

    # ------------------------------------------------------------------ streams
    def inference_translators(self, train: bool = False) -> list[TranslatorConfig]:
        """The pass@k translators; ``train_only`` ones (gold references) only when training."""
        active = self.translation_cfg.active_translators()
        return active if train else [t for t in active if not t.train_only]

    def candidates(
        self, texts: Sequence[str], langs: Sequence[str], train: bool = False
    ) -> list[list[Candidate]]:
        """Stored English candidates per text (:func:`lasr.streams.stored_candidates`)."""
        return stored_candidates(self, texts, langs, self.inference_translators(train))

    @torch.no_grad()
    def english_texts(
        self, texts: Sequence[str], langs: Sequence[str], train: bool = False
    ) -> tuple[list[str], Tensor, Tensor]:
        """What the backbone embeds per text, and how (:func:`lasr.streams.chosen_english`)."""
        return chosen_english(self, texts, langs)

    _compute_streams = compute_streams
    """The streams of distinct texts, not memoised (:func:`lasr.streams.compute_streams`)."""

    @torch.no_grad()
    def streams(
        self,
        texts: Sequence[str],
        langs: Sequence[str] | None = None,
        kind: str = "query",
        batch_size: int | None = None,
        translate: bool = True,
    ) -> Streams:
        """The :class:`Streams` of ``texts`` at inference selection; the encoders run in batches
        of ``batch_size`` (default: all at once). ``translate=False``: every text as it is (no
        store look-up, no translator; for texts whose translation the fusion does not use,
        :meth:`translation_unused`), never memoised."""
        if kind not in ("query", "document"):
            raise ValueError(f"kind must be 'query' or 'document', got {kind!r}")
        texts, langs = texts_and_langs(texts, langs)
        keys = [(kind, lang, t) for t, lang in zip(texts, langs)]
        sub = [k for k in dict.fromkeys(keys) if k not in self._memo]
        fresh: dict[tuple[str, str, str], tuple[Tensor, ...]] = {}
        if sub:
            s = self._compute_streams(
                [k[2] for k in sub], [k[1] for k in sub], kind, batch_size, translate
            )
            for j, k in enumerate(sub):
                fresh[k] = tuple(t[j] for t in s.tensors())
            if self.cache_streams and translate:
                self._memo.update(fresh)
        rows = [fresh[k] if k in fresh else self._memo[k] for k in keys]
        if not rows:
            return Streams.empty(self.d_en, self.arca.pool_size, self.arca.adaptor.d_g)
        return Streams(*(torch.stack(list(col)) for col in zip(*rows)))

    @torch.no_grad()
    def translation_unused(self, kind: str) -> bool:
        """True when a foreign text of ``kind`` embeds the same with and without its
        translation: the blocks that read it (the English half, g on the translation; h on the
        untranslated text does not) have weight 0 for its type (off blocks), and nothing else
        reads it — the multilingual half is off or its residual Δ is zero (Δ reads the English
        half), and the block weights do not read the translation's gate features (one block
        on, or a zero per-text MLP)."""
        head = self.head
        on = head.type_on[0 if kind == "query" else 2].bool().tolist()
        if on[BLOCKS.index("en")] or on[BLOCKS.index("gt")]:
            return False
        delta = bool(head.delta.weight.any() or head.delta.bias.any())
        if on[1] and head.use_en and delta:
            return False
        return sum(on) <= 1 or not bool(head.gate_mlp[-1].weight.any())

    def parts_note(self) -> str:
        """Which parts a foreign query and document use, in plain words
        (:func:`lasr.model_card.parts_sentence`; the leaderboard's note)."""
        return parts_sentence(self)

    def say_parts_once(self) -> None:
        """Log once, in plain words, which parts a foreign text uses
        (:func:`lasr.model_card.parts_sentence`)."""
        if not self._parts_said:
            self._parts_said = True
            log.info("%s", self.parts_note())

    @torch.no_grad()
    def encode(
        self,
        texts: Sequence[str] | Any,
        langs: Sequence[str] | None = None,
        kind: str = "query",
        batch_size: int = 32,
        convert_to_numpy: bool = True,
        part: str = "fused",
        *,
        show_progress_bar: bool | None = None,
        convert_to_tensor: bool = False,
        normalize_embeddings: bool = True,
        device: str | torch.device | None = None,
        prompt_name: str | None = None,
        task: str | None = None,
        **mteb_kwargs: Any,
    ) -> np.ndarray | Tensor:
        """L2-normalised embeddings [N, dim] (numpy, or torch with convert_to_numpy=False).

        ``texts``: a list, a ``datasets`` column, or a ``datasets.Dataset`` (its ``text``
        column; its ``lang``/``language`` column gives ``langs`` when not passed). ``langs``
        gives each text's language (ISO 639-1); "en" skips translation. The store
        is keyed by language, so without ``langs`` (language "xx" = unknown) texts are
        embedded untranslated. ``part`` picks a component instead of the fusion, for
        leaderboards that show what the fusion adds: ``translation`` (the backbone on the
        chosen translation, [N, d_en]) or ``e_lr`` (the Adaptor's E_lr alone, [N, d_lr]).

        sentence-transformers' keywords: ``prompt_name`` / ``task`` (``"query"`` or
        ``"document"``) set the kind; ``show_progress_bar`` (tqdm); ``convert_to_tensor``;
        ``device`` moves the model there first; ``normalize_embeddings`` is accepted (the
        vectors are always unit length). Called by ``mteb.evaluate`` (with ``task_metadata``),
        it follows mteb's protocol (:class:`lira.mteb_encoder.MTEBEncoder`: each text's
        language from the task).
        """
        if mteb_kwargs.get("task_metadata") is not None:  # mteb.evaluate(model, tasks)
            return self._mteb_adapter().encode(texts, batch_size=batch_size, **mteb_kwargs)
        if mteb_kwargs:
            raise TypeError(f"encode() got unexpected keyword arguments {sorted(mteb_kwargs)}")
        if part not in ("fused", "translation", "e_lr"):
            raise ValueError(f"part must be fused, translation or e_lr, got {part!r}")
        kind = resolve_kind(kind, prompt_name, task)
        texts, langs = texts_and_langs(*input_texts(texts, langs))
        if device is not None:
            self.to(resolve_device(device))
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        was_training = self.net.training
        self.net.eval()
        # Each chunk of many batches: the encoders sort it by length (little padding), the
        # selected translations are batched by their own length, memory stays bounded.
        width = {"fused": self.dim, "translation": self.d_en, "e_lr": self.d_lr}[part]
        z = torch.zeros(len(texts), width)
        dev = next(self.head.parameters()).device
        seen = (self.missing_translations, self.translation_lookups)
        translate = part != "fused" or not self.translation_unused(kind)
        if not translate and any(lang not in ("en", UNKNOWN_LANG) for lang in langs):
            self.say_parts_once()
        chunks = length_batches(texts, batch_size * 16)
        show = bool(show_progress_bar) and len(chunks) > 0
        for idx in tqdm(chunks, desc="encode", unit="chunk", disable=not show):
            sub, sub_langs = [texts[i] for i in idx], [langs[i] for i in idx]
            st = self.streams(sub, sub_langs, kind, batch_size=batch_size, translate=translate)
            if part == "translation":
                out = torch.nn.functional.normalize(st.e_en, dim=-1)
            elif part == "e_lr":
                e_lr = self.net.adaptor.embed_g(st.g_bins.to(dev)).float().cpu()
                out = torch.nn.functional.normalize(e_lr, dim=-1)
            else:
                out = self.net(*st.net_inputs(dev)).float().cpu()
            z[idx] = out
        self.net.train(was_training)
        missing = self.missing_translations - seen[0]
        if missing and not self._untranslated_said:  # once per model: the counts keep adding
            self._untranslated_said = True
            log.warning("%s", self.untranslated_note(missing, self.translation_lookups - seen[1]))
        return z.numpy() if convert_to_numpy and not convert_to_tensor else z

    # ------------------------------------------------------------------ mteb protocol
    def _mteb_adapter(self) -> MTEBEncoder:
        """The one :class:`lira.mteb_encoder.MTEBEncoder` of this model (made on first use)."""
        if self._mteb is None:
            name = self.name_or_path or "lira-model"
            self._mteb = MTEBEncoder(self, Path(name).name, meta=self.mteb_meta_fields())
        return self._mteb

    def mteb_meta_fields(self) -> dict[str, object]:
        """mteb ModelMeta fields (:func:`lasr.interop.mteb_meta`) of this model."""
        name = self.name_or_path or "lira-model"
        name = name if "/" in name and not Path(name).exists() else f"lira/{Path(name).name}"
        langs = self.card.get("languages") or []  # unknown: mteb gets None
        return mteb_meta(self, name, self.dim, langs, self.card)

    @property
    def mteb_model_meta(self) -> ModelMeta:
        """mteb's ``ModelMeta`` (``mteb.evaluate(model, tasks)`` reads it)."""
        return self._mteb_adapter().mteb_model_meta

    similarity = staticmethod(MTEBEncoder.similarity)
    """Cosine similarity [N, M] (mteb's protocol)."""
    similarity_pairwise = staticmethod(MTEBEncoder.similarity_pairwise)
    """Row-wise cosine similarity [N] (mteb's protocol)."""

    def untranslated_note(self, missing: int, total: int) -> str:
        """The warning that ``missing`` of ``total`` non-English texts had no stored
        translation and were embedded untranslated (:func:`lasr.streams.untranslated_note`)."""
        return untranslated_note(self.store, missing, total)

    def component(self, part: str) -> ComponentEncoder:
        """An encoder of one component (``translation`` or ``e_lr``) for leaderboards."""
        return ComponentEncoder(self, part)


class ComponentEncoder:
    """``encode`` of one component of a :class:`LiRAModel` (see ``LiRAModel.encode(part=…)``)."""

    def __init__(self, model: LiRAModel, part: str) -> None:
        self.model, self.part = model, part

    @property
    def missing_translations(self) -> int:
        """The model's count of non-English texts embedded untranslated (shared with it)."""
        return self.model.missing_translations

    def encode(
        self,
        texts: Sequence[str],
        langs: Sequence[str] | None = None,
        kind: str = "query",
        batch_size: int = 32,
    ) -> np.ndarray:
        """L2-normalised embeddings of the component."""
        out = self.model.encode(texts, langs, kind=kind, batch_size=batch_size, part=self.part)
        assert isinstance(out, np.ndarray)
        return out

"""``lira.LiRAModel``: the whole LiRA stack behind one ``encode`` (paper §4, Fig. 1-3).

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

and returns ẑ = FusionHead(E_en, E_lr, features, ḡ) ∈ R^{d_en + d_lr (+ d_g)}, ℓ2-normalised
(:mod:`lasr.fusion`: a per-text weighted concatenation, so English keeps the backbone's order). Translations come from the translation
store (offline) or, with ``online=True``, the translator pool first fills the store for texts
missing there (:func:`lira.translation.runner.fill_store`, same pass@k translators and critic). ``save_pretrained`` writes a self-describing folder::

    lira_config.json   models / translation / arca / lasr sections + stream dimensions + the
                       translation store's path relative to this folder; the translators are
                       named (names, models, kinds), never reached: no base_url, api_key_env or
                       absolute path (the caller's config gives those: ``from_pretrained(folder,
                       translation=cfg.translation)``)
    head.safetensors   the LaSR fusion head (EMA weights after training)
    adaptor.safetensors LaSR's Adaptor (its own copy of Arca's, trained end to end)
    arca/              Arca encoder g + Adaptor + Actor as Arca trained them (Arca's format;
                       its Adaptor scores candidates for the Actor's selection)
    translations.sqlite a snapshot of the translation store the model was trained and
                       validated with (:mod:`lasr.hub`; read through a working copy)
    modules.json, config_sentence_transformers.json
                       the folder as a sentence-transformers model (:mod:`lasr.st_module`)
    README.md          the model card (:mod:`lasr.model_card`)

The backbone is stored as a reference (hub id, folder or demo alias), not copied. A hub id
loads like a folder (``from_pretrained("owner/name")``); :meth:`LiRAModel.push_to_hub` uploads.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file
from torch import Tensor, nn
from tqdm.auto import tqdm

from arca.config import ArcaConfig
from arca.model import CONFIG_NAME as ARCA_CONFIG
from arca.model import ArcaModel, load_arca
from lasr.config import LaSRConfig, LaSRRun
from lasr.fusion import GATE_FEATURES, FusionHead, LaSRNet, gate_features
from lasr.hub import STORE_NAME, open_folder_store, push_to_hub, resolve_folder, snapshot_store
from lasr.interop import input_texts, mteb_meta, resolve_kind, write_st_files
from lasr.model_card import write_card
from lira.checkpoint import (
    CheckpointError,
    checkpoint_problem,
    load_safetensors,
    read_meta,
    state_mismatch,
    write_manifest,
)
from lira.config import ModelsConfig, from_dict, to_dict
from lira.encoding import check_texts, length_batches
from lira.errors import UserInputError
from lira.models import Backbone, load_backbone
from lira.models.devices import resolve_device
from lira.translation.config import Pool, TranslationConfig, TranslatorConfig, path_too_long
from lira.translation.engine import fill_store
from lira.translation.store import TranslationStore
from lira.translation.types import NEUTRAL_SCORE, Candidate

log = logging.getLogger(__name__)

CONFIG_NAME = "lira_config.json"
HEAD_NAME = "head.safetensors"
ADAPTOR_NAME = "adaptor.safetensors"
FORMAT = "lira-v3"
_RETRAIN = (
    "train LaSR again (`lira lasr CONFIG`; the Arca checkpoint and the store are still valid)"
)
RETIRED_FORMATS = {
    "lira-v1": f"its fusion head predates the raw-view gate and the 9th gate feature; {_RETRAIN}",
    "lira-v2": f"its fusion head predates the per-type block weights and g's own block; {_RETRAIN}",
}
"""Older model-folder formats and the fix named when one is loaded (:func:`read_meta`)."""
UNKNOWN_LANG = "xx"
"""Language of texts given without ``langs``: never translated (the store keys on language)."""


@dataclass
class Streams:
    """What LaSR fuses, per text: E_en [B, d_en], P_S(g(x)) bins [B, S, d_g], features [B, 9]
    and h(x) [B, d_en] (the backbone on the untranslated text; = E_en when nothing was
    translated)."""

    e_en: Tensor
    g_bins: Tensor
    feats: Tensor
    e_raw: Tensor

    def select(self, rows: Sequence[int] | Tensor) -> Streams:
        """The streams of ``rows``."""
        idx = torch.as_tensor(rows, dtype=torch.long)
        return Streams(*(t[idx] for t in self.tensors()))

    def tensors(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(e_en, g_bins, feats, e_raw): the arguments of :class:`lasr.fusion.LaSRNet`."""
        return self.e_en, self.g_bins, self.feats, self.e_raw

    def net_inputs(self, device: torch.device | str) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """:meth:`tensors` on ``device``: the arguments of :class:`lasr.fusion.LaSRNet`."""
        return tuple(t.to(device) for t in self.tensors())  # type: ignore[return-value]

    @staticmethod
    def cat(parts: Sequence[Streams]) -> Streams:
        """Row-wise concatenation."""
        return Streams(*(torch.cat(list(ts)) for ts in zip(*(p.tensors() for p in parts))))


class LiRAModel(nn.Module):
    """Backbone h + Arca (g, Adaptor, Actor) + LaSR fusion head, with translation look-up."""

    def __init__(
        self,
        models: ModelsConfig,
        translation: TranslationConfig,
        arca_cfg: ArcaConfig,
        lasr: LaSRConfig,
        backbone: Backbone,
        arca: ArcaModel,
        store: TranslationStore | None = None,
        online: bool = False,
        head: FusionHead | None = None,
    ) -> None:
        super().__init__()
        self.models_cfg, self.translation_cfg = models, translation
        self.arca_cfg, self.lasr_cfg = arca_cfg, lasr
        self.backbone = backbone
        self.arca = arca
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
        self._mteb: Any = None
        self._parts_said = False
        self.eval()

    @property
    def dim(self) -> int:
        """Embedding dimension d_en + d_lr (+ d_g with lasr.raw_g)."""
        return self.head.dim

    def set_head(self, lasr: LaSRConfig, head: FusionHead | None = None) -> None:
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
        arca = _load_arca(cfg, backbone, arca_path)
        return cls(cfg.models, cfg.translation, cfg.arca, cfg.lasr, backbone, arca, store, online)

    def save_pretrained(self, path: str | Path, store_snapshot: bool = True) -> None:
        """Write the self-describing folder described in the module docstring (no endpoints,
        key variables or absolute paths: a folder is shared, and loading it sends nothing),
        with a snapshot of its translation store inside (``store_snapshot``;
        :func:`lasr.hub.snapshot_store`), ``modules.json`` (sentence-transformers) and a model
        card ``README.md`` (:mod:`lasr.model_card`)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        store = ""
        if _store_path(self.store) and store_snapshot:
            assert self.store is not None
            store = snapshot_store(self.store, path)
        meta = {
            "format": FORMAT,
            "models": to_dict(self.models_cfg),
            "translation": _without_endpoints(to_dict(self.translation_cfg)),
            "arca": to_dict(self.arca_cfg),
            "lasr": to_dict(self.lasr_cfg),
            "d_en": self.d_en,
            "d_lr": self.d_lr,
            "store": store,
            "card": self.card,
        }
        (path / CONFIG_NAME).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        state = {k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()}
        save_file(state, str(path / HEAD_NAME))
        state = {k: v.detach().cpu().contiguous() for k, v in self.net.adaptor.state_dict().items()}
        save_file(state, str(path / ADAPTOR_NAME))
        self.arca.save_pretrained(path / "arca")
        write_st_files(path)
        write_card(self, path, meta)
        write_manifest(path)  # sizes + sha256, last: from_pretrained checks them (none = damaged)

    def push_to_hub(
        self, repo_id: str, private: bool | None = None, token: str | None = None
    ) -> str:
        """Save the model into a temporary folder and upload it to the hub repo ``repo_id``
        (:func:`lasr.hub.push_to_hub`); returns the commit URL."""
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            self.save_pretrained(tmp)
            return push_to_hub(tmp, repo_id, private=private, token=token)

    def share_streams(self, other: LiRAModel) -> None:
        """Memoise streams in ``other``'s table (the same Arca, backbone and store give the same
        streams; checked here on the saved configs), so a text is encoded once for both."""
        mine = (self.models_cfg, self.arca_cfg, self.translation_cfg, self.lasr_cfg)
        if mine != (other.models_cfg, other.arca_cfg, other.translation_cfg, other.lasr_cfg):
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
        online: bool = False,
        load_store: bool = True,
        translation: TranslationConfig | None = None,
        device: str | torch.device | None = None,
        backbone: Backbone | None = None,
        revision: str | None = None,
    ) -> LiRAModel:
        """Load a folder written by :meth:`save_pretrained`, or a hub id (``owner/name``, at
        ``revision``; :func:`lasr.hub.resolve_folder`), the backbone from its reference
        onto ``device`` — every part: h, g, both Adaptors, the Actor and the head (None: CUDA
        when available, as sentence-transformers picks; :func:`lira.models.devices.default_device`).
        ``backbone``: an h already loaded from the same ``models`` (another model of the run),
        shared instead of loaded again; ``store``: likewise a store already open.

        The folder names its translators (names, models, kinds); their endpoints and API-key
        variables come from the caller's ``translation`` config only (matched by translator
        name; the critic's when its kind matches). A folder that holds a ``base_url``, an
        ``api_key_env`` or an absolute store path is refused (:class:`CheckpointError`): it
        would decide where online translation sends texts and which secret goes with them.
        The store path is resolved relative to the folder; the folder's own snapshot
        (``translations.sqlite``) is opened as a working copy (:func:`lasr.hub.open_folder_store`:
        the folder never changes); when it is missing, a warning says that texts will be
        embedded untranslated."""

        name = str(path)
        path = resolve_folder(path, revision)
        meta = read_meta(path, CONFIG_NAME, FORMAT,
                         f"a LiRA model folder (no {CONFIG_NAME}); "
                         "write one with LiRAModel.save_pretrained or `lira lasr`",
                         RETIRED_FORMATS)  # fmt: skip
        _refuse_endpoints(meta, path)
        models = from_dict(ModelsConfig, meta["models"], "models")
        caller = translation
        saved = _described(_with_endpoints(meta["translation"], caller))
        translation = from_dict(TranslationConfig, saved, "translation")
        arca_cfg = from_dict(ArcaConfig, meta["arca"], "arca")
        lasr = from_dict(LaSRConfig, _lasr_meta(meta["lasr"], path), "lasr")
        problem = checkpoint_problem(path, verify=True)
        if problem is not None:
            raise CheckpointError(
                f"LiRA model folder {path} is damaged ({problem}); restore it, or train it "
                "again with `lira lasr`"
            )
        backbone = backbone if backbone is not None else load_backbone(models)
        arca = _arca_from_folder(path / "arca", backbone)
        foreign = None
        if store is None and load_store and meta.get("store"):
            where, outside = _store_in_folder(meta["store"], path)
            if where.is_file() and meta["store"] == STORE_NAME:  # the folder's own snapshot
                store = open_folder_store(where)
            elif where.is_file():  # a folder of an older layout: the run's store beside it
                store = TranslationStore(where)
                foreign = where if outside else None
            else:
                log.warning(
                    "translation store %s of the LiRA model %s not found: non-English texts "
                    "are embedded untranslated (copy the store there or pass store=)",
                    where,
                    path,
                )
        model = cls(models, translation, arca_cfg, lasr, backbone, arca, store, online)
        model.name_or_path, model.card = name, dict(meta.get("card") or {})
        model.caller_translation = caller  # what runs online: the caller's, never the folder's
        model.foreign_store = foreign
        head = load_safetensors(path / HEAD_NAME)
        adaptor = load_safetensors(path / ADAPTOR_NAME)
        try:
            model.head.load_state_dict(head)
            model.net.adaptor.load_state_dict(adaptor)
        except RuntimeError as e:
            raise state_mismatch(path / HEAD_NAME, "LiRA fusion head", e) from None
        return model.to(resolve_device(device)).eval()

    # ------------------------------------------------------------------ streams
    def inference_translators(self, train: bool = False) -> list[TranslatorConfig]:
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
                _refuse_foreign_store(self.foreign_store)
                run_cfg = _runnable(self.caller_translation, translators)
                translators = _same_names(run_cfg, translators)
                _require_endpoints(run_cfg, translators)
                run = Pool(models=self.models_cfg, translation=run_cfg)
                fill_store(run, {lang: list(dict.fromkeys(sub))}, self.store)
            found = self.store.candidates(sub, lang, translators)
            for i, c in zip(rows, found):
                out[i] = list(c)
        return out

    @torch.no_grad()
    def english_texts(
        self, texts: Sequence[str], langs: Sequence[str], train: bool = False
    ) -> tuple[list[str], Tensor, Tensor]:
        """The text the backbone embeds for each input — the Actor's arg-max candidate, or the
        input itself (English input, ``use_translations=False``, or no candidate available) —
        with a translated flag [B] and the chosen candidate's c_k = [s, e, p, sim] [B, 4]
        (5.5 and 0 where nothing was translated; as the Actor saw it, so an Arca trained without
        a critic (``arca.use_llm_critic`` / ``arca.use_embedding_critic``) gives 5.5 / 0 too)."""
        chosen = list(texts)
        translated = torch.zeros(len(texts))
        picked = torch.tensor([[NEUTRAL_SCORE] * 3 + [0.0]]).repeat(len(texts), 1)
        if not self.lasr_cfg.use_translations:
            return chosen, translated, picked
        cands = self.candidates(texts, langs)
        rows = [i for i, c in enumerate(cands) if c]
        foreign = [i for i, lang in enumerate(langs) if lang not in ("en", UNKNOWN_LANG)]
        self.translation_lookups += len(foreign)
        self.missing_translations += sum(1 for i in foreign if not cands[i])
        if not rows:
            return chosen, translated, picked
        # c_k as the trained Actor saw it (arca.use_llm_critic / use_embedding_critic ablations)
        idx, feats = self.arca.pick([texts[i] for i in rows], [cands[i] for i in rows])
        for j, (i, k) in enumerate(zip(rows, idx)):
            chosen[i] = cands[i][k].text
            translated[i] = 1.0
            picked[i] = feats[j]
        return chosen, translated, picked

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
        texts, langs = _texts_and_langs(texts, langs)
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
            s = self.arca.pool_size
            return Streams(
                torch.zeros(0, self.d_en),
                torch.zeros(0, s, self.arca.adaptor.d_g),
                torch.zeros(0, GATE_FEATURES),
                torch.zeros(0, self.d_en),
            )
        return Streams(*(torch.stack(list(col)) for col in zip(*rows)))

    def _compute_streams(
        self,
        texts: list[str],
        langs: list[str],
        kind: str,
        batch_size: int | None,
        translate: bool = True,
    ) -> Streams:
        bs = batch_size or max(len(texts), 1)
        g_bins = torch.cat(
            [
                self.arca.pooled_sources(texts[i : i + bs], kind).float().cpu()
                for i in range(0, len(texts), bs)
            ]
        )
        if translate:
            english, translated, picked = self.english_texts(texts, langs)
        else:  # as english_texts gives an untranslated text
            english, translated = list(texts), torch.zeros(len(texts))
            picked = torch.tensor([[NEUTRAL_SCORE] * 3 + [0.0]]).repeat(len(texts), 1)
        e_en = self._backbone(english, kind, bs)
        e_raw = e_en.clone()
        rows = [i for i in range(len(texts)) if translated[i]] if self.lasr_cfg.raw_view else []
        disagree = torch.zeros(len(texts))  # exactly 0 where h(x) was not computed
        if rows:  # the backbone's own view of the texts it did not see untranslated
            e_raw[rows] = self._backbone([texts[i] for i in rows], kind, bs)
            cos = torch.nn.functional.cosine_similarity(e_en[rows], e_raw[rows], dim=-1)
            disagree[rows] = 1.0 - cos
        is_en = torch.tensor([1.0 if lang == "en" else 0.0 for lang in langs])
        feats = gate_features(is_en, translated, picked, kind == "document", disagree)
        return Streams(e_en, g_bins, feats, e_raw)

    def _backbone(self, texts: list[str], kind: str, batch_size: int) -> Tensor:
        out = self.backbone.encode(texts, langs=None, kind=kind, batch_size=batch_size)
        return torch.as_tensor(np.asarray(out)).float()

    @torch.no_grad()
    def translation_unused(self, kind: str) -> bool:
        """True when a foreign text of ``kind`` embeds the same with and without its
        translation: the English half has weight 0 for its type (an off block), and nothing
        else reads the translation — the multilingual half is off or its residual Δ is zero
        (Δ reads the English half), and the block weights do not read the translation's gate
        features (one block on, or a zero per-text MLP)."""
        head = self.head
        on = head.type_on[0 if kind == "query" else 2].bool().tolist()
        if on[0]:
            return False
        delta = bool(head.delta.weight.any() or head.delta.bias.any())
        if on[1] and head.use_en and delta:
            return False
        return sum(on) <= 1 or not bool(head.gate_mlp[-1].weight.any())

    def parts_note(self) -> str:
        """Which parts a foreign query and document use, in plain words
        (:func:`lasr.model_card.parts_sentence`; the leaderboard's note)."""
        from lasr.model_card import parts_sentence

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
        texts, langs = _texts_and_langs(*input_texts(texts, langs))
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
        if missing:
            log.warning("%s", self.untranslated_note(missing, self.translation_lookups - seen[1]))
        return z.numpy() if convert_to_numpy and not convert_to_tensor else z

    # ------------------------------------------------------------------ mteb protocol
    def _mteb_adapter(self) -> Any:
        """The one :class:`lira.mteb_encoder.MTEBEncoder` of this model (made on first use)."""
        if self._mteb is None:
            from lira.mteb_encoder import MTEBEncoder

            name = self.name_or_path or "lira-model"
            self._mteb = MTEBEncoder(self, Path(name).name, meta=self.mteb_meta_fields())
        return self._mteb

    def mteb_meta_fields(self) -> dict[str, Any]:
        """mteb ModelMeta fields (:func:`lasr.interop.mteb_meta`) of this model."""
        name = self.name_or_path or "lira-model"
        name = name if "/" in name and not Path(name).exists() else f"lira/{Path(name).name}"
        langs = self.card.get("languages") or []  # unknown: mteb gets None
        return mteb_meta(self, name, self.dim, langs, self.card)

    @property
    def mteb_model_meta(self) -> Any:
        """mteb's ``ModelMeta`` (``mteb.evaluate(model, tasks)`` reads it)."""
        return self._mteb_adapter().mteb_model_meta

    def similarity(self, a: Any, b: Any) -> Tensor:
        """Cosine similarity [N, M] (mteb's protocol)."""
        return self._mteb_adapter().similarity(a, b)

    def similarity_pairwise(self, a: Any, b: Any) -> Any:
        """Row-wise cosine similarity [N] (mteb's protocol)."""
        return self._mteb_adapter().similarity_pairwise(a, b)

    def untranslated_note(self, missing: int, total: int) -> str:
        """The warning that ``missing`` of ``total`` non-English texts had no stored
        translation and were embedded untranslated, naming the store and the fix."""
        where = (
            f"store {self.store.path}"
            if _store_path(self.store)
            else "the model has no translation store"
        )
        return (
            f"{missing} of {total} non-English texts have no stored translation ({where}); "
            "they are embedded untranslated. If they are sources of your config (queries), "
            "run `lira translate CONFIG` to fill the store; other texts (e.g. XQuAD-R's "
            "non-English documents, which the translate stage leaves out) are translated only "
            "online: load the model with online=True (as `lira eval --mteb` does)"
        )

    def component(self, part: str) -> ComponentEncoder:
        """An encoder of one component (``translation`` or ``e_lr``) for leaderboards."""
        return ComponentEncoder(self, part)


def _texts_and_langs(
    texts: Sequence[str], langs: Sequence[str] | None
) -> tuple[list[str], list[str]]:
    """``texts`` and one language per text (unknown when ``langs`` is None), checked."""
    texts = list(texts)
    check_texts(texts)
    langs = list(langs) if langs is not None else [UNKNOWN_LANG] * len(texts)
    if len(langs) != len(texts):
        raise ValueError(f"got {len(texts)} texts but {len(langs)} langs; pass one lang per text")
    return texts, langs


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


MOVED_LASR_KEYS = ("use_llm_critic", "use_embedding_critic")
"""LaSR keys of older model folders, now ``arca.*`` (an ablation trains Arca without the critic)."""


def _lasr_meta(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """A saved ``lasr`` section without the keys that moved to ``arca`` (older folders)."""
    data = dict(data)
    off = [k for k in MOVED_LASR_KEYS if data.pop(k, True) is False]
    if off:
        log.warning(
            "%s was saved with lasr.%s = false (an inference-time mask, since moved to arca.*): "
            "the gate and the selection now use what its Arca was trained with",
            path,
            "/".join(off),
        )
    return data


ENDPOINT_KEYS = ("base_url", "api_key_env")
"""Translator and critic keys a model folder never holds: where texts go, which secret goes."""
CALLER_KEYS = (*ENDPOINT_KEYS, "timeout_s", "max_concurrency", "max_retries")
"""Keys taken from the caller's translator of the same name (how to reach it, not what it is)."""
NO_ENDPOINT = "http://endpoint-not-given.invalid/v1"
"""Placeholder ``base_url`` of a saved kind=openai translator the caller gave no endpoint for
(never contacted: :func:`_require_endpoints` refuses online translation through it)."""


def _sections(translation: dict[str, Any]) -> list[dict[str, Any]]:
    """The translator and critic dicts of a saved ``translation`` section."""
    out = [t for k in ("llm_translators", "mt_translators") for t in translation.get(k) or []]
    critic = translation.get("critic")
    return [d for d in [*out, critic] if isinstance(d, dict)]


def _without_endpoints(translation: dict[str, Any]) -> dict[str, Any]:
    """A ``translation`` dict without the :data:`ENDPOINT_KEYS` of its translators and critic."""
    translation = dict(translation)
    for key in ("llm_translators", "mt_translators"):
        translation[key] = [
            {k: v for k, v in t.items() if k not in ENDPOINT_KEYS} for t in translation[key]
        ]
    translation["critic"] = {
        k: v for k, v in translation["critic"].items() if k not in ENDPOINT_KEYS
    }
    return translation


def _refuse_endpoints(meta: dict[str, Any], path: Path) -> None:
    """CheckpointError when a model folder names an endpoint, a key variable or an absolute
    store path (an older or edited folder): the caller's config decides those."""
    translation = meta.get("translation")
    found = []
    if isinstance(translation, dict):
        for d in _sections(translation):
            found += [f"{d.get('name', 'critic')}.{k}" for k in ENDPOINT_KEYS if d.get(k)]
    store = meta.get("store")
    if isinstance(store, str) and store and Path(store).is_absolute():
        found.append(f"store {store!r} (absolute)")
    if found:
        raise CheckpointError(
            f"{path / CONFIG_NAME} names {', '.join(found)}: a model folder may not choose where "
            "texts are sent, which API key goes with them or where the store is; delete "
            f"{'/'.join(ENDPOINT_KEYS)} from its translation section (and make store relative "
            "to the folder, or empty), then pass your own endpoints with "
            "LiRAModel.from_pretrained(folder, translation=cfg.translation)"
        )


def _with_endpoints(saved: dict[str, Any], caller: TranslationConfig | None) -> dict[str, Any]:
    """The saved ``translation`` dict with each translator's :data:`CALLER_KEYS` from the
    caller's translator of the same name (the critic's from the caller's critic of its kind);
    a kind=openai one without any gets :data:`NO_ENDPOINT`."""
    saved = {k: (list(v) if isinstance(v, list) else v) for k, v in saved.items()}
    theirs: dict[str, dict[str, Any]] = {}
    if caller is not None:
        theirs = {t.name: to_dict(t) for t in caller.llm_translators + caller.mt_translators}
    for key in ("llm_translators", "mt_translators"):
        saved[key] = [_endpoint_of(t, theirs.get(t.get("name", ""))) for t in saved.get(key) or []]
    critic = saved.get("critic")
    if isinstance(critic, dict):
        mine = to_dict(caller.critic) if caller is not None else None
        same = mine is not None and mine.get("kind") == critic.get("kind")
        saved["critic"] = _endpoint_of(critic, mine if same else None)
    return saved


def _endpoint_of(saved: dict[str, Any], caller: dict[str, Any] | None) -> dict[str, Any]:
    out = dict(saved)
    if caller is not None:
        out.update({k: caller[k] for k in CALLER_KEYS if k in caller})
    if out.get("kind") == "openai" and not out.get("base_url"):
        out["base_url"], out["api_key_env"] = NO_ENDPOINT, ""
    return out


def _described(saved: dict[str, Any]) -> dict[str, Any]:
    """A folder's ``translation`` dict as a description only: no ``engine_kwargs`` (vLLM
    arguments such as ``trust_remote_code``); online translation runs the caller's translators
    of the same names (:func:`_runnable`), never these."""
    saved = dict(saved)
    for key in ("llm_translators", "mt_translators"):
        saved[key] = [{**t, "engine_kwargs": {}} if isinstance(t, dict) else t
                      for t in saved.get(key) or []]  # fmt: skip
    return saved


def _runnable(
    caller: TranslationConfig | None, translators: Sequence[TranslatorConfig]
) -> TranslationConfig:
    """The config online translation runs: the caller's, which must name every translator of
    ``translators`` (a model folder names its translators; their kind, model, engine arguments
    and endpoints come from the caller only). UserInputError otherwise."""
    theirs = {t.name for t in caller.llm_translators + caller.mt_translators} if caller else set()
    missing = [t.name for t in translators if t.name not in theirs and t.kind != "reference"]
    if caller is None or missing:
        names = ", ".join(n[:80] for n in (missing or [t.name for t in translators])[:5])
        raise UserInputError(
            f"online translation needs the endpoints of {names} from your "
            "own config: a model folder only names its translators and never chooses what runs "
            "(kind, model, engine_kwargs, endpoints); load it with "
            "LiRAModel.from_pretrained(folder, translation=cfg.translation) where cfg has "
            "translators of these names, or evaluate offline"
        )
    return caller


def _same_names(
    run_cfg: TranslationConfig, translators: Sequence[TranslatorConfig]
) -> list[TranslatorConfig]:
    """The translators of ``run_cfg`` named like ``translators`` (the store keys what runs)."""
    theirs = {t.name: t for t in run_cfg.llm_translators + run_cfg.mt_translators}
    return [theirs.get(t.name, t) for t in translators]


def _store_in_folder(store: str, path: Path) -> tuple[Path, bool]:
    """(the store file a folder names, whether it lies outside the folder and its run).

    A folder's store is a relative path inside the folder, or the run's store beside it
    (``../<name>``, as `lira lasr` saves). Any other relative path (``../../x``, an older
    layout) is only read: online translation never writes into it
    (:func:`_refuse_foreign_store`). A path no file system takes (10 MB, NUL, a part over 255
    bytes) is a CheckpointError."""
    why = path_too_long(store) if isinstance(store, str) else f"{store!r} is not a path"
    if why is not None:
        raise CheckpointError(
            f"{path / CONFIG_NAME}: store {why}; a folder's store is a file inside it: copy "
            "the store into the folder and set store to its name, or pass "
            "store=TranslationStore(path)"
        )
    where = path / store
    try:
        real, home = where.resolve(), path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return where, True
    beside = Path(store).parent == Path("..") and real.parent == home.parent
    return where, not (real.is_relative_to(home) or beside)


def _refuse_foreign_store(where: Path | None) -> None:
    """UserInputError when online translation would write into a store that a loaded folder
    names outside itself and its run (the folder may not choose where texts are written)."""
    if where is not None:
        raise UserInputError(
            f"online translation writes into the model's store, and the folder names {where}, "
            "outside the folder and its run: pass a store you choose with "
            "LiRAModel.from_pretrained(folder, store=TranslationStore(path)), or copy the store "
            "into the folder"
        )


def _require_endpoints(
    translation: TranslationConfig, translators: Sequence[TranslatorConfig]
) -> None:
    """Refuse online translation through a translator (or critic) the caller gave no endpoint."""
    missing = [t.name for t in translators if t.base_url == NO_ENDPOINT]
    if translation.critic.base_url == NO_ENDPOINT:
        missing.append("the critic")
    if missing:
        raise UserInputError(
            f"online translation needs the endpoints of {', '.join(missing)} (kind=openai; a "
            "model folder does not hold them): load the model with "
            "LiRAModel.from_pretrained(folder, translation=cfg.translation) where cfg names them "
            "with base_url (and api_key_env), or evaluate offline"
        )


def _store_path(store: TranslationStore | None) -> bool:
    return store is not None and bool(getattr(store, "path", ""))


def _load_arca(cfg: LaSRRun, backbone: Backbone, arca_path: str | Path | None) -> ArcaModel:
    """A trained Arca checkpoint when ``arca_path`` holds one, else a fresh Adaptor + Actor."""

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


def _arca_from_folder(path: Path, backbone: Backbone) -> ArcaModel:

    return load_arca(path, backbone=backbone)

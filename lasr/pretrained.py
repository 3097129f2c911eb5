"""Saving and loading a LiRA model folder, step by step: :func:`save_folder` is
:meth:`lasr.model.LiRAModel.save_pretrained`, :func:`load_parts` and :func:`load_fusion_weights`
are :meth:`~lasr.model.LiRAModel.from_pretrained` (the folder's layout and what it may never
choose: :mod:`lasr.folder`).

Loading takes a folder or a hub id (``owner/name``, at a revision;
:func:`lasr.hub.resolve_folder`) and loads every part: h from its reference (or an h already
loaded from the same ``models``, shared), g, both Adaptors, the Actor and the head. The folder
names its translators; their endpoints and API-key variables come from the caller's
``translation`` only, and a folder that names one is refused (:func:`lasr.folder.read_folder`).
Its store opens as a working copy (:func:`lasr.folder.open_saved_store`: the folder never
changes), unless the caller passes a store already open.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from torch import nn

from arca.config import ArcaConfig
from arca.model import ArcaModel, load_arca
from lasr.config import LaSRArchitecture
from lasr.folder import (
    ADAPTOR_NAME,
    HEAD_NAME,
    SavedConfigs,
    folder_meta,
    open_saved_store,
    read_folder,
    write_folder,
)
from lasr.fusion import BLOCKS, LaSRNet
from lasr.hub import resolve_folder, snapshot_store
from lasr.interop import write_st_files
from lasr.model_card import LiRAModel as CardModel
from lasr.model_card import write_card
from lasr.streams import has_store_file
from lira.checkpoint.folders import atomic_dir
from lira.checkpoint.manifest import write_manifest
from lira.checkpoint.state import load_safetensors, state_mismatch
from lira.compat import head_state_with_blocks
from lira.config import ModelsConfig
from lira.models import Backbone, load_backbone
from lira.translation.config import TranslationConfig
from lira.translation.store import TranslationStore

ARCA_DIR = "arca"
"""Arca's own folder inside a LiRA model folder (:mod:`arca.folder`)."""


class SavedModel(CardModel, Protocol):
    """What :func:`save_folder` reads of a :class:`lasr.model.LiRAModel` (which imports this
    module)."""

    models_cfg: ModelsConfig
    translation_cfg: TranslationConfig
    arca_cfg: ArcaConfig
    store: TranslationStore | None
    d_en: int
    d_lr: int
    net: LaSRNet
    arca: ArcaModel

    def lasr_sections(self) -> tuple[LaSRArchitecture, dict[str, object]]:
        """LaSR's architecture and its training settings."""
        ...


def save_folder(
    model: SavedModel, path: Path, store_snapshot: bool = True, model_id: str = ""
) -> None:
    """Write ``model``'s folder at ``path``: ``lira_config.json`` (no endpoints, key variables or
    absolute paths: a folder is shared, and loading it sends nothing), the head and LaSR's
    Adaptor, Arca's folder, a snapshot of the translation store (``store_snapshot``;
    :func:`lasr.hub.snapshot_store`), the sentence-transformers files, the model card (its
    snippets load ``model_id``, default the folder's own name: :func:`lasr.model_card.write_card`)
    and, last, the manifest."""
    path.mkdir(parents=True, exist_ok=True)
    store = ""
    if has_store_file(model.store) and store_snapshot:
        assert model.store is not None
        store = snapshot_store(model.store, path)
    architecture, training = model.lasr_sections()
    configs = SavedConfigs(
        model.models_cfg,
        model.translation_cfg,
        model.arca_cfg,
        architecture,
        training,
        store,
        model.card,
    )
    meta = folder_meta(configs, model.d_en, model.d_lr)
    write_folder(path, meta, model.head, model.net.adaptor)
    model.arca.save_pretrained(path / ARCA_DIR)
    write_st_files(path)
    write_card(model, path, meta, model_id)
    write_manifest(path)  # sizes + sha256, last: from_pretrained checks them (none = damaged)


def save_atomically(model: SavedModel, folder: Path, store_snapshot: bool = True) -> None:
    """:func:`save_folder` through the atomic writer (:func:`lira.checkpoint.folders.atomic_dir`):
    ``folder`` is replaced only once the whole folder is written (how a run saves its model)."""
    with atomic_dir(folder) as tmp:
        save_folder(model, tmp, store_snapshot)


@dataclass
class LoadedParts:
    """What a LiRA model is built from, as :func:`load_parts` read it."""

    folder: Path
    """The local folder (a hub id's download)."""
    saved: SavedConfigs
    backbone: Backbone
    arca: ArcaModel
    store: TranslationStore | None
    foreign: Path | None
    """The store's path when it lies outside the folder and its run (an older layout)."""


def load_parts(
    path: str | Path,
    revision: str | None = None,
    translation: TranslationConfig | None = None,
    backbone: Backbone | None = None,
    store: TranslationStore | None = None,
    load_store: bool = True,
) -> LoadedParts:
    """The checked configs, h (``backbone`` when given), Arca and the store (``store`` when
    given; none without ``load_store``) of the folder or hub id ``path``."""
    folder = resolve_folder(path, revision)
    saved = read_folder(folder, translation)
    backbone = backbone if backbone is not None else load_backbone(saved.models)
    arca = load_arca(folder / ARCA_DIR, backbone=backbone)
    foreign = None
    if store is None and load_store and saved.store:
        store, foreign = open_saved_store(saved.store, folder)
    return LoadedParts(folder, saved, backbone, arca, store, foreign)


def load_fusion_weights(head: nn.Module, adaptor: nn.Module, folder: Path) -> None:
    """Load the folder's fusion head (a head saved with fewer blocks: as it was,
    :func:`lira.compat.head_state_with_blocks`) and LaSR's Adaptor in place; a shape mismatch
    is one CheckpointError naming the file."""
    head_state = head_state_with_blocks(load_safetensors(folder / HEAD_NAME), len(BLOCKS))
    adaptor_state = load_safetensors(folder / ADAPTOR_NAME)
    try:
        head.load_state_dict(head_state)
        adaptor.load_state_dict(adaptor_state)
    except RuntimeError as e:
        raise state_mismatch(folder / HEAD_NAME, "LiRA fusion head", e) from None

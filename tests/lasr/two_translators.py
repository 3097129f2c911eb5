"""A real LiRA model (MiniLM as h, a fresh Adaptor) whose store holds two reference
translators' candidates, ``a`` and ``b``, both used at inference (K = 2): the cheap way to get
a choice per source and one ``lira: h(<name>)`` row per translator."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import torch

from lasr.model import LiRAModel
from lira.config import ModelsConfig
from lira.translation.config import TranslationConfig, TranslatorConfig
from lira.translation.store import TranslationStore
from pipeline.runconfig import RunConfig


def two_translator_model(
    folder: Path,
    models: ModelsConfig,
    sources: Sequence[str],
    lang: str,
    by_a: Sequence[str],
    by_b: Sequence[str],
) -> LiRAModel:
    """A LiRA model over a store in ``folder`` where translators ``a`` and ``b`` wrote
    ``by_a[i]`` and ``by_b[i]`` for ``sources[i]`` (in ``lang``)."""
    store = TranslationStore(folder / "store.sqlite")
    a = TranslatorConfig(name="a", kind="reference", role="mt")
    b = TranslatorConfig(name="b", kind="reference", role="mt")
    store.add_reference(a, [(s, lang, e, None) for s, e in zip(sources, by_a)])
    store.add_reference(b, [(s, lang, e, None) for s, e in zip(sources, by_b)])
    cfg = RunConfig(
        output_dir=str(folder),
        models=dataclasses.replace(models, backbone="demo:minilm", backbone_pooling="mean"),
        translation=TranslationConfig(mt_translators=[a, b], num_candidates=2),
    )
    cfg.lasr.fusion_dim, cfg.lasr.fusion_layers = 32, 1
    torch.manual_seed(0)
    return LiRAModel.from_config(cfg, None, store=store)

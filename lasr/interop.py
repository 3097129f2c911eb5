"""What a LiRA model accepts from the Hugging Face tools: inputs, kinds and mteb's ModelMeta.

``LiRAModel.encode`` takes what ``SentenceTransformer.encode`` takes: a list of
texts, a ``datasets`` column, or a ``datasets.Dataset`` with a ``text`` column (and, unless
``langs`` is given, the languages from its ``lang`` or ``language`` column); the kind of text
from ``kind``, sentence-transformers' ``prompt_name`` or ``task`` (``"query"`` or
``"document"``, as ``encode_query`` / ``encode_document`` pass it). :func:`mteb_meta` is the
``ModelMeta`` that ``mteb.evaluate(lira_model, tasks)`` reports (languages, dimensions,
parameters, training data, framework).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

KINDS = ("query", "document")
"""The kinds of text a LiRA model embeds (its query/document gate feature and prompts)."""
TEXT_COLUMN = "text"
"""The column of a ``datasets.Dataset`` that ``encode`` reads."""
LANG_COLUMNS = ("lang", "language")
"""Columns of a ``datasets.Dataset`` read as each text's language (when ``langs`` is None)."""
MODULE_TYPE = "lasr.st_module.LiRAModule"
"""The ``modules.json`` type of a LiRA model folder (:mod:`lasr.st_module`)."""
MODULES_NAME = "modules.json"
ST_CONFIG_NAME = "config_sentence_transformers.json"


def write_st_files(folder: str | Path) -> None:
    """``modules.json`` and ``config_sentence_transformers.json`` of a LiRA model folder."""
    try:
        from sentence_transformers import __version__ as st_version
    except ImportError:  # the folder is still a LiRA folder; ST reads it where installed
        st_version = "unknown"
    folder = Path(folder)
    modules = [{"idx": 0, "name": "0", "path": "", "type": MODULE_TYPE}]
    (folder / MODULES_NAME).write_text(json.dumps(modules, indent=2), encoding="utf-8")
    config = {
        "__version__": {"sentence_transformers": st_version},
        "model_type": "SentenceTransformer",
        "prompts": {k: k for k in KINDS},  # names the kind; never prepended (LiRAModule)
        "default_prompt_name": None,
        "similarity_fn_name": "cosine",
    }
    (folder / ST_CONFIG_NAME).write_text(json.dumps(config, indent=2), encoding="utf-8")


def input_texts(
    texts: Iterable[str] | Any, langs: Sequence[str] | None
) -> tuple[list[str], Sequence[str] | None]:
    """(texts, langs) of what ``encode`` was given: a list, a ``datasets`` column or a
    ``datasets.Dataset`` (its ``text`` column, and its ``lang``/``language`` column as langs)."""
    if isinstance(texts, str):
        raise TypeError("encode takes a list of texts, got a single string; wrap it in a list")
    names = getattr(texts, "column_names", None)
    if isinstance(names, list):  # a datasets.Dataset: rows are dicts
        if TEXT_COLUMN not in names:
            raise ValueError(
                f"encode reads the {TEXT_COLUMN!r} column of a Dataset; this one has {names}: "
                f"pass ds[COLUMN] or rename it (ds.rename_column(COLUMN, {TEXT_COLUMN!r}))"
            )
        if langs is None:
            col = next((c for c in LANG_COLUMNS if c in names), None)
            langs = list(texts[col]) if col else None
        texts = texts[TEXT_COLUMN]
    out = list(texts)
    bad = next((t for t in out if not isinstance(t, str)), None)
    if bad is not None:
        raise TypeError(f"encode takes texts (str), got a {type(bad).__name__}: {bad!r:.80}")
    return out, langs


def resolve_kind(kind: str, prompt_name: str | None = None, task: str | None = None) -> str:
    """The kind of text from ``prompt_name`` or ``task`` (sentence-transformers' names for it),
    else ``kind``; one clear error for anything but query/document."""
    for name, value in (("prompt_name", prompt_name), ("task", task), ("kind", kind)):
        if value is None:
            continue
        if value not in KINDS:
            raise ValueError(
                f"{name}={value!r}: a LiRA model embeds queries or documents; pass "
                f"{name}='query' or {name}='document' (it applies its backbone's own prompts)"
            )
        return value
    return "query"


def iso_language_scripts(langs: Iterable[str]) -> list[str]:
    """mteb's language codes (``deu-Latn``) of ISO 639-1 codes (``de``); unknown ones dropped."""
    from mteb.languages.iso_mappings import _hf_langs_to_iso_lang_scripts

    return _hf_langs_to_iso_lang_scripts(sorted(set(langs))) or []


def mteb_meta(
    model: nn.Module, name: str, dim: int, languages: Sequence[str], card: dict[str, Any]
) -> dict[str, object]:
    """ModelMeta fields of a LiRA model: name, languages (mteb codes), embedding dimension,
    parameters, training data and framework (for :class:`lira.mteb_encoder.MTEBEncoder`)."""
    data = card.get("data") or {}
    datasets = [str(data[k]) for k in ("dataset", "path") if data.get(k)]
    return {
        "name": name,
        "languages": iso_language_scripts(languages) or None,
        "embed_dim": int(dim),
        "n_parameters": int(sum(p.numel() for p in model.parameters())),
        "framework": ["PyTorch", "Sentence Transformers"],
        "training_datasets": set(datasets[:1]) or None,
        "open_weights": True,
        "use_instructions": False,
    }

"""A LiRA model folder is also a sentence-transformers model.

:meth:`lasr.model.LiRAModel.save_pretrained` writes ``modules.json`` (one module,
:class:`LiRAModule`, whose class lives in this installed package: the folder holds no code) and
``config_sentence_transformers.json`` (cosine similarity; prompts ``query`` / ``document``
name the kind of text, LiRA applies its backbone's own prompts). Then::

    from lasr.st_module import LiRASentenceTransformer
    st = LiRASentenceTransformer("<run>/lira-model")          # or a hub id
    st.encode(texts, lang="de")                                # queries in German
    st.encode_document(docs, lang="en")                        # task="document"
    st = LiRASentenceTransformer(folder, translation=cfg.translation)  # new texts translated

:class:`LiRASentenceTransformer` is the call to use: it takes :class:`LiRAModule` from this
installed package and refuses, in one line, a ``modules.json`` that names any other class
outside sentence-transformers and a config whose ``auto_map`` names the folder's own code, and
builds every module (sentence-transformers' own Transformer too) with ``trust_remote_code``
off, so it never imports a ``.py`` file of the folder (even with that flag on). Plain ``SentenceTransformer(folder)``
with that flag on loads an untouched LiRA folder too, but the flag lets a folder one did not make name a class
in a ``.py`` file beside it, which sentence-transformers then imports and runs.

Keywords: ``lang`` (one ISO 639-1 language for every text of the call; ``"en"`` is never
translated, no ``lang`` = unknown, embedded untranslated), ``task`` / ``prompt_name``
(``"query"`` or ``"document"``) and every usual ``encode`` keyword. Texts of several languages:
one call per language, or ``LiRAModel.encode(texts, langs=[…])``. sentence-transformers sorts
the texts of a call by length before batching, so a per-text list cannot follow them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.base.modules import InputModule

from lasr.hub import hub_error
from lasr.interop import MODULE_TYPE, MODULES_NAME, resolve_kind
from lasr.model import LiRAModel
from lasr.model_card import write_card
from lira.errors import CheckpointError, LiRAError, UserInputError
from lira.languages import UNKNOWN_LANG, language_problem
from lira.models.loading import remote_code_key
from lira.translation.config import TranslationConfig

SENTENCE_EMBEDDING = "sentence_embedding"
"""The one output a LiRA model gives (sentence-transformers' ``output_value``)."""


class LiRAFeatures(dict):  # type: ignore[type-arg]
    """The output features of :class:`LiRAModule`: asking for any but ``sentence_embedding``
    (``output_value="token_embeddings"``) is one line saying what a LiRA model gives."""

    def __missing__(self, key: str) -> Any:
        raise UserInputError(
            f"output_value={key!r}: a LiRA model gives one fused vector per text and no "
            f"{key}; use output_value={SENTENCE_EMBEDDING!r} (the default)"
        )


class LiRAModule(InputModule):
    """The sentence-transformers module of a LiRA model: texts in, ``sentence_embedding`` out
    (exactly ``LiRAModel.encode`` of the texts with the call's ``lang`` and kind)."""

    forward_kwargs: ClassVar[set[str]] = {"task", "lang"}
    config_keys: ClassVar[list[str]] = []

    def __init__(self, lira: LiRAModel) -> None:
        super().__init__()
        self.lira = lira

    @classmethod
    def load(  # type: ignore[override]
        cls,
        model_name_or_path: str,
        subfolder: str = "",
        token: bool | str | None = None,
        cache_folder: str | None = None,
        revision: str | None = None,
        local_files_only: bool = False,
        **kwargs: Any,
    ) -> LiRAModule:
        """The LiRA model of a folder or hub id (on the CPU; sentence-transformers moves it)."""
        folder = cls.load_dir_path(
            model_name_or_path,
            subfolder=subfolder,
            token=token,
            cache_folder=cache_folder,
            revision=revision,
            local_files_only=local_files_only,
        )
        lira = LiRAModel.from_pretrained(folder, device="cpu")
        lira.name_or_path = model_name_or_path
        return cls(lira)

    def save(self, output_path: str, *args: Any, **kwargs: Any) -> None:
        """Write the LiRA model folder (:meth:`LiRAModel.save_pretrained`)."""
        self.lira.save_pretrained(output_path)

    def get_sentence_embedding_dimension(self) -> int:
        """d_en + d_lr (+ d_g per g block)."""
        return self.lira.dim

    get_embedding_dimension = get_sentence_embedding_dimension

    def preprocess(  # type: ignore[override]
        self,
        inputs: list[str],
        prompt: str | None = None,
        task: str | None = None,
        lang: str | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """The texts with their language and kind (the prompt names the kind: never prepended)."""
        kind = resolve_kind("query", prompt or None, task)
        if lang is not None and not isinstance(lang, str):
            raise TypeError(
                "lang= is one language for every text of the call (e.g. lang='de'); for texts "
                "of several languages call encode once per language, or use "
                "LiRAModel.encode(texts, langs=[...])"
            )
        why = None if lang is None else language_problem(lang)
        if why is not None:
            raise UserInputError(
                f"lang={lang!r:.24}: {why}; give the texts' ISO 639-1 code (e.g. lang='de'; "
                "'en' is never translated), or no lang for texts of unknown language"
            )
        texts = list(inputs)
        return {"lira_texts": texts, "lira_langs": [lang or UNKNOWN_LANG] * len(texts),
                "lira_kind": kind}  # fmt: skip

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """``sentence_embedding`` [B, dim] of the preprocessed texts."""
        texts = features["lira_texts"]
        z = self.lira.encode(texts, features["lira_langs"], kind=features["lira_kind"],
                             batch_size=max(len(texts), 1), convert_to_numpy=False)  # fmt: skip
        assert isinstance(z, torch.Tensor)
        dev = next(self.lira.head.parameters()).device
        return LiRAFeatures({**features, SENTENCE_EMBEDDING: z.to(dev)})


def refuse_folder_code(folder: Path) -> None:
    """CheckpointError (one line naming the file and the key) when a local folder's config asks
    transformers for the folder's own Python code (``auto_map``): never loaded, flag or not."""
    key = remote_code_key(folder, modules=False)
    if key is not None:
        raise CheckpointError(
            f"{folder}: {key} asks for the folder's own Python code; LiRASentenceTransformer "
            "never runs code from a model folder, whatever trust_remote_code says: load a "
            "folder saved by LiRA (which has no auto_map), or remove the key if you trust the "
            "model it names"
        )


class LiRASentenceTransformer(SentenceTransformer):
    """``SentenceTransformer`` for LiRA model folders: the folder's :data:`MODULE_TYPE` resolves
    to :class:`LiRAModule` of the installed package, a class of sentence-transformers' own
    resolves as usual, and any other class a ``modules.json`` names is refused (never imported,
    whatever ``trust_remote_code`` says). ``translation``: your translation config, the opt-in
    to translate texts missing from the model's store when they are encoded
    (:meth:`lasr.model.LiRAModel.translate_new_texts`)."""

    _module_classes: ClassVar[dict[str, type]] = {MODULE_TYPE: LiRAModule}

    def __init__(
        self,
        model_name_or_path: str | Path | None = None,
        *,
        translation: TranslationConfig | None = None,
        **kwargs: Any,
    ) -> None:
        folder = None if model_name_or_path is None else Path(model_name_or_path)
        if folder is not None and folder.is_dir():
            refuse_folder_code(folder)
        # every module sentence-transformers builds (its own Transformer included) loads with
        # trust_remote_code=False, whatever the caller passed
        kwargs["trust_remote_code"] = False
        for key in ("model_kwargs", "processor_kwargs", "config_kwargs"):
            if kwargs.get(key):
                kwargs[key] = {**kwargs[key], "trust_remote_code": False}
        try:
            super().__init__(model_name_or_path, **kwargs)
        except (OSError, ValueError) as e:
            disk = getattr(e, "errno", None)  # the disk refused: the CLI names it
            if isinstance(e, LiRAError) or disk or folder is None or not folder.is_dir():
                raise
            why = " ".join(str(e).split())[:200] or type(e).__name__
            raise CheckpointError(
                f"{folder}: could not load it as a sentence-transformers model ({why}); load "
                "a folder saved by LiRA (LiRAModel.save_pretrained) or a complete "
                "sentence-transformers model"
            ) from e
        if translation is not None:
            self.lira.translate_new_texts(translation)

    def _load_module_class_from_ref(self, class_ref: str, model_name_or_path: str,
                                    *args: Any, **kwargs: Any) -> type:  # fmt: skip
        """LiRA's module, or a class of sentence-transformers; any other is refused in one line
        (importing it would run a ``.py`` file the folder chose)."""
        if class_ref in self._module_classes or class_ref.startswith("sentence_transformers."):
            return super()._load_module_class_from_ref(
                class_ref, model_name_or_path, *args, **kwargs
            )
        raise CheckpointError(
            f"{model_name_or_path}: {MODULES_NAME} names the module class {class_ref!r:.120}, "
            "which is neither LiRA's nor sentence-transformers' own: LiRASentenceTransformer "
            "never imports code from a model folder; load a folder saved by LiRA (or read the "
            "folder's code before you trust it)"
        )

    def _create_model_card(self, path: str, model_name: str | None = None,
                           *args: Any, **kwargs: Any) -> None:  # fmt: skip
        """LiRA's own card (:mod:`lasr.model_card`), its snippet loading ``model_name`` (the hub
        repo of a push) or the folder."""
        module = self[0]
        if not isinstance(module, LiRAModule):
            super()._create_model_card(path, model_name, *args, **kwargs)
            return
        lira = module.lira
        from lasr.folder import CONFIG_NAME

        meta = json.loads((Path(path) / CONFIG_NAME).read_text(encoding="utf-8"))
        write_card(lira, path, meta, model_name or "")

    def push_to_hub(self, repo_id: str, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        """``SentenceTransformer.push_to_hub``; a failed upload is one line naming the hub repo."""
        try:
            return super().push_to_hub(repo_id, *args, **kwargs)
        except Exception as e:
            raise hub_error(repo_id, e) from None

    @property
    def lira(self) -> LiRAModel:
        """The LiRA model inside (for ``langs=`` per text, components, mteb)."""
        module = self[0]
        if not isinstance(module, LiRAModule):
            raise TypeError(f"{type(module).__name__} is not a LiRA model")
        return module.lira

"""A LiRA model folder is also a sentence-transformers model.

:meth:`lasr.model.LiRAModel.save_pretrained` writes ``modules.json`` (one module,
:class:`LiRAModule`, whose class lives in this installed package: the folder holds no code) and
``config_sentence_transformers.json`` (cosine similarity; prompts ``query`` / ``document``
name the kind of text, LiRA applies its backbone's own prompts). Then::

    from lasr.st_module import LiRASentenceTransformer
    st = LiRASentenceTransformer("<run>/lira-model")          # or a hub id
    st.encode(texts, lang="de")                                # queries in German
    st.encode_document(docs, lang="en")                        # task="document"

:class:`LiRASentenceTransformer` is ``SentenceTransformer`` that resolves the module class
above without importing anything the folder names. Plain ``SentenceTransformer(folder)`` loads
the same model once its ``trust_remote_code`` flag is on: sentence-transformers >= 6 asks for
that flag before importing *any* module class outside its own package, even an installed one;
the flag imports :class:`LiRAModule` from this package, and no code comes from the folder.

Keywords: ``lang`` (one ISO 639-1 language for every text of the call; ``"en"`` is never
translated, no ``lang`` = unknown, embedded untranslated), ``task`` / ``prompt_name``
(``"query"`` or ``"document"``) and every usual ``encode`` keyword. Texts of several languages:
one call per language, or ``LiRAModel.encode(texts, langs=[…])``. sentence-transformers sorts
the texts of a call by length before batching, so a per-text list cannot follow them.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.base.modules import InputModule

from lasr.interop import MODULE_TYPE, resolve_kind
from lasr.model import LiRAModel
from lasr.streams import UNKNOWN_LANG


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
        """d_en + d_lr (+ d_g)."""
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
        return {**features, "sentence_embedding": z.to(dev)}


class LiRASentenceTransformer(SentenceTransformer):
    """``SentenceTransformer`` for LiRA model folders (and any other model): the folder's
    :data:`MODULE_TYPE` resolves to :class:`LiRAModule` without ``trust_remote_code``."""

    _module_classes: ClassVar[dict[str, type]] = {MODULE_TYPE: LiRAModule}

    @property
    def lira(self) -> LiRAModel:
        """The LiRA model inside (for ``langs=`` per text, components, mteb)."""
        module = self[0]
        if not isinstance(module, LiRAModule):
            raise TypeError(f"{type(module).__name__} is not a LiRA model")
        return module.lira

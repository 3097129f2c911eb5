"""mteb's encoder protocol over any ``encode(texts, langs, kind, batch_size)`` (the one adapter).

:class:`MTEBEncoder` is the one adapter between mteb and every model the project evaluates: a
``LiRAModel`` (which uses it itself, so ``mteb.evaluate(lira_model, tasks)`` works), one of its
components, the bare backbone, a baseline checkpoint, mE5-small. It lives in the core so the
LiRA model (``lasr``) and the evaluators (:mod:`evaluators.mteb_tasks`, which describes the
languages and kinds it gives each text) share it. mteb is imported only when it is used.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

import numpy as np

from lira.encoding import Encoder
from lira.languages import ISO_639_1, UNKNOWN_LANG

if TYPE_CHECKING:  # mteb is optional (the ``mteb`` extra): its types for annotations only
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.models.model_meta import ModelMeta
    from mteb.types import Array, BatchedInput, EncodeKwargs, PromptType
    from torch import Tensor
    from torch.utils.data import DataLoader

log = logging.getLogger(__name__)

DOCUMENT_FIRST = frozenset({"BelebeleRetrieval", "MLQARetrieval"})
"""Retrieval tasks whose two-language subsets list [document language, query language]."""

MACRO_LANGUAGES = {
    "cmn": "zh",
    "yue": "zh",
    "arb": "ar",
    "ary": "ar",
    "arz": "ar",
    "acm": "ar",
    "apc": "ar",
    "ars": "ar",
    "zsm": "ms",
    "pes": "fa",
    "prs": "fa",
    "npi": "ne",
    "khk": "mn",
    "lvs": "lv",
    "ekk": "et",
    "fil": "tl",
    "tgl": "tl",
    "swh": "sw",
    "uzn": "uz",
    "azj": "az",
    "plt": "mg",
    "gaz": "om",
    "als": "sq",
    "ydd": "yi",
    "ory": "or",
    "nob": "no",
    "nno": "no",
}
"""ISO 639-3 individual languages -> ISO 639-1 of their macrolanguage."""


def iso1(code: str) -> str:
    """ISO 639-1 code of an mteb language (``deu-Latn`` -> ``de``); an unknown one is kept."""
    base = code.split("-")[0].split("_")[0].lower()
    if len(base) == 2:
        return base
    return MACRO_LANGUAGES.get(base) or _iso3_to_1().get(base, base)


@functools.cache
def _iso3_to_1() -> dict[str, str]:
    """ISO 639-3 -> ISO 639-1, from the table mteb ships."""
    import mteb.languages

    path = Path(mteb.languages.__file__).with_name("iso_639_1_to_3.json")
    return {v: k for k, v in json.loads(path.read_text(encoding="utf-8")).items()}


def subset_languages(task_metadata: TaskMetadata, hf_subset: str) -> list[str]:
    """ISO 639-1 codes of the languages of ``hf_subset``, in the task's order (a language with
    none is :data:`~lira.languages.UNKNOWN_LANG`: embedded untranslated)."""
    langs = task_metadata.eval_langs
    langs = langs.get(hf_subset, []) if isinstance(langs, dict) else langs
    codes = [iso1(x) for x in langs]
    return [c if c in ISO_639_1 else UNKNOWN_LANG for c in codes]


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


class MTEBEncoder:
    """mteb's ``EncoderProtocol`` over an evaluators ``encode(texts, langs, kind, batch_size)``.

    ``encoder``: any :class:`lira.encoding.Encoder`; ``name``: the method name (results go to
    ``results/lira__<name>/<revision>/``); ``meta``: more ModelMeta fields (languages,
    dimensions, …). :mod:`evaluators.mteb_tasks` describes the languages and kinds it gives.
    """

    def __init__(
        self,
        encoder: Encoder,
        name: str,
        batch_size: int = 32,
        revision: str = "local",
        meta: dict[str, object] | None = None,
    ) -> None:
        from mteb.models.model_meta import ModelMeta, ScoringFunction

        self.encoder, self.name, self.batch_size = encoder, name, batch_size
        self.meta = ModelMeta.create_empty(
            {
                "name": f"lira/{_slug(name)}",
                "revision": revision,
                "similarity_fn_name": ScoringFunction.COSINE,
                **(meta or {}),
            }
        )
        self._pair_calls: dict[tuple[str, str, str], int] = defaultdict(int)
        self._warned: set[tuple[str, str]] = set()

    @property
    def mteb_model_meta(self) -> ModelMeta:
        """mteb's ModelMeta of this method (name and revision, and what ``meta`` adds)."""
        return self.meta

    def text_languages(
        self,
        task_metadata: TaskMetadata,
        hf_split: str,
        hf_subset: str,
        prompt_type: PromptType | str | None,
        n: int,
    ) -> list[str] | None:
        """The language of each of the ``n`` texts of one ``encode`` call (None = unknown)."""
        langs = subset_languages(task_metadata, hf_subset)
        if len(set(langs)) == 1:
            return [langs[0]] * n
        ptype = getattr(prompt_type, "value", prompt_type)
        if len(langs) == 2 and ptype in ("query", "document"):
            doc_first = task_metadata.name in DOCUMENT_FIRST
            side = (ptype == "document") != doc_first
            return [langs[int(side)]] * n
        if len(langs) == 2:
            key = (task_metadata.name, hf_split, hf_subset)
            side = self._pair_calls[key] % 2
            self._pair_calls[key] += 1
            return [langs[side]] * n
        if (task_metadata.name, hf_subset) not in self._warned:
            self._warned.add((task_metadata.name, hf_subset))
            log.warning(
                "%s subset %s lists languages %s: texts are passed without a language "
                "(LiRA embeds them untranslated)",
                task_metadata.name,
                hf_subset,
                langs or "none",
            )
        return None

    def encode(
        self,
        inputs: DataLoader[BatchedInput],
        *,
        task_metadata: TaskMetadata,
        hf_split: str,
        hf_subset: str,
        prompt_type: PromptType | None = None,
        **kwargs: Unpack[EncodeKwargs],
    ) -> np.ndarray:
        """Embeddings [N, d] of every text of ``inputs`` (mteb's DataLoader of ``{"text": [...]}``)."""
        texts = [t for batch in inputs for t in batch["text"]]
        ptype = getattr(prompt_type, "value", prompt_type)
        kind = "document" if ptype == "document" else "query"
        langs = self.text_languages(task_metadata, hf_split, hf_subset, prompt_type, len(texts))
        bs = int(kwargs.get("batch_size") or self.batch_size)
        out = self.encoder.encode(texts, langs=langs, kind=kind, batch_size=bs)
        if hasattr(out, "detach"):
            out = out.detach().float().cpu().numpy()
        return np.asarray(out, dtype=np.float32)

    @staticmethod
    def similarity(a: Array, b: Array) -> Tensor:
        """Cosine similarity [N, M] (torch, as mteb expects)."""
        from mteb.similarity_functions import cos_sim

        return cos_sim(a, b)

    @staticmethod
    def similarity_pairwise(a: Array, b: Array) -> Array:
        """Row-wise cosine similarity [N]."""
        from mteb.similarity_functions import pairwise_cos_sim

        return pairwise_cos_sim(a, b)

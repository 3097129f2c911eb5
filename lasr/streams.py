"""What LaSR fuses, and how :class:`lasr.model.LiRAModel` computes it: the English text each
input gets (the Actor's pick among the stored candidates), g's pooled bins, the backbone's
vectors and the gate features, as :class:`Streams`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from arca.model import ArcaModel
from lasr.config import LaSRArchitecture
from lasr.folder import refuse_foreign_store, require_endpoints, runnable, same_names
from lasr.fusion import GATE_FEATURES, gate_features
from lira.config import ModelsConfig
from lira.encoding import check_texts
from lira.errors import UserInputError
from lira.languages import UNKNOWN_LANG, language_problem
from lira.models import Backbone
from lira.translation.config import Pool, TranslationConfig, TranslatorConfig
from lira.translation.engine import fill_store
from lira.translation.store import TranslationStore
from lira.translation.types import NEUTRAL_SCORE, Candidate


class StreamModel(Protocol):
    """What the stream functions read of a :class:`lasr.model.LiRAModel`."""

    models_cfg: ModelsConfig
    lasr_cfg: LaSRArchitecture
    arca: ArcaModel
    backbone: Backbone
    store: TranslationStore | None
    online: bool
    foreign_store: Path | None
    caller_translation: TranslationConfig | None
    translation_lookups: int
    missing_translations: int

    def candidates(
        self, texts: Sequence[str], langs: Sequence[str], train: bool = False
    ) -> list[list[Candidate]]: ...

    def english_texts(
        self, texts: Sequence[str], langs: Sequence[str], train: bool = False
    ) -> tuple[list[str], Tensor, Tensor]: ...


@dataclass
class Streams:
    """What LaSR fuses, per text: E_en [B, d_en], P_S(g(x)) bins [B, S, d_g], features [B, 9],
    h(x) [B, d_en] (the backbone on the untranslated text; = E_en when nothing was translated or
    without ``lasr.raw_view`` and ``lasr.raw_h``)
    and ḡ(y*) [B, d_g] (g on the chosen English text; = the mean of the bins when nothing was
    translated or without ``lasr.translated_g``)."""

    e_en: Tensor
    g_bins: Tensor
    feats: Tensor
    e_raw: Tensor
    g_tr: Tensor

    def select(self, rows: Sequence[int] | Tensor) -> Streams:
        """The streams of ``rows``."""
        idx = torch.as_tensor(rows, dtype=torch.long)
        return Streams(*(t[idx] for t in self.tensors()))

    def tensors(self) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """(e_en, g_bins, feats, e_raw, g_tr): the arguments of :class:`lasr.fusion.LaSRNet`."""
        return self.e_en, self.g_bins, self.feats, self.e_raw, self.g_tr

    def net_inputs(
        self, device: torch.device | str
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """:meth:`tensors` on ``device``: the arguments of :class:`lasr.fusion.LaSRNet`."""
        return tuple(t.to(device) for t in self.tensors())  # type: ignore[return-value]

    @staticmethod
    def empty(d_en: int, bins: int, d_g: int) -> Streams:
        """The streams of no text."""
        e_en, g_bins = torch.zeros(0, d_en), torch.zeros(0, bins, d_g)
        return Streams(e_en, g_bins, torch.zeros(0, GATE_FEATURES), e_en.clone(), g_bins.mean(1))

    @staticmethod
    def cat(parts: Sequence[Streams]) -> Streams:
        """Row-wise concatenation."""
        return Streams(*(torch.cat(list(ts)) for ts in zip(*(p.tensors() for p in parts))))


def texts_and_langs(
    texts: Sequence[str], langs: Sequence[str] | None
) -> tuple[list[str], list[str]]:
    """``texts`` and one language per text (unknown when ``langs`` is None), checked: each an
    ISO 639-1 code or :data:`~lira.languages.UNKNOWN_LANG`."""
    texts = list(texts)
    check_texts(texts)
    langs = list(langs) if langs is not None else [UNKNOWN_LANG] * len(texts)
    if len(langs) != len(texts):
        raise ValueError(f"got {len(texts)} texts but {len(langs)} langs; pass one lang per text")
    for lang in dict.fromkeys(langs):
        why = None if lang == UNKNOWN_LANG else language_problem(lang)
        if why is not None:
            raise UserInputError(
                f"langs: {why}; give each text's ISO 639-1 code (e.g. de; en is never "
                f"translated), or {UNKNOWN_LANG!r} (or no langs) for a text of unknown language"
            )
    return texts, langs


def has_store_file(store: TranslationStore | None) -> bool:
    """True when ``store`` is a store with a file behind it."""
    return store is not None and bool(getattr(store, "path", ""))


def stored_candidates(
    model: StreamModel,
    texts: Sequence[str],
    langs: Sequence[str],
    translators: list[TranslatorConfig],
) -> list[list[Candidate]]:
    """The English candidates of ``translators`` stored for each text (none for English and
    unknown-language texts); online, the caller's translators of the same names first fill the
    store for the texts missing there (a folder never chooses what runs: :mod:`lasr.folder`)."""
    out: list[list[Candidate]] = [[] for _ in texts]
    if not translators or model.store is None:
        return out
    groups: dict[str, list[int]] = {}
    for i, lang in enumerate(langs):
        if lang not in ("en", UNKNOWN_LANG):
            groups.setdefault(lang, []).append(i)
    for lang, rows in groups.items():
        sub = [texts[i] for i in rows]
        if model.online:
            refuse_foreign_store(model.foreign_store)
            run_cfg = runnable(model.caller_translation, translators)
            translators = same_names(run_cfg, translators)
            require_endpoints(run_cfg, translators)
            run = Pool(models=model.models_cfg, translation=run_cfg)
            fill_store(run, {lang: list(dict.fromkeys(sub))}, model.store)
        found = model.store.candidates(sub, lang, translators)
        for i, c in zip(rows, found):
            out[i] = list(c)
    return out


@torch.no_grad()
def chosen_english(
    model: StreamModel, texts: Sequence[str], langs: Sequence[str]
) -> tuple[list[str], Tensor, Tensor]:
    """The text the backbone embeds for each input — the Actor's arg-max candidate, or the
    input itself (English input, ``use_translations=False``, or no candidate available) —
    with a translated flag [B] and the chosen candidate's c_k = [s, e, p, sim] [B, 4]
    (5.5 and 0 where nothing was translated; as the Actor saw it, so an Arca trained without
    a critic (``arca.use_llm_critic`` / ``arca.use_embedding_critic``) gives 5.5 / 0 too)."""
    chosen = list(texts)
    translated = torch.zeros(len(texts))
    picked = torch.tensor([[NEUTRAL_SCORE] * 3 + [0.0]]).repeat(len(texts), 1)
    if not model.lasr_cfg.use_translations:
        return chosen, translated, picked
    cands = model.candidates(texts, langs)
    rows = [i for i, c in enumerate(cands) if c]
    foreign = [i for i, lang in enumerate(langs) if lang not in ("en", UNKNOWN_LANG)]
    model.translation_lookups += len(foreign)
    model.missing_translations += sum(1 for i in foreign if not cands[i])
    if not rows:
        return chosen, translated, picked
    # c_k as the trained Actor saw it (arca.use_llm_critic / use_embedding_critic ablations)
    idx, feats = model.arca.pick([texts[i] for i in rows], [cands[i] for i in rows])
    for j, (i, k) in enumerate(zip(rows, idx)):
        chosen[i] = cands[i][k].text
        translated[i] = 1.0
        picked[i] = feats[j]
    return chosen, translated, picked


def compute_streams(
    model: StreamModel,
    texts: list[str],
    langs: list[str],
    kind: str,
    batch_size: int | None,
    translate: bool = True,
) -> Streams:
    """The :class:`Streams` of distinct ``texts`` (no memo): g's pooled bins, the backbone on
    the chosen English text (:func:`chosen_english`; the text itself when ``translate`` is
    false), h on the untranslated text of the translated ones (``lasr.raw_view`` or
    ``lasr.raw_h``), g on the chosen English text (``lasr.translated_g``) and the gate features;
    the encoders run in batches of ``batch_size`` (None: all at once)."""
    bs = batch_size or max(len(texts), 1)
    g_bins = torch.cat(
        [
            model.arca.pooled_sources(texts[i : i + bs], kind).float().cpu()
            for i in range(0, len(texts), bs)
        ]
    )
    if translate:
        english, translated, picked = model.english_texts(texts, langs)
    else:  # as english_texts gives an untranslated text
        english, translated = list(texts), torch.zeros(len(texts))
        picked = torch.tensor([[NEUTRAL_SCORE] * 3 + [0.0]]).repeat(len(texts), 1)
    e_en = _backbone(model, english, kind, bs)
    e_raw = e_en.clone()
    raw = model.lasr_cfg.raw_view or model.lasr_cfg.raw_h
    rows = [i for i in range(len(texts)) if translated[i]] if raw else []
    disagree = torch.zeros(len(texts))  # exactly 0 where h(x) was not computed
    if rows:  # the backbone's own view of the texts it did not see untranslated
        e_raw[rows] = _backbone(model, [texts[i] for i in rows], kind, bs)
        cos = torch.nn.functional.cosine_similarity(e_en[rows], e_raw[rows], dim=-1)
        disagree[rows] = 1.0 - cos
    g_tr = g_bins.mean(dim=1)  # g's own vector where nothing was translated
    rows = [i for i in range(len(texts)) if translated[i]] if model.lasr_cfg.translated_g else []
    for j in range(0, len(rows), bs):
        part = rows[j : j + bs]
        bins = model.arca.pooled_sources([english[i] for i in part], kind).float().cpu()
        g_tr[part] = bins.mean(dim=1)
    is_en = torch.tensor([1.0 if lang == "en" else 0.0 for lang in langs])
    feats = gate_features(is_en, translated, picked, kind == "document", disagree)
    return Streams(e_en, g_bins, feats, e_raw, g_tr)


def _backbone(model: StreamModel, texts: list[str], kind: str, batch_size: int) -> Tensor:
    """h's sentence vectors [B, d_en] of ``texts``, on the CPU in float32."""
    out = model.backbone.encode(texts, langs=None, kind=kind, batch_size=batch_size)
    return torch.as_tensor(np.asarray(out)).float()


def untranslated_note(store: TranslationStore | None, missing: int, total: int) -> str:
    """The warning that ``missing`` of ``total`` non-English texts had no stored
    translation and were embedded untranslated, naming the store and the fix."""
    where = f"store {store.path}" if has_store_file(store) else "the model has no translation store"
    return (
        f"{missing} of {total} non-English texts have no stored translation ({where}); "
        "they are embedded untranslated. If they are sources of your config (queries), "
        "run `lira translate CONFIG` to fill the store; new texts are translated when the "
        "model is loaded with your translators: LiRAModel.from_pretrained(folder, "
        "translation=cfg.translation) (said once per model)"
    )

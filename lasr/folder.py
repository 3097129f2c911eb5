"""A LiRA model folder's ``lira_config.json``: what :meth:`lasr.model.LiRAModel.save_pretrained`
writes, what :meth:`~lasr.model.LiRAModel.from_pretrained` reads back, and what a folder may
never choose.

The folder holds::

    lira_config.json   format, models / translation / arca sections, LaSR's ``architecture``
                       (:class:`lasr.config.LaSRArchitecture`: what rebuilds the net) apart from
                       its ``lasr`` training settings, the stream dimensions, the translation
                       store's path relative to this folder and the card; the translators are
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

A folder names its translators (names, models, kinds) but never reaches them: their endpoints
and API-key variables come from the caller's ``translation`` config only (matched by name; the
critic's when its kind matches). A folder that holds a ``base_url``, an ``api_key_env`` or an
absolute store path is refused (:class:`lira.checkpoint.CheckpointError`): it would decide
where online translation sends texts and which secret goes with them. Its store path is
relative to the folder; the folder's own snapshot (``translations.sqlite``) opens as a working
copy; a missing store is a warning (texts are then embedded untranslated).

Older folders are read through :func:`lira.compat.current_folder_meta` (the one place for
every migration).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors.torch import save_file
from torch import nn

from arca.config import ArcaConfig
from arca.folder import CONFIG_NAME as ARCA_CONFIG
from arca.folder import module_state
from arca.model import ArcaModel, load_arca
from lasr.config import ARCHITECTURE_KEYS, LaSRArchitecture, LaSRConfig, LaSRRun
from lasr.hub import STORE_NAME, open_folder_store
from lira.checkpoint.manifest import checkpoint_problem, read_meta
from lira.compat import RETIRED_FORMATS, current_folder_meta
from lira.config import ModelsConfig, from_dict, to_dict
from lira.errors import CheckpointError, UserInputError
from lira.models import Backbone
from lira.translation.config import TranslationConfig, TranslatorConfig, path_too_long
from lira.translation.store import TranslationStore

log = logging.getLogger(__name__)

CONFIG_NAME = "lira_config.json"
HEAD_NAME = "head.safetensors"
ADAPTOR_NAME = "adaptor.safetensors"
FORMAT = "lira-v3"


@dataclass
class SavedConfigs:
    """A folder's ``lira_config.json``, checked: what :class:`lasr.model.LiRAModel` is rebuilt
    from."""

    models: ModelsConfig
    translation: TranslationConfig
    """The folder's translators as a description (no endpoints, no engine arguments)."""
    arca: ArcaConfig
    architecture: LaSRArchitecture
    training: dict[str, object]
    """LaSR's training settings as saved (a record for the card and a later save)."""
    store: str
    """The folder's store, relative to the folder; empty = none."""
    card: dict[str, object]


def folder_meta(configs: SavedConfigs, d_en: int, d_lr: int) -> dict[str, object]:
    """The ``lira_config.json`` mapping of ``configs`` (endpoints scrubbed)."""
    return {
        "format": FORMAT,
        "models": to_dict(configs.models),
        "translation": without_endpoints(to_dict(configs.translation)),
        "arca": to_dict(configs.arca),
        "architecture": to_dict(configs.architecture),
        "lasr": configs.training,
        "d_en": d_en,
        "d_lr": d_lr,
        "store": configs.store,
        "card": configs.card,
    }


def write_folder(path: Path, meta: dict[str, object], head: nn.Module, adaptor: nn.Module) -> None:
    """Write ``lira_config.json`` (``meta``), the fusion head and LaSR's Adaptor into ``path``."""
    (path / CONFIG_NAME).write_text(json.dumps(meta, indent=2), encoding="utf-8")
    for module, name in ((head, HEAD_NAME), (adaptor, ADAPTOR_NAME)):
        save_file(module_state(module), str(path / name))


def read_folder(path: Path, caller: TranslationConfig | None) -> SavedConfigs:
    """The checked configs of the model folder ``path``: a retired format, an endpoint, a key
    variable, an absolute store path or a damaged file is refused; the translators' endpoints
    come from ``caller`` only (:func:`with_endpoints`)."""
    meta = read_meta(
        path,
        CONFIG_NAME,
        FORMAT,
        f"a LiRA model folder (no {CONFIG_NAME}); "
        "write one with LiRAModel.save_pretrained or `lira lasr`",
        RETIRED_FORMATS,
    )
    refuse_endpoints(meta, path)
    meta = current_folder_meta(meta, path, ARCHITECTURE_KEYS)
    models = from_dict(ModelsConfig, meta["models"], "models")
    saved = described(with_endpoints(meta["translation"], caller))
    translation = from_dict(TranslationConfig, saved, "translation")
    arca = from_dict(ArcaConfig, meta["arca"], "arca")
    arch = dict(meta["architecture"])
    # the training settings are checked as the run config checks them (keys, types, values)
    lasr = to_dict(from_dict(LaSRConfig, {**meta["lasr"], **arch}, "lasr"))
    architecture = from_dict(LaSRArchitecture, arch, "architecture")
    problem = checkpoint_problem(path, verify=True)
    if problem is not None:
        raise CheckpointError(
            f"LiRA model folder {path} is damaged ({problem}); restore it, or train it "
            "again with `lira lasr`"
        )
    training = {k: v for k, v in lasr.items() if k not in ARCHITECTURE_KEYS}
    store = meta.get("store") or ""
    card = dict(meta.get("card") or {})
    return SavedConfigs(models, translation, arca, architecture, training, store, card)


def open_saved_store(store: str, path: Path) -> tuple[TranslationStore | None, Path | None]:
    """(the store a folder names, opened; the store's path when it lies outside the folder and
    its run, else None). The folder's own snapshot opens as a working copy; a missing store is
    a warning (texts are embedded untranslated)."""
    where, outside = store_in_folder(store, path)
    if where.is_file() and store == STORE_NAME:  # the folder's own snapshot
        return open_folder_store(where), None
    if where.is_file():  # a folder of an older layout: the run's store beside it
        return TranslationStore(where), where if outside else None
    log.warning(
        "translation store %s of the LiRA model %s not found: non-English texts "
        "are embedded untranslated (copy the store there or pass store=)",
        where,
        path,
    )
    return None, None


ENDPOINT_KEYS = ("base_url", "api_key_env")
"""Translator and critic keys a model folder never holds: where texts go, which secret goes."""
CALLER_KEYS = (*ENDPOINT_KEYS, "timeout_s", "max_concurrency", "max_retries")
"""Keys taken from the caller's translator of the same name (how to reach it, not what it is)."""
NO_ENDPOINT = "http://endpoint-not-given.invalid/v1"
"""Placeholder ``base_url`` of a saved kind=openai translator the caller gave no endpoint for
(never contacted: :func:`require_endpoints` refuses online translation through it)."""


def _sections(translation: dict[str, Any]) -> list[dict[str, Any]]:
    """The translator and critic dicts of a saved ``translation`` section."""
    out = [t for k in ("llm_translators", "mt_translators") for t in translation.get(k) or []]
    critic = translation.get("critic")
    return [d for d in [*out, critic] if isinstance(d, dict)]


def without_endpoints(translation: dict[str, Any]) -> dict[str, Any]:
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


def refuse_endpoints(meta: dict[str, Any], path: Path) -> None:
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


def with_endpoints(saved: dict[str, Any], caller: TranslationConfig | None) -> dict[str, Any]:
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


def described(saved: dict[str, Any]) -> dict[str, Any]:
    """A folder's ``translation`` dict as a description only: no ``engine_kwargs`` (vLLM
    arguments such as ``trust_remote_code``); online translation runs the caller's translators
    of the same names (:func:`runnable`), never these."""
    saved = dict(saved)
    for key in ("llm_translators", "mt_translators"):
        saved[key] = [
            {**t, "engine_kwargs": {}} if isinstance(t, dict) else t for t in saved.get(key) or []
        ]
    return saved


def runnable(
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


def same_names(
    run_cfg: TranslationConfig, translators: Sequence[TranslatorConfig]
) -> list[TranslatorConfig]:
    """The translators of ``run_cfg`` named like ``translators`` (the store keys what runs)."""
    theirs = {t.name: t for t in run_cfg.llm_translators + run_cfg.mt_translators}
    return [theirs.get(t.name, t) for t in translators]


def store_in_folder(store: str, path: Path) -> tuple[Path, bool]:
    """(the store file a folder names, whether it lies outside the folder and its run).

    A folder's store is a relative path inside the folder, or the run's store beside it
    (``../<name>``, as `lira lasr` saves). Any other relative path (``../../x``, an older
    layout) is only read: online translation never writes into it
    (:func:`refuse_foreign_store`). A path no file system takes (10 MB, NUL, a part over 255
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


def refuse_foreign_store(where: Path | None) -> None:
    """UserInputError when online translation would write into a store that a loaded folder
    names outside itself and its run (the folder may not choose where texts are written)."""
    if where is not None:
        raise UserInputError(
            f"online translation writes into the model's store, and the folder names {where}, "
            "outside the folder and its run: pass a store you choose with "
            "LiRAModel.from_pretrained(folder, store=TranslationStore(path)), or copy the store "
            "into the folder"
        )


def require_endpoints(
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


def run_arca(cfg: LaSRRun, backbone: Backbone, arca_path: str | Path | None) -> ArcaModel:
    """The Arca a run's LiRA model starts from: the trained checkpoint ``arca_path`` when it
    holds one, else a fresh Adaptor + Actor (a warning says so); frozen, in eval mode."""
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

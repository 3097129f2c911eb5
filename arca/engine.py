"""The engine of ``lira arca``: build the items from the translation store, train, summarise.

:func:`run_arca` trains on the configured data and writes ``<output_dir>/arca/`` (the
:class:`~arca.trainer.ArcaTrainer` checkpoints, ``final/`` and ``summary.json``);
:func:`~arca.config.arca_fingerprint` is the run fingerprint its checkpoints hold.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

from arca.config import ArcaRun, arca_fingerprint
from arca.data import (
    ArcaItem,
    CandidateFn,
    StoreCandidates,
    build_items,
    clean_items,
    fetch_candidates,
    gold_eval_items,
    held_out_sources,
    rounded,
)
from arca.g_cache import critic_g
from arca.metrics import evaluate_actor
from arca.model import ArcaModel
from arca.trainable import check_encoder_training
from arca.trainer import ArcaTrainer
from lira.config import ConfigError
from lira.data.splits import Splits, load_splits
from lira.errors import UserInputError
from lira.jsonio import write_json
from lira.models import load_backbone, load_encoder
from lira.translation.config import TranslatorConfig
from lira.translation.critic import build_critic
from lira.translation.engine import store_path
from lira.translation.store import TranslationStore
from lira.translation.types import Candidate

log = logging.getLogger(__name__)


def actor_eval_items(
    cfg: ArcaRun, splits: Splits, items: Sequence[ArcaItem], fetch: CandidateFn
) -> tuple[list[ArcaItem], list[str]]:
    """Held-out sources with their evaluation candidates plus the human English original as a
    reference candidate (named as the pool's train-only reference translator, scored by the
    configured critic; never stored), and the reference names (for ``eval.actor``)."""
    gold = {(it.source, it.lang): it.candidates[0].text for it in gold_eval_items(splits)
            if it.candidates}  # fmt: skip
    train_only = [t.name for t in cfg.translation.active_translators() if t.train_only]
    name = train_only[0] if train_only else "gold-en"
    cands = fetch_candidates(items, fetch)
    out = [ArcaItem(it.source, it.lang, list(c)) for it, c in zip(items, cands)]
    tc = cfg.translation
    critic = None
    if gold and tc.critic.kind != "none":
        encode, g_name = (None, "")
        if tc.critic.kind == "embedding" and not tc.critic.encoder:
            encode, g_name = critic_g(cfg.models, cfg.output_dir)()
        critic = build_critic(
            tc.critic, cache_dir=cfg.models.cache_dir, encode=encode, g_name=g_name
        )
    for lang in dict.fromkeys(it.lang for it in out):
        mine = [it for it in out if it.lang == lang and (it.source, it.lang) in gold]
        texts = [gold[(it.source, it.lang)] for it in mine]
        scores = [r.scores for r in critic.score([it.source for it in mine], texts, lang)] if (
            critic is not None and mine) else [None] * len(mine)  # fmt: skip
        for it, en, sc in zip(mine, texts, scores):
            it.candidates = [*(it.candidates or []), Candidate(name, en, sc)]
    return out, sorted({name, *train_only})


def distill_texts(cfg: ArcaRun, splits: Splits) -> list[str]:
    """The extra English texts of ``objective: distill``: the English documents of the
    training corpus with ``arca.distill_corpus`` (transductive: the documents later ranked)."""
    if not cfg.arca.distill_corpus or splits.train is None:
        return []
    return list(dict.fromkeys(d.text for d in splits.train.corpus if d.lang == "en" and d.text))


def empty_store_message(
    store: TranslationStore, translators: Sequence[TranslatorConfig], n_sources: int
) -> str:
    """Why no training source has a candidate in ``store`` and how to fix it (one line)."""
    held = store.translators()
    names = [t.name for t in translators]
    what = (
        "holds no candidate"
        if not held
        else f"holds candidates of {held} only, none of this config's translators {names} "
        "for these sources (or the same names with other settings)"
    )
    return (
        f"translation store {store.path} {what}: none of the {n_sources} Arca training "
        "sources has a candidate; run `lira translate` with this config first, or set "
        "translation.llm_translators / translation.mt_translators to the translators the "
        "store holds"
    )


def run_arca(cfg: ArcaRun, *, resume: bool = False) -> dict[str, object]:
    """Engine of ``lira arca``: train on the configured data, write ``<output_dir>/arca/``
    (``resume``: continue from the latest checkpoint)."""
    from accelerate.utils import set_seed

    ac = cfg.arca
    out = Path(cfg.output_dir) / "arca"
    path = store_path(cfg)
    if not ac.online_translation and not path.is_file():
        raise FileNotFoundError(
            f"translation store {path} not found; run `lira translate` first or set "
            "arca.online_translation=true"
        )
    active = cfg.translation.required_translators()  # before the store file is made
    store = TranslationStore(path, commit_every=cfg.translation.commit_every)
    train_fetch = StoreCandidates(cfg, store, active, ac.online_translation)
    eval_fetch = StoreCandidates(
        cfg, store, [t for t in active if not t.train_only], ac.online_translation
    )
    splits = load_splits(cfg.data)
    train_items = build_items(splits.train_sources, train_fetch, ac.online_translation)
    eval_items = build_items(held_out_sources(splits), eval_fetch, ac.online_translation)
    if not ac.online_translation and not clean_items(train_items)[0]:
        message = empty_store_message(store, active, len(train_items))
        store.close()
        raise UserInputError(message)
    distill = distill_texts(cfg, splits) if ac.objective == "distill" else []
    ridge = ac.objective == "distill" and ac.distill_solver == "ridge"
    english = (
        ([c.text for it in train_items for c in it.candidates or []] + distill) if ridge else []
    )
    if ridge and not any(t.strip() for t in english):
        store.close()
        raise ConfigError(
            "arca.distill_solver",
            "ridge fits the Adaptor on English texts before training, but there are none "
            "(arca.online_translation=true translates only during training); run `lira "
            "translate` first and set arca.online_translation=false, set arca.distill_corpus="
            "true, or use arca.distill_solver=gradient",
        )
    set_seed(ac.seed)
    backbone = load_backbone(cfg.models)
    encoder = load_encoder(cfg.models)
    model = ArcaModel.from_config(cfg.models, ac, backbone=backbone, encoder=encoder)
    check_encoder_training(encoder, ac)
    if not ac.train_encoder:
        model.attach_g_cache(cfg.output_dir)
    if ridge:
        n = model.fit_ridge(english, ac.distill_ridge)
        log.info("Arca: ridge Adaptor fitted on %d English texts (objective distill)", n)
        distill = []
    trainer = ArcaTrainer(
        ac,
        model,
        train_items,
        out,
        eval_items=eval_items,
        candidate_fn=train_fetch if ac.online_translation else None,
        eval_candidate_fn=eval_fetch if ac.online_translation else None,
        fingerprint=arca_fingerprint(cfg),
        distill_texts=distill,
    )
    before: dict[str, object] = {}
    if trainer.eval_items and not resume:
        before = trainer.evaluate(trainer.eval_items)
        if trainer.accelerator.is_main_process:
            log.info("Arca held-out before training: %s", json.dumps(rounded(before)))
    trainer.replay_eval = bool(trainer.eval_items)  # a fresh run evaluates first (above)
    set_seed(ac.seed + trainer.accelerator.process_index)
    summary = dict(trainer.train(resume=resume).summary)
    summary["eval_before"] = before
    gold = gold_eval_items(splits)
    if gold:  # the anchor against the human English of held-out questions (measurement only)
        summary["eval_gold"] = trainer.evaluate(gold)
        if trainer.accelerator.is_main_process:
            log.info("Arca held-out vs gold English: %s", json.dumps(rounded(summary["eval_gold"])))
    if trainer.eval_items:  # how the Actor picks on held-out sources, the gold English offered
        items, refs = actor_eval_items(cfg, splits, trainer.eval_items, eval_fetch)
        actor = evaluate_actor(model, items, ac.eval_batch_size, refs)
        summary.setdefault("eval", {})["actor"] = actor  # type: ignore[union-attr]
        if trainer.accelerator.is_main_process:
            log.info("Arca Actor on held-out sources: %s", json.dumps(rounded(actor)))
    if model.g_cache is not None:
        summary["g_cache"] = {"hits": model.g_cache.hits, "misses": model.g_cache.misses}
        model.g_cache.sync()  # the other processes' rows, stored by the one writer
    if trainer.accelerator.is_main_process:
        write_json(out / "summary.json", rounded(summary))
    store.close()
    return summary

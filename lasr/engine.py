"""The engine of ``lira lasr``: train the fusion head, evaluate before/after, save the model.

:func:`run_lasr` starts from the trained Arca folder, trains a
:class:`~lasr.trainer.LaSRTrainer` on the configured data (:func:`task_data`), writes the LiRA
model to ``<output_dir>/lira-model`` and the metrics to ``<output_dir>/lasr/metrics.json``;
:func:`~lasr.config.lasr_fingerprint` is the run fingerprint its checkpoints hold.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

from arca.config import ArcaConfig
from arca.folder import CONFIG_NAME as ARCA_CONFIG
from lasr.config import LaSRConfig, LaSRRun, lasr_fingerprint
from lasr.model import LiRAModel
from lasr.model_card import card_languages, run_card
from lasr.trainer import LaSRTrainer
from lira.data.splits import Splits, load_splits, validation_pools
from lira.data.types import PairData, RetrievalData
from lira.errors import MissingFileError
from lira.jsonio import write_json
from lira.translation.engine import store_path
from lira.translation.store import TranslationStore

log = logging.getLogger(__name__)


def task_data(
    cfg: LaSRRun, splits: Splits | None = None
) -> tuple[RetrievalData | None, RetrievalData | None, PairData | None, PairData | None]:
    """(train retrieval, validation retrieval, train pairs, held-out pairs) of the config's
    data (``splits``: already loaded from it). LaSR reads the validation split
    (``data.dev_fraction``) only: the test split is ``lira compare``'s; without a validation
    split LaSR evaluates no retrieval."""
    splits = splits if splits is not None else load_splits(cfg.data)
    train_r = getattr(splits, "train", None)
    eval_r = splits.dev
    train_p = getattr(splits, "train_pairs", None)
    eval_p = getattr(splits, "eval_pairs", None)
    if cfg.lasr.task == "rank":
        train_r = eval_r = None
    if cfg.lasr.task == "retrieval":
        train_p = eval_p = None
    return train_r, eval_r, train_p, eval_p


def trained_arca(cfg: LaSRRun) -> Path:
    """``<output_dir>/arca/final``, where ``lira lasr`` starts from; a folder without Arca's
    checkpoint there is refused in one line naming it and the fix (``lira arca`` first)."""
    final = Path(cfg.output_dir) / "arca" / "final"
    if not (final / ARCA_CONFIG).is_file():
        raise MissingFileError(
            f"no trained Arca at {final} ({ARCA_CONFIG} missing): LaSR starts from Arca's "
            "checkpoint; run `lira arca CONFIG` first (or `lira run CONFIG` with the arca stage), "
            "with the same output_dir"
        )
    return final


def run_lasr(
    cfg: LaSRRun, *, resume: bool = False, arca_dir: str | Path | None = None
) -> dict[str, object]:
    """Engine of ``lira lasr``: train the fusion head, evaluate before/after, save the model.

    ``resume``: continue from the latest checkpoint. ``arca_dir``: the trained Arca folder to start from (default ``<output_dir>/arca/final``;
    ``lira ablate`` shares one Arca among the rows that change LaSR only)."""
    from accelerate.utils import set_seed

    lc = cfg.lasr
    out = Path(cfg.output_dir)
    set_seed(lc.seed)
    path = store_path(cfg)
    store = None
    if path.is_file() or cfg.arca.online_translation:
        store = TranslationStore(path, commit_every=cfg.translation.commit_every)
    elif lc.use_translations:
        log.warning(
            "translation store %s not found: every text is embedded untranslated; run "
            "`lira translate` first for the full method",
            path,
        )
    splits = load_splits(cfg.data)  # once, before the models: a bad record stops it at once
    arca_dir = Path(arca_dir) if arca_dir is not None else out / "arca" / "final"
    model = LiRAModel.from_config(cfg, arca_dir, store=store, online=cfg.arca.online_translation)

    model.arca.attach_g_cache(out)  # a frozen g's embeddings: computed once per run
    train_r, eval_r, train_p, eval_p = task_data(cfg, splits)
    trainer = LaSRTrainer(
        lc,
        model,
        out,
        retrieval=train_r,
        pairs=train_p,
        eval_retrieval=eval_r,
        eval_pairs=eval_p,
        fingerprint=lasr_fingerprint(cfg),
        fusion_pools=validation_pools(splits) if eval_r is not None else None,
    )
    if eval_r is None and train_r is not None:
        log.warning("LaSR: no validation split (data.dev_fraction = 0): nothing is selected on "
                    "validation and no held-out retrieval is evaluated during training")  # fmt: skip
    trainer.train(resume=resume)
    before = trainer.evals[0] if trainer.evals and trainer.evals[0]["step"] == 0 else {}
    if trainer.best:  # "after" = the weights that are saved
        trainer.ema.shadow.load_state_dict(trainer.best["state"])
    after = trainer.evaluate(eval_r, eval_p)
    log.info("LaSR validation after training (saved weights): %s", json.dumps(after))
    model.card = run_card(cfg.data, card_languages(cfg.data), {"before": before, "after": after})
    trainer.finalize()
    summary = {
        "task": trainer.task,
        "steps": trainer.step,
        "nonfinite_steps": trainer.nonfinite_steps,
        "fixed_fusion": {k: dataclasses.asdict(f) for k, f in trainer.fits.items()},
        "selected_step": trainer.best.get("step") if trainer.best else trainer.step,
        "before": before,
        "after": after,
        "evals": trainer.evals,
        "missing_translations": model.missing_translations,
        "translation_lookups": model.translation_lookups,
        "ablations": ablation_switches(model.arca.arca_cfg, lc),
    }
    if model.missing_translations:
        log.warning("LaSR: %s", model.untranslated_note(model.missing_translations,
                                                        model.translation_lookups))  # fmt: skip
    if trainer.accelerator.is_main_process:
        trainer.root.mkdir(parents=True, exist_ok=True)
        write_json(trainer.root / "metrics.json", summary)
    trainer.accelerator.wait_for_everyone()
    if store is not None:
        store.close()
    return summary


def ablation_switches(arca_cfg: ArcaConfig, lasr_cfg: LaSRConfig) -> dict[str, bool]:
    """The Table 5 switches a LiRA model was trained with (``arca.use_*``, ``lasr.use_*``)."""
    arca_keys = ("use_llm_critic", "use_embedding_critic")
    lasr_keys = ("use_translations", "use_multilingual_encoder", "use_queue")
    return {
        **{f"arca.{k}": bool(getattr(arca_cfg, k)) for k in arca_keys},
        **{f"lasr.{k}": bool(getattr(lasr_cfg, k)) for k in lasr_keys},
    }

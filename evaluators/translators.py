"""Retrieval with a translator's output: base vs GRPO-tuned (``lira tune-translator --evaluate``).

Does the translator tuned on Arca's anchor reward write translations the backbone h retrieves
better with? This module answers it on the configured data's held-out
questions (never tuning sources): both translators translate every held-out question of the
evaluation languages into the run's store (under their own ids; cached candidates are reused),
then h embeds each translator's output and retrieves over the English passages (scenario
``lang-en``). Rows: h on the raw question, h on each translator's output, and the tuned one's
paired difference to the base one (same questions, paired bootstrap). Also written: random
(source, base, tuned) triples so a reader can see whether the reward was gamed.

Output under ``<tune output>/evaluation/``: ``leaderboard.{md,json}`` (+ plots),
``pairs.md`` and ``summary.json``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
from pathlib import Path
from typing import Protocol, TypedDict

import numpy as np

from evaluators.config import EvalRun
from evaluators.engine import evaluate_encoders
from evaluators.leaderboard import Row, write_leaderboard
from lasr.eval_models import backbone_encoder
from lira.data.splits import load_splits
from lira.data.xquad_r import XQuADR
from lira.encoding import Encoder
from lira.errors import UserInputError
from lira.translation.config import CriticConfig, TranslatorConfig
from lira.translation.engine import fill_store, store_path
from lira.translation.store import TranslationStore
from lira.translation.tuning import TuningRun, base_translator, output_folder, tuned_translator

log = logging.getLogger(__name__)
SCENARIO = "lang-en"


def stored_translations(
    store: TranslationStore,
    texts: list[str],
    langs: list[str],
    translators: list[TranslatorConfig],
) -> tuple[list[str], int]:
    """Each non-English text's first stored candidate among ``translators`` (the text itself
    where none is stored), and how many had none."""
    out, missing = list(texts), 0
    for lang in sorted(set(langs) - {"en"}):
        rows = [i for i, lg in enumerate(langs) if lg == lang]
        found = store.candidates([texts[i] for i in rows], lang, translators)
        for i, cands in zip(rows, found):
            if cands:
                out[i] = cands[0].text
            else:
                missing += 1
    return out, missing


class TranslatedQueries:
    """The backbone on one translator's stored output for non-English texts (``Encoder``)."""

    def __init__(self, backbone: Encoder, store: TranslationStore, translator: TranslatorConfig):
        self.backbone, self.store, self.translator = backbone, store, translator
        self.missing = 0

    def encode(
        self,
        texts: list[str],
        langs: list[str] | None = None,
        kind: str = "query",
        batch_size: int = 32,
    ) -> np.ndarray:
        """[N, d] backbone embeddings of the translations (documents and English: the text)."""
        langs = list(langs) if langs is not None else ["en"] * len(texts)
        english, missing = stored_translations(self.store, list(texts), langs, [self.translator])
        self.missing += missing
        return self.backbone.encode(english, kind=kind, batch_size=batch_size)


class TranslatorEvalRun(EvalRun, TuningRun, Protocol):
    """What ``lira tune-translator --evaluate`` reads of a run config (a ``RunConfig`` is one)."""


def heldout_questions(cfg: EvalRun) -> tuple[XQuADR, list[str], dict[str, list[str]]]:
    """(dataset, held-out ids, {language: question texts}) of the non-English eval languages."""
    splits = load_splits(cfg.data)
    if splits.dataset is None:
        raise UserInputError(
            f"tune-translator --evaluate needs parallel retrieval data (data.format: xquad_r); "
            f"the config has data.format={cfg.data.format}"
        )
    langs = [lg for lg in cfg.data.eval_languages if lg != "en"]
    if not langs:
        raise UserInputError(
            "tune-translator --evaluate: data.eval_languages has no non-English language"
        )
    ds = splits.dataset
    return (
        ds,
        splits.eval_ids,
        {lg: [ds.question(lg, q).text for q in splits.eval_ids] for lg in langs},
    )


def sample_pairs(
    store: TranslationStore,
    questions: dict[str, list[str]],
    base: TranslatorConfig,
    tuned: TranslatorConfig,
    n: int,
    seed: int,
) -> list[dict[str, str]]:
    """``n`` random held-out (lang, source, base output, tuned output), seeded."""
    every = [(lg, t) for lg, texts in questions.items() for t in texts]
    picked = random.Random(seed).sample(every, min(n, len(every)))
    out = []
    for lang, text in picked:
        b, t = (store.candidates([text], lang, [tr])[0] for tr in (base, tuned))
        out.append(
            {
                "lang": lang,
                "source": text,
                base.name: b[0].text if b else "(failed)",
                tuned.name: t[0].text if t else "(failed)",
            }
        )
    return out


def _pairs_markdown(pairs: list[dict[str, str]], base: str, tuned: str) -> str:
    def cell(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    lines = [f"| lang | source | {base} | {tuned} |", "|---|---|---|---|"]
    lines += [
        f"| {p['lang']} | {cell(p['source'])} | {cell(p[base])} | {cell(p[tuned])} |" for p in pairs
    ]
    return "\n".join(lines) + "\n"


TranslatorEvalSummary = TypedDict(
    "TranslatorEvalSummary",
    {
        "base": str,
        "tuned": str,
        "tuned_model": str,
        "questions": int,
        "missing_translations": dict[str, int],
        "ndcg@10": dict[str, list[float]],
        "paired_delta": dict[str, list[float]],
        "pairs": list[dict[str, str]],
    },
)
"""``summary.json`` of ``lira tune-translator --evaluate`` (values: [mean, CI low, CI high])."""


def run_translator_eval(cfg: TranslatorEvalRun, *, pairs: int = 20) -> TranslatorEvalSummary:
    """Engine of ``lira tune-translator --evaluate``: h on base vs tuned translations
    (``pairs``: random (source, base, tuned) triples shown, ``--pairs``)."""
    if pairs < 0:
        raise UserInputError(f"--pairs {pairs} is negative; give 0 or more triples to show")
    base, tuned = base_translator(cfg), tuned_translator(cfg)
    if not Path(tuned.model).is_dir():
        raise UserInputError(
            f"no tuned translator at {tuned.model}: run `lira tune-translator CONFIG` first "
            "(same tune_translator.output / name)"
        )
    ds, qids, questions = heldout_questions(cfg)
    pool = dataclasses.replace(
        cfg.translation,
        llm_translators=[base, tuned],
        mt_translators=[],
        pass_at_k=2,
        num_candidates=2,
        critic=CriticConfig(kind="none"),  # only the texts are compared here
    )
    run = dataclasses.replace(cfg, translation=pool)
    n = sum(len(v) for v in questions.values())
    log.info("translating %d held-out questions with %s and %s (cached ones are reused)", n,
             base.name, tuned.name)  # fmt: skip
    with TranslationStore(store_path(run), commit_every=pool.commit_every) as store:
        fill_store(run, questions, store)
        backbone = backbone_encoder(cfg.models)
        names = {"backbone": "backbone (raw question)",
                 base.name: f"h({base.name})", tuned.name: f"h({tuned.name})"}  # fmt: skip
        encoders: dict[str, Encoder] = {
            names["backbone"]: backbone,
            names[base.name]: TranslatedQueries(backbone, store, base),
            names[tuned.name]: TranslatedQueries(backbone, store, tuned),
        }
        eval_cfg = dataclasses.replace(cfg.eval, scenarios=[SCENARIO])
        rows: list[Row] = evaluate_encoders(
            encoders, ds, qids, list(questions), eval_cfg, reference=names[base.name]
        )
        shown = sample_pairs(store, questions, base, tuned, pairs, cfg.seed)
        missing = {k: e.missing for k, e in encoders.items() if isinstance(e, TranslatedQueries)}
    out = output_folder(cfg) / "evaluation"
    trained = set(cfg.data.train_languages)
    title = (
        f"{tuned.name} vs {base.name}: h on each translator's output, held-out questions "
        f"(tuned on {sorted(trained - {'en'})}; unseen: "
        f"{sorted(set(questions) - trained)})"
    )
    files = write_leaderboard(rows, out, title=title)
    (out / "pairs.md").write_text(_pairs_markdown(shown, base.name, tuned.name), encoding="utf-8")
    table = {
        (r["method"], r["language"], r["metric"]): r
        for r in rows
        if r["scenario"] == SCENARIO
        and r["metric"] in ("ndcg@10", f"Δndcg@10 vs {names[base.name]}")
    }

    def triple(r: Row) -> list[float]:
        return [round(r["value"], 2), round(r["ci_low"], 2), round(r["ci_high"], 2)]

    summary: TranslatorEvalSummary = {
        "base": base.name,
        "tuned": tuned.name,
        "tuned_model": tuned.model,
        "questions": n,
        "missing_translations": missing,
        "ndcg@10": {
            f"{m} {lang}": triple(r)
            for (m, lang, metric), r in table.items()
            if metric == "ndcg@10"
        },
        "paired_delta": {
            lang: triple(r)
            for (m, lang, metric), r in table.items()
            if metric.startswith("Δ") and m == names[tuned.name]
        },
        "pairs": shown,
    }
    (out / "summary.json").write_text(
        json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8"
    )
    print(files["md"].read_text(encoding="utf-8"))
    print(f"wrote {files['md']}, {out / 'pairs.md'} and {out / 'summary.json'}")
    return summary

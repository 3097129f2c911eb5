"""Retrieval with a translator's output: base vs GRPO-tuned (``lira tune-translator --evaluate``).

Does the translator tuned on Arca's anchor reward write translations the backbone h retrieves
better with? This module answers it on questions that were never tuning sources: the
validation split (``--split validation``, the default: its ids in the training languages and
``data.dev_languages``, where the pool is decided) or the held-out test split (``--split
test``: the evaluation languages; read once, for a shipped pool). Both translators translate
every such question into the run's store (under their own ids; cached candidates are reused),
then h embeds each translator's output and retrieves over the English passages (scenario
``lang-en``). Rows: h on the raw question, h on each translator's output, and the tuned one's
paired difference to the base one (same questions, paired bootstrap). Also counted: each
translator's outputs that are no translation at all (:func:`lira.translation.checks.
echo_reason`: empty, a copy or echo of the source, still in its language or script), and
random (source, base, tuned) triples so a reader can see whether the reward was gamed.

Output under ``<tune output>/evaluation/<split>/``: ``leaderboard.{md,json}`` (+ plots),
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
from lira.translation.checks import echo_reason
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


SPLITS = ("validation", "test")
"""The question sets ``--evaluate`` reads (``--split``)."""


def heldout_questions(
    cfg: EvalRun, split: str = "validation"
) -> tuple[XQuADR, list[str], dict[str, list[str]]]:
    """(dataset, question ids, {language: question texts}) of ``split``'s non-English
    languages: the validation ids in the training and dev languages, or the test ids in the
    evaluation languages."""
    if split not in SPLITS:
        raise UserInputError(f"--split {split!r}: choose one of {', '.join(SPLITS)}")
    splits = load_splits(cfg.data)
    if splits.dataset is None:
        raise UserInputError(
            f"tune-translator --evaluate needs parallel retrieval data (data.format: xquad_r); "
            f"the config has data.format={cfg.data.format}"
        )
    if split == "validation":
        ids = splits.dev_ids
        langs = list(dict.fromkeys(r.lang for r in splits.dev_sources))
        if not ids or not langs:
            raise UserInputError(
                "tune-translator --evaluate: the config has no validation split "
                f"(data.dev_fraction={cfg.data.dev_fraction}); set data.dev_fraction > 0 or "
                "use --split test"
            )
    else:
        ids = splits.eval_ids
        langs = [lg for lg in cfg.data.eval_languages if lg != "en"]
        if not langs:
            raise UserInputError(
                "tune-translator --evaluate: data.eval_languages has no non-English language"
            )
    ds = splits.dataset
    return ds, ids, {lg: [ds.question(lg, q).text for q in ids] for lg in langs}


def no_translation_rates(
    store: TranslationStore, questions: dict[str, list[str]], translator: TranslatorConfig
) -> dict[str, float]:
    """Per language (and ``all``): the share of ``translator``'s stored outputs that are no
    translation (:func:`~lira.translation.checks.echo_reason`; a missing output counts)."""
    rates, flagged, total = {}, 0, 0
    for lang, texts in questions.items():
        found = store.candidates(texts, lang, [translator])
        bad = sum(not c or echo_reason(t, c[0].text) is not None for t, c in zip(texts, found))
        rates[lang] = bad / len(texts) if texts else 0.0
        flagged, total = flagged + bad, total + len(texts)
    rates["all"] = flagged / total if total else 0.0
    return rates


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


def _echo_markdown(echoes: dict[str, dict[str, float]], langs: list[str]) -> str:
    """The no-translation rates as a Markdown table (translator x language)."""
    cols = [*langs, "all"]
    lines = ["| no translation (copy, echo, source language or script) | " + " | ".join(cols)
             + " |", "|---|" + "---|" * len(cols)]  # fmt: skip
    for name, rates in echoes.items():
        lines.append(f"| {name} | " + " | ".join(f"{rates[c]:.1%}" for c in cols) + " |")
    return "\n".join(lines) + "\n"


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
        "split": str,
        "missing_translations": dict[str, int],
        "no_translation_rate": dict[str, dict[str, float]],
        "ndcg@10": dict[str, list[float]],
        "paired_delta": dict[str, list[float]],
        "pairs": list[dict[str, str]],
    },
)
"""``summary.json`` of ``lira tune-translator --evaluate`` (values: [mean, CI low, CI high])."""


def run_translator_eval(
    cfg: TranslatorEvalRun, *, pairs: int = 20, split: str = "validation"
) -> TranslatorEvalSummary:
    """Engine of ``lira tune-translator --evaluate``: h on base vs tuned translations of
    ``split``'s questions (``pairs``: random (source, base, tuned) triples shown)."""
    if pairs < 0:
        raise UserInputError(f"--pairs {pairs} is negative; give 0 or more triples to show")
    base, tuned = base_translator(cfg), tuned_translator(cfg)
    if not Path(tuned.model).is_dir():
        raise UserInputError(
            f"no tuned translator at {tuned.model}: run `lira tune-translator CONFIG` first "
            "(same tune_translator.output / name)"
        )
    ds, qids, questions = heldout_questions(cfg, split)
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
    log.info("translating %d %s questions with %s and %s (cached ones are reused)", n, split,
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
        echoes = {t.name: no_translation_rates(store, questions, t) for t in (base, tuned)}
    out = output_folder(cfg) / "evaluation" / split
    trained = set(cfg.data.train_languages)
    title = (
        f"{tuned.name} vs {base.name}: h on each translator's output, {split} questions "
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
        "split": split,
        "missing_translations": missing,
        "no_translation_rate": echoes,
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
    print(_echo_markdown(echoes, list(questions)))
    print(f"wrote {files['md']}, {out / 'pairs.md'} and {out / 'summary.json'}")
    return summary

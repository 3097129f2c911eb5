"""LANCER: language-concept erasure for language-invariant dense retrieval (paper 002).

    L = L_R + λ·L_C                                                        (§3, final eq.)
    L_C = 1/(n k) Σ_i Σ_j |corr(X_i, Z_j)|,   corr = Σ_XZ / (σ_X σ_Z)          (§3)

X [N, k] are the embeddings of a multilingual, language-labelled batch and Z [N, n] the one-hot
language labels. L_R is the English retrieval InfoNCE (:func:`lira.baselines.infonce.info_nce`)
on a separate English batch. Statistics are computed in fp32 with population (1/N) moments;
eps is added *after* the square root of each variance, so a constant column (a language absent
from the batch, a single-language batch, a constant embedding dimension) has correlation
exactly 0 and no NaN gradient.
Columns of absent languages stay in the 1/(nk) mean, as the paper's formula writes it; the
stratified batching below always fills every language.

Batching (paper §4.1: 64 retrieval examples + 16 texts per language per step): each step draws
one English retrieval batch and one multilingual batch with the same number of texts per
language. The multilingual texts are *non-parallel* (mC4 passages in the paper):
:func:`non_parallel_texts` gives every group of parallel texts (an XQuAD-R gold sentence and
its translations) to exactly one language, so no content appears in two languages' pools.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from operator import attrgetter

import torch
import torch.nn.functional as F
from torch import Tensor

from lira.baselines.config import BaselinesRun
from lira.baselines.infonce import info_nce
from lira.baselines.method import (
    BaselineMethod,
    Batch,
    Example,
    HookTrainer,
    batch_examples,
    english_rows,
    passages_with_negatives,
)
from lira.baselines.recipes import LancerConfig
from lira.config import ConfigError
from lira.data.types import Record
from lira.data.xquad_r import XQuADR

log = logging.getLogger(__name__)
by_id = attrgetter("id")


def correlation_penalty(x: Tensor, lang_ids: Tensor, n_langs: int, eps: float = 1e-8) -> Tensor:
    """Mean |Pearson| between embedding dims and one-hot language labels (LANCER L_C).

    x [N, k] embeddings, lang_ids [N] integer language index in [0, n_langs); returns a scalar.
    """
    if x.dim() != 2 or lang_ids.shape != (x.shape[0],):
        raise ValueError(
            f"x must be [N, k] and lang_ids [N]; got {tuple(x.shape)}, {tuple(lang_ids.shape)}"
        )
    if n_langs < 1 or int(lang_ids.min()) < 0 or int(lang_ids.max()) >= n_langs:
        raise ValueError(f"lang_ids must lie in [0, {n_langs}); got {lang_ids.tolist()}")
    xf = x.float()
    z = F.one_hot(lang_ids.long(), n_langs).float()  # [N, n]
    xc = xf - xf.mean(0, keepdim=True)  # [N, k]
    zc = z - z.mean(0, keepdim=True)  # [N, n]
    cov = xc.T @ zc / x.shape[0]  # [k, n]
    # clamp below at 1e-30 before the sqrt: a zero-variance column then has a zero gradient
    # (not sqrt'(0) = inf -> NaN), and its covariance is exactly 0, so its corr is 0
    sx = xc.pow(2).mean(0).clamp_min(1e-30).sqrt() + eps  # [k]
    sz = zc.pow(2).mean(0).clamp_min(1e-30).sqrt() + eps  # [n]
    corr = cov / (sx.view(-1, 1) * sz.view(1, -1))  # [k, n]
    return corr.abs().mean()


def stratified_language_batch(
    texts: dict[str, Sequence[str]], per_lang: int, rng: random.Random
) -> tuple[list[str], list[int]]:
    """One multilingual batch with ``per_lang`` texts of every language (sorted language order).

    Returns (texts, lang_ids) where lang_ids index ``sorted(texts)``; sampling is without
    replacement inside a language when it has enough texts, with replacement otherwise.
    """
    if per_lang < 1:
        raise ValueError(f"per_lang must be >= 1, got {per_lang}")
    out_texts: list[str] = []
    out_ids: list[int] = []
    for j, lang in enumerate(sorted(texts)):
        pool = list(texts[lang])
        if not pool:
            raise ValueError(f"language '{lang}' has no texts for the LANCER batch")
        pick = (
            rng.sample(pool, per_lang) if len(pool) >= per_lang else rng.choices(pool, k=per_lang)
        )
        out_texts += pick
        out_ids += [j] * per_lang
    return out_texts, out_ids


def non_parallel_texts(
    records: dict[str, Sequence[Record]], group: Callable[[Record], str], seed: int = 0
) -> dict[str, list[str]]:
    """Per language, the texts of the groups dealt to it: each group goes to one language only.

    ``records[lang]`` are parallel across languages through ``group`` (e.g. the English gold
    sentence an XQuAD-R sentence translates); the groups are shuffled with ``seed`` and dealt
    round-robin over the sorted languages, so the pools are non-parallel and about equal.
    """
    langs = sorted(records)
    groups = sorted({group(r) for lang in langs for r in records[lang]})
    random.Random(seed).shuffle(groups)
    owner = {g: langs[i % len(langs)] for i, g in enumerate(groups)}
    out = {lang: [r.text for r in records[lang] if owner[group(r)] == lang] for lang in langs}
    empty = [lang for lang, texts in out.items() if not texts]
    if empty:
        raise ConfigError(
            "data.max_train_queries",
            f"LANCER's non-parallel batches need texts in every language, but {len(groups)} "
            f"gold sentence group(s) of the training questions cannot be dealt over "
            f"{len(langs)} languages {langs} ({empty} got none); raise data.max_train_queries, "
            "or leave lancer out of --methods / baselines.methods",
        )
    return out


def language_index(langs: Sequence[str]) -> dict[str, int]:
    """The language -> column map used by the LANCER batches (sorted order)."""
    return {lang: i for i, lang in enumerate(sorted(set(langs)))}


def lancer_texts(
    dataset: XQuADR, langs: list[str], examples: Sequence[Example], seed: int
) -> dict[str, list[str]]:
    """Non-parallel passages per language for LANCER's L_C batches (paper 002 §4.1: mC4 text).

    The training questions' gold sentences (``dataset``: XQuAD-R), grouped by the English gold
    sentence (its translations are one group); each group is dealt to one language, so no
    content is in two languages' pools.
    """
    records: dict[str, dict[tuple[str, str], Record]] = {lang: {} for lang in langs}
    for qid in dict.fromkeys(e.qid for e in examples):
        group = dataset.gold_sentence("en", qid).id
        for lang in langs:
            text = dataset.gold_sentence(lang, qid).text
            records[lang].setdefault((group, text), Record(group, text, lang))
    return non_parallel_texts({k: list(v.values()) for k, v in records.items()}, by_id, seed)


class LancerMethod(BaselineMethod):
    """``lancer`` (paper 002): English InfoNCE (q_en -> p_en, one row per question, with CLEAR's
    mined passage negatives where the paper has MS MARCO's triples) + λ·L_C on a multilingual
    batch of ``baselines.lancer.per_language`` non-parallel sentences per language (English +
    training languages): the training questions' gold sentences, each parallel group dealt to
    one language (:func:`lancer_texts`)."""

    name = "lancer"
    config_class = LancerConfig
    negatives = ("clear",)

    def prepare(
        self,
        cfg: BaselinesRun,
        examples: Sequence[Example],
        corpus: Sequence[Record],
        dataset: XQuADR | None,
    ) -> dict[str, object]:
        if dataset is None:
            raise ValueError("lancer needs XQuAD-R sentences for its non-parallel batches")
        langs = sorted({"en", *(e.lang for e in examples)})
        multilingual = lancer_texts(dataset, langs, examples, cfg.baselines.seed)
        log.info("lancer texts per language: %s", {k: len(v) for k, v in multilingual.items()})
        return {"multilingual": multilingual}

    def check(self, trainer: HookTrainer) -> None:
        if not trainer.multilingual:
            raise ValueError("method 'lancer' needs multilingual texts for its L_C batches")

    def rows(self, trainer: HookTrainer) -> list[int]:
        return english_rows(trainer.examples)

    def draw(self, trainer: HookTrainer, batch: Batch, rng: random.Random) -> None:
        texts, lang_ids = stratified_language_batch(
            trainer.multilingual, trainer.cfg.recipe_of("lancer", LancerConfig).per_language, rng
        )
        batch["ml_texts"], batch["ml_ids"] = texts, torch.tensor(lang_ids)

    def loss(self, trainer: HookTrainer, batch: Batch) -> Tensor:
        ex, ids = batch_examples(trainer, batch)
        p_pos, p_hn, p_hn_ids = passages_with_negatives(trainer, ex)
        q_en = trainer.encode([e.q_en for e in ex], "query")
        l_r = info_nce(q_en, p_pos, p_hn, trainer.recipe.tau, ids, p_hn_ids)
        x = trainer.encode(batch["ml_texts"], "document")  # [N, d]: passages, as mC4 in §4.1
        dev = trainer.accelerator.device
        pen = correlation_penalty(x, batch["ml_ids"].to(dev), len(trainer.multilingual))
        return l_r + trainer.cfg.recipe_of("lancer", LancerConfig).weight * pen


METHOD = LancerMethod()

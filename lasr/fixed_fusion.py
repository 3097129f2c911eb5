"""The fixed score fusion of ẑ's blocks chosen on the validation split (``lasr.fusion_init``).

For a query q and a document d every block b of ẑ (:data:`lasr.fusion.BLOCKS`: the English
half, the multilingual half, g's own vector, g on the chosen English text, h on the untranslated
text) gives a cosine
cos_b(q, d). A *fixed* fusion scores Σ_b λ_b cos_b(q, d) with one weight per block and query type
(English, foreign). :func:`per_query_ndcg` scores every λ of ``lasr.fusion_grid``^B on each
validation query; :func:`select_fusion` (``lasr.fusion_rule: cv``, the default) keeps the
grid's best λ only when it beats the plainest candidate (the better of g alone and, with
``lasr.raw_h``, h alone for foreign queries; the best single block for English ones) *out of
fold* (folds by question, leave-one-language-out for
foreign queries) with a paired 95% lower bound above 0, else that candidate: on xquad_minilm
the in-sample pick (90.8 En-En on 83 questions) fell to 88.2 out of fold, below g alone (89.2).
:func:`fitted_table` turns the weights into the head's per-type table: every document weighs
each block 1 and queries λ, so the fused cosine is Σ_b λ_b cos_b / (N_q N_d) with one N_d for
every document of every language, and LiRA at step 0 ranks exactly as the fused scores
(tests/lasr/test_fixed_fusion.py). Training then has to beat that on the validation split to be
kept (``lasr.select_on_validation``), by the same paired rule (:func:`step_refusal`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from lasr.fusion import BLOCKS, LaSRNet, paper_weights
from lira.accelerator import live_world
from lira.data.xquad_r import plain_qid
from lira.metrics import ndcg_dense


@dataclass
class FusionFit:
    """The validation-best fixed fusion of one query type."""

    weights: tuple[float, ...]
    """λ per block (:data:`lasr.fusion.BLOCKS` order)."""
    score: float
    """Mean nDCG@k over the group's languages with those weights."""
    by_lang: dict[str, float] = field(default_factory=dict)
    """nDCG@k per language with those weights."""
    parts: dict[str, float] = field(default_factory=dict)
    """The same criterion for each block alone (what the fusion has to beat)."""
    rule: str = "in_sample"
    """How ``weights`` were chosen: ``cv`` (:func:`select_fusion`) or ``in_sample``."""
    fitted: tuple[float, ...] = ()
    """The grid's in-sample best λ (= ``weights`` unless the rule kept the single block)."""
    fitted_score: float | None = None
    """The in-sample score of ``fitted``."""
    single: str = ""
    """The rule's plainest candidate (:data:`lasr.fusion.BLOCKS` name): the best of the fallback
    blocks, or the best single block."""
    oof: float | None = None
    """Out of fold: the mean score of the grid's best λ picked on the other folds."""
    oof_single: float | None = None
    """Out of fold: the mean score of the plainest candidate picked on the other folds."""
    gain: tuple[float, float, float] | None = None
    """``oof − oof_single``: (mean, 95% low, 95% high) over questions."""


@torch.no_grad()
def block_cosines(net: LaSRNet, q: Sequence[Tensor], d: Sequence[Tensor]) -> Tensor:
    """cos_b [5, Q, D] of query streams ``q`` and document streams ``d`` (LaSRNet arguments:
    e_en, g_bins, feats, e_raw, g_tr) per block of ẑ (0 for an off block)."""
    was = net.training
    net.eval()
    dev = next(net.parameters()).device
    qb = net.blocks(*(t.to(dev) for t in q))
    db = net.blocks(*(t.to(dev) for t in d))
    net.train(was)
    return torch.stack([a.float() @ b.float().T for a, b in zip(qb, db)]).cpu()


def fused_ndcg(
    cos: Tensor, labels: Tensor, lam: Sequence[float], k: int = 10, mask: Tensor | None = None
) -> Tensor:
    """nDCG@k per query [Q] of the fused scores Σ_b λ_b cos_b [Q, D] against ``labels`` [Q, D]
    (> 0 = relevant); ``mask`` [Q, D] (bool) marks documents a query may not rank."""
    s = torch.einsum("b,bqd->qd", torch.tensor(lam, dtype=cos.dtype), cos)
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    return ndcg_dense(s, labels, k)


def weight_grid(
    grid: Sequence[float], allowed: Sequence[bool] = (True,) * len(BLOCKS)
) -> list[tuple[float, ...]]:
    """Every λ ∈ grid^B (B = len(``allowed``)) with at least one weight > 0 (blocks not
    ``allowed`` stay 0), in grid order."""
    options = [list(grid) if ok else [0.0] for ok in allowed]
    combos = [tuple(float(w) for w in lam) for lam in itertools.product(*options)]
    combos = [lam for lam in combos if any(w > 0 for w in lam)]
    if not combos:
        raise ValueError("weight_grid: every weight combination is zero; check lasr.fusion_grid")
    return combos


def per_query_ndcg(
    cos: Tensor,
    labels: Tensor,
    combos: Sequence[Sequence[float]],
    k: int = 10,
    candidates: Tensor | None = None,
    across_processes: bool = False,
) -> Tensor:
    """nDCG@k [C, Q] of each query under each fusion λ of ``combos`` (cos [B, Q, D], labels
    [Q, D]; ``candidates`` [Q, D] bool restricts each query's documents). λ and c·λ (c > 0)
    rank alike, so each direction λ / max λ is scored once (of an 8-value grid of powers of 2 and
    0, the 4,095 combinations over 4 blocks are 1,695 directions, the 32,767 over 5 blocks
    15,961). ``across_processes``: every process of a launch
    calls it with the same inputs; each scores its share of the directions and the rows are
    gathered (the same matrix everywhere)."""
    mask = None if candidates is None else ~candidates.bool()
    world, rank = live_world() if across_processes else (1, 0)
    direction = [tuple(round(w / max(lam), 9) for w in lam) for lam in combos]
    unique = list(dict.fromkeys(direction))
    scored = [
        (i, fused_ndcg(cos, labels, lam, k, mask))
        for i, lam in enumerate(unique)
        if i % world == rank
    ]
    if world > 1:
        from accelerate.utils import gather_object

        scored = sorted(gather_object(scored), key=lambda r: r[0])  # grid order
    rows = torch.stack([row for _, row in scored])
    index = {lam: i for i, lam in enumerate(unique)}
    return rows[torch.tensor([index[d] for d in direction])]


def _single_blocks(combos: Sequence[Sequence[float]]) -> dict[int, str]:
    """{index in ``combos``: block name} of the first combination that uses one block alone, in
    :data:`lasr.fusion.BLOCKS` order (of two blocks that tie, e.g. g and g on the translation,
    or the English half and h on the untranslated text, for English queries, the earlier is the
    one picked)."""
    out: dict[int, str] = {}
    for i, lam in enumerate(combos):
        on = [b for b, w in enumerate(lam) if w > 0]
        if len(on) == 1 and BLOCKS[on[0]] not in out.values():
            out[i] = BLOCKS[on[0]]
    return dict(sorted(out.items(), key=lambda kv: BLOCKS.index(kv[1])))


def question_folds(questions: Sequence[str], folds: int, seed: int = 0) -> list[int]:
    """A fold in [0, folds) per query, by question: every query of one question (in any
    language) shares a fold; questions are shuffled with ``seed`` and dealt round-robin."""
    unique = sorted(set(questions))
    order = torch.randperm(len(unique), generator=torch.Generator().manual_seed(seed)).tolist()
    fold_of = {unique[j]: n % folds for n, j in enumerate(order)}
    return [fold_of[q] for q in questions]


def cv_cells(
    questions: Sequence[str], langs: Sequence[str], folds: int, seed: int = 0
) -> list[tuple[Tensor, Tensor]]:
    """The out-of-fold cells of per-query scores, as (held-out mask, fit-on mask) [Q] pairs:
    folds by question (:func:`question_folds`) and, with two or more languages, one language's
    queries of one fold held out and fitted on the other languages' queries of the other
    folds; cells with nothing to hold out or fit on are left out."""
    fold = torch.tensor(question_folds(questions, folds, seed))
    names = list(dict.fromkeys(langs))
    lang = torch.tensor([names.index(x) for x in langs])
    cells = []
    for f in range(folds):
        for j in range(len(names)) if len(names) > 1 else [None]:
            cell = (fold == f) if j is None else (fold == f) & (lang == j)
            fit_on = (fold != f) if j is None else (fold != f) & (lang != j)
            if cell.any() and fit_on.any():
                cells.append((cell, fit_on))
    return cells


def question_gain_ci(
    questions: Sequence[str], gains: Sequence[float]
) -> tuple[float, float, float]:
    """(mean, 95% low, 95% high) of paired per-query ``gains``: each question's gain averaged
    over its queries (languages), then a t interval over questions (scipy); (0, 0, 0) without
    gains, the mean three times when the gains do not vary."""
    import numpy as np
    from scipy import stats

    per_question: dict[str, list[float]] = {}
    for q, g in zip(questions, gains):
        per_question.setdefault(q, []).append(float(g))
    arr = np.array([np.mean(v) for v in per_question.values()])
    if not len(arr):
        return 0.0, 0.0, 0.0
    mean = float(arr.mean())
    if len(arr) < 2 or arr.std() == 0:
        return mean, mean, mean
    ci = stats.ttest_1samp(arr, 0.0).confidence_interval(0.95)
    return mean, float(ci.low), float(ci.high)


def step_refusal(
    result: Mapping[str, Any],
    per_query: Mapping[str, float],
    english_floor: float | None,
    best: Mapping[str, Any],
    best_per_query: Mapping[str, float],
) -> str | None:
    """Why LaSR's validation selection does not keep a step whose retrieval ``result`` (macro
    and per-language nDCG@k; ``per_query``: each query's) is measured against ``best`` (the
    kept step's ``step`` and ``score``, empty before the first; ``best_per_query``: its
    queries'); None: keep it. Refused: English queries below the backbone's
    ``english_floor``, a macro score not above the best's, or a per-question gain over the best
    whose paired 95% lower bound is not above 0 (a gain on the questions that choose it must
    hold beyond them, as :func:`select_fusion`'s)."""
    en = result["by_lang"].get("en")
    if english_floor is not None and en is not None and en < english_floor - 1e-6:
        return f"validation En-En {en:.4f} below the backbone's {english_floor:.4f}"
    if not best:
        return None
    if result["macro"] <= best["score"]:
        return f"validation macro nDCG {result['macro']:.4f} not above step {best['step']}'s"
    if best_per_query and per_query:
        keys = [q for q in per_query if q in best_per_query]
        gains = [per_query[q] - best_per_query[q] for q in keys]
        mean, lo, hi = question_gain_ci([plain_qid(q) for q in keys], gains)
        if lo <= 0:
            return (
                f"validation gain {mean:.4f} [{lo:.4f}, {hi:.4f}] over step {best['step']} "
                "(paired 95% over questions) does not exclude 0"
            )
    return None


def select_fusion(
    scores: Tensor,
    combos: Sequence[Sequence[float]],
    questions: Sequence[str],
    langs: Sequence[str],
    folds: int = 5,
    rule: str = "cv",
    seed: int = 0,
    fallback: Sequence[str] = (),
) -> FusionFit:
    """The fusion λ of one query type from per-query validation scores ``scores`` [C, Q] (one
    row per λ of ``combos``; e.g. :func:`per_query_ndcg`), chosen so that it holds out of
    sample.

    ``rule="cv"``: the candidates are every λ and the plainest one: the best of the ``fallback``
    blocks of :data:`lasr.fusion.BLOCKS` alone that the grid has (g and h for foreign queries,
    the encoders a user would use instead) or, without one, the best single block. Out of fold
    (:func:`cv_cells`: folds by question, leave-one-language-out as well) the grid's best λ and
    the plainest candidate (the best of them, with several) are each picked on the fitting
    queries and scored on the held-out cell. The fitted λ (refitted
    on every query) is kept only when its out-of-fold gain over the plainest candidate has a
    paired 95% lower bound above 0 (a t interval over questions, each question's gain averaged
    over its languages); otherwise that candidate chosen on every query. ``rule="in_sample"``:
    the grid's best λ on every query (each query weighs the same). Both report the out-of-fold
    figures (``oof``, ``oof_single``, ``gain``) beside the in-sample ``score``."""
    singles = _single_blocks(combos)
    if not singles:
        raise ValueError("select_fusion: the grid has no single-block combination (add 1.0)")
    if isinstance(fallback, str):
        raise TypeError(f"select_fusion: fallback is a tuple of block names, got {fallback!r}")
    plain = [i for i, name in singles.items() if name in fallback] or list(singles)
    lang_ids = {lang: j for j, lang in enumerate(dict.fromkeys(langs))}
    lang = torch.tensor([lang_ids[x] for x in langs])
    single_idx = torch.tensor(plain)
    oof_fit, oof_single = torch.zeros(scores.shape[1]), torch.zeros(scores.shape[1])
    for cell, fit_on in cv_cells(questions, langs, folds, seed):
        mean = scores[:, fit_on].mean(1)
        oof_fit[cell] = scores[int(mean.argmax()), cell]
        oof_single[cell] = scores[int(single_idx[mean[single_idx].argmax()]), cell]
    gain = question_gain_ci(questions, (oof_fit - oof_single).tolist())
    mean_all = scores.mean(1)
    best_fit = int(mean_all.argmax())
    best_single = int(single_idx[mean_all[single_idx].argmax()])
    keep_fit = rule == "in_sample" or gain[1] > 0
    chosen = best_fit if keep_fit else best_single
    return FusionFit(
        tuple(float(w) for w in combos[chosen]),
        float(mean_all[chosen]),
        {x: float(scores[chosen, lang == j].mean()) for x, j in lang_ids.items()},
        {name: float(mean_all[i]) for i, name in singles.items()},
        rule=rule,
        fitted=tuple(float(w) for w in combos[best_fit]),
        fitted_score=float(mean_all[best_fit]),
        single=singles[best_single],
        oof=float(oof_fit.mean()),
        oof_single=float(oof_single.mean()),
        gain=gain,
    )


def fitted_table(foreign: Sequence[float] | None, english: Sequence[float] | None) -> Tensor:
    """The head's block weights [4, 5] (rows :data:`lasr.fusion.TEXT_TYPES`): foreign and
    English queries get their fitted λ (the paper row where a type was not fitted), and every
    document, English or foreign, 1 on every block: one document row keeps documents of every
    language comparable in one index (a query scores each by the same Σ_b λ_b cos_b / (N_q
    N_d), N_d = √(blocks on)). Rows per document type made a mixed-language index rank by
    language (Multi-1 0.00 on the demo, 2026-11-28)."""
    table = paper_weights(1.0, raw_g=True, translated_g=True, raw_h=True)
    table[2:] = 1.0
    if foreign is not None:
        table[0] = torch.tensor(foreign)
    if english is not None:
        table[1] = torch.tensor(english)
    return table

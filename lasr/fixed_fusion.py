"""The best fixed score fusion of ẑ's blocks on the validation split (``lasr.fusion_init``).

For a query q and a document d every block b of ẑ (:data:`lasr.fusion.BLOCKS`: the English
half, the multilingual half, g's own vector) gives a cosine cos_b(q, d). A *fixed* fusion scores
Σ_b λ_b cos_b(q, d) with one weight per block. :func:`fit_fusion` tries every λ of
``lasr.fusion_grid``³ on the validation queries of one type (English, or foreign pooled over
their languages, each language weighted equally) against the English corpus and keeps the best
mean nDCG@k. :func:`fitted_table` turns the weights into the head's per-type table: English
documents weigh every block 1 and queries λ, so the fused cosine is Σ_b λ_b cos_b / (N_q N_d)
with one N_d for every English document, and LiRA at step 0 ranks exactly as the fused scores
(tests/lasr/test_fixed_fusion.py). Foreign documents take the foreign queries' λ (an English
query then scores Σ_b λ_en,b λ_f,b cos_b against them: En→L). Training then has to beat that on
the validation split to be kept (``lasr.select_on_validation``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from lasr.fusion import BLOCKS, LaSRNet, paper_weights
from lira.accelerator import live_world
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


@torch.no_grad()
def block_cosines(net: LaSRNet, q: Sequence[Tensor], d: Sequence[Tensor]) -> Tensor:
    """cos_b [3, Q, D] of query streams ``q`` and document streams ``d`` (LaSRNet arguments:
    e_en, g_bins, feats, e_raw) per block of ẑ (0 for an off stream)."""
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


def fit_fusion(
    cos: Tensor,
    labels: Tensor,
    groups: dict[str, list[int]],
    grid: Sequence[float],
    k: int = 10,
    allowed: Sequence[bool] = (True, True, True),
    candidates: Tensor | None = None,
    across_processes: bool = False,
) -> FusionFit:
    """The λ ∈ grid³ (blocks not ``allowed`` stay 0) maximising the mean over ``groups``
    ({language: query rows}) of the mean nDCG@k of Σ_b λ_b cos_b [Q, D] against ``labels``
    [Q, D] (> 0 = relevant); ``candidates`` [Q, D] (bool) restricts each query's documents.
    ``across_processes``: every process of a launch calls it with the same inputs; each scores
    its share of the grid and the scores are gathered (the same fit everywhere)."""
    if not groups:
        raise ValueError("fit_fusion: no validation query to fit on")
    mask = None if candidates is None else ~candidates.bool()
    rows = {lang: torch.as_tensor(r, dtype=torch.long) for lang, r in groups.items()}

    def evaluate(lam: Sequence[float]) -> tuple[float, dict[str, float]]:
        per_q = fused_ndcg(cos, labels, lam, k, mask)
        by = {lang: float(per_q[r].mean()) for lang, r in rows.items()}
        return sum(by.values()) / len(by), by

    options = [list(grid) if ok else [0.0] for ok in allowed]
    combos = [lam for lam in itertools.product(*options) if any(w > 0 for w in lam)]
    world, rank = live_world() if across_processes else (1, 0)
    scored = [(i, *evaluate(lam)) for i, lam in enumerate(combos) if i % world == rank]
    if world > 1:
        from accelerate.utils import gather_object

        scored = sorted(gather_object(scored))  # grid order, as one process scores it
    best: FusionFit | None = None
    for i, score, by in scored:
        lam = combos[i]
        if best is None or score > best.score + 1e-9:
            best = FusionFit(tuple(float(w) for w in lam), score, by)
    if best is None:
        raise ValueError("fit_fusion: every weight combination is zero; check lasr.fusion_grid")
    for b, name in enumerate(BLOCKS):
        if allowed[b]:
            best.parts[name] = evaluate([1.0 if i == b else 0.0 for i in range(len(BLOCKS))])[0]
    return best


def fitted_table(foreign: Sequence[float] | None, english: Sequence[float] | None) -> Tensor:
    """The head's block weights [4, 3] (rows :data:`lasr.fusion.TEXT_TYPES`): foreign and
    English queries get their fitted λ (the paper row where a type was not fitted), English
    documents 1 on every block, and foreign documents the foreign queries' λ (a foreign text is
    embedded alike as query or document; 1 on every block where it was not fitted)."""
    table = paper_weights(1.0, raw_g=True)
    table[2:] = 1.0
    if foreign is not None:
        table[0] = torch.tensor(foreign)
        table[2] = torch.tensor(foreign)
    if english is not None:
        table[1] = torch.tensor(english)
    return table

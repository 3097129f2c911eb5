"""A batch of sources' candidate translations as padded tensors (the Actor's input, Eq. 6).

Missing critic scores (``Candidate.scores is None``: critic failed or disabled; or non-finite)
are replaced by the neutral mid-scale value 5.5 on all three axes, in features and reward.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from lira.translation.types import NEUTRAL_SCORE, Candidate


def candidate_scores(cand: Candidate) -> tuple[float, float, float]:
    """Critic (s, e, p) of a candidate; the neutral 5.5 when the critic gave none (or NaN)."""
    if cand.scores is None or not all(math.isfinite(float(v)) for v in cand.scores):
        return (NEUTRAL_SCORE,) * 3
    return tuple(float(v) for v in cand.scores)  # type: ignore[return-value]


def pad_candidates(
    candidates: Sequence[Sequence[Candidate]],
) -> tuple[Tensor, Tensor, list[str], Tensor]:
    """Flatten per-source candidate lists into padded tensors.

    Returns scores [B, K, 3], mask [B, K], the N candidate texts in row order, and slot [N]
    (flat index b * K + k of each text).
    """
    k_max = max((len(c) for c in candidates), default=0)
    b = len(candidates)
    scores = torch.full((b, max(k_max, 1), 3), NEUTRAL_SCORE)
    mask = torch.zeros(b, max(k_max, 1), dtype=torch.bool)
    texts: list[str] = []
    slot: list[int] = []
    for i, cands in enumerate(candidates):
        for k, c in enumerate(cands):
            scores[i, k] = torch.tensor(candidate_scores(c))
            mask[i, k] = True
            texts.append(c.text)
            slot.append(i * max(k_max, 1) + k)
    return scores, mask, texts, torch.tensor(slot, dtype=torch.long)

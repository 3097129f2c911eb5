"""English-inclination metrics (paper 003 §3, §5.1): Max@R, Complete@K, Max@R_norm.

Max@R is the 1-based rank at which the last of a query's relevant (parallel) documents is
found (Eq. 1). Complete@K is the share of queries whose every relevant document is in the
top K, in percent. Max@R_norm maps Max@R to 0-100 on a log scale:
100 · (log2|D| − log2 Max@R) / (log2|D| − log2|R|), averaged per query (the paper's formula)
or computed once from the mean Max@R (the form its tables report).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def max_at_r(ranked_ids: Sequence[str], relevant_ids: Sequence[str]) -> int:
    """1-based rank of the last relevant document in ``ranked_ids`` (paper 003 Eq. 1)."""
    relevant = set(relevant_ids)
    if not relevant:
        raise ValueError("max_at_r needs at least one relevant id")
    positions = [i for i, d in enumerate(ranked_ids, start=1) if d in relevant]
    if len(positions) < len(relevant):
        missing = relevant - {ranked_ids[i - 1] for i in positions}
        raise ValueError(f"relevant ids {sorted(missing)[:3]} are not in the ranking")
    return max(positions)


def complete_at_k(max_rs: Sequence[int], k: int) -> float:
    """Complete@K: 100 · share of queries whose Max@R <= k (all relevant docs in the top k)."""
    arr = np.asarray(max_rs)
    return float(100.0 * np.mean(arr <= k)) if arr.size else float("nan")


def max_at_r_norm(max_r: float, pool_size: int, n_relevant: int) -> float:
    """100·(log2|D| − log2 R)/(log2|D| − log2|R|): 100 = all relevant first, 0 = last."""
    if not 0 < n_relevant < pool_size:
        raise ValueError(f"need 0 < n_relevant ({n_relevant}) < pool_size ({pool_size})")
    if max_r < 1:
        raise ValueError(f"Max@R is a 1-based rank, got {max_r}")
    top = math.log2(pool_size)
    return 100.0 * (top - math.log2(max_r)) / (top - math.log2(n_relevant))


def max_at_r_norm_per_query(max_rs: Sequence[int], pool_size: int, n_relevant: int) -> float:
    """The per-query form: mean over queries of Max@R_norm (paper 003 §5.1 formula)."""
    return float(np.mean([max_at_r_norm(r, pool_size, n_relevant) for r in max_rs]))


def max_at_r_norm_from_mean(max_rs: Sequence[int], pool_size: int, n_relevant: int) -> float:
    """The from-mean form: Max@R_norm of the mean Max@R (the values in the paper's tables)."""
    return max_at_r_norm(float(np.mean(max_rs)), pool_size, n_relevant)


def english_gap(english_value: float, target_value: float) -> float:
    """English-query minus target-query score: how much the model favours English queries."""
    return english_value - target_value

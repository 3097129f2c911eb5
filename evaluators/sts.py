"""STS evaluation: Pearson and Spearman correlation of cosine scores with gold scores.

The same numbers as mteb's STS tasks (``cosine_pearson`` / ``cosine_spearman``, x100) on the
same pairs: tests/evaluators/test_mteb.py checks it on a tiny STS22 copy run through mteb.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats


def sts_correlations(pred: Sequence[float], gold: Sequence[float]) -> dict[str, float]:
    """Pearson and Spearman correlation (x100) between predicted and gold similarities."""
    p, g = np.asarray(pred, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if p.shape != g.shape or p.size < 2:
        raise ValueError(
            f"need two equal-length score lists of size >= 2, got {p.shape}, {g.shape}"
        )
    return {
        "pearson": float(100 * stats.pearsonr(p, g).statistic),
        "spearman": float(100 * stats.spearmanr(p, g).statistic),
    }

"""Language agnosticism (LANCER, paper 002): a linear language-ID probe and the L_C penalty.

A language-agnostic embedding space gives a probe accuracy near chance (1 / #languages) and a
small correlation penalty between embedding dimensions and one-hot language labels.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from lira.baselines.lancer import correlation_penalty, language_index


def probe_unfit(langs: Sequence[str], test_size: float = 0.3) -> str:
    """Why the stratified language-ID probe cannot run on rows of ``langs`` ("" when it can)."""
    counts = Counter(langs)
    n, k = len(langs), len(counts)
    if k < 2:
        return f"it needs embeddings of at least two languages, got {sorted(counts)}"
    fewest = min(counts.values())
    if fewest < 2:
        return f"it needs at least 2 rows per language, got {fewest} of {k} languages"
    # scikit-learn's sizes of a float test_size (stratified: each split needs every language)
    n_test, n_train = math.ceil(test_size * n), math.floor((1 - test_size) * n)
    if min(n_test, n_train) < k:
        return (
            f"its {n_train}/{n_test} train/test rows (test_size {test_size}) are fewer than "
            f"the {k} languages"
        )
    return ""


def language_id_accuracy(
    embeddings: np.ndarray, langs: Sequence[str], seed: int = 0, test_size: float = 0.3
) -> float:
    """Held-out accuracy (x100) of a logistic-regression probe predicting the language; a
    ValueError where the rows cannot be split (:func:`probe_unfit`)."""
    labels = np.asarray(langs)
    if why := probe_unfit(list(langs), test_size):
        raise ValueError(f"the language-ID probe cannot run: {why}")
    x_tr, x_te, y_tr, y_te = train_test_split(
        embeddings, labels, test_size=test_size, random_state=seed, stratify=labels
    )
    probe = LogisticRegression(max_iter=2000).fit(x_tr, y_tr)
    return float(100.0 * probe.score(x_te, y_te))


def lancer_penalty(embeddings: np.ndarray, langs: Sequence[str]) -> float:
    """LANCER's L_C (mean |corr| between dimensions and language one-hots) on held-out data."""
    index = language_index(langs)
    ids = torch.tensor([index[lang] for lang in langs])
    x = torch.as_tensor(np.asarray(embeddings), dtype=torch.float32)
    return float(correlation_penalty(x, ids, len(index)))

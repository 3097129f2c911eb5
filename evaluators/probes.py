"""Language agnosticism (LANCER, paper 002): a linear language-ID probe and the L_C penalty.

A language-agnostic embedding space gives a probe accuracy near chance (1 / #languages) and a
small correlation penalty between embedding dimensions and one-hot language labels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedShuffleSplit, train_test_split

from lira.baselines.lancer import correlation_penalty, language_index


def probe_unfit(langs: Sequence[str], test_size: float = 0.3) -> str:
    """Why the stratified language-ID probe cannot run on rows of ``langs`` ("" when it can)."""
    labels = np.asarray(langs)
    if len(set(langs)) < 2:
        return f"it needs embeddings of at least two languages, got {sorted(set(langs))}"
    try:  # scikit-learn's own rule for the stratified split that the probe draws
        splitter = StratifiedShuffleSplit(n_splits=1, test_size=test_size, random_state=0)
        next(splitter.split(np.zeros((len(labels), 1)), labels))
    except ValueError as e:
        return f"its {len(labels)} rows cannot be split (test_size {test_size}): {e}"
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

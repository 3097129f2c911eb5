"""Language agnosticism (LANCER, paper 002): a linear language-ID probe and the L_C penalty.

A language-agnostic embedding space gives a probe accuracy near chance (1 / #languages) and a
small correlation penalty between embedding dimensions and one-hot language labels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from lira.baselines.lancer import correlation_penalty, language_index


def language_id_accuracy(
    embeddings: np.ndarray, langs: Sequence[str], seed: int = 0, test_size: float = 0.3
) -> float:
    """Held-out accuracy (x100) of a logistic-regression probe predicting the language."""
    labels = np.asarray(langs)
    if len(set(labels)) < 2:
        raise ValueError("the language-ID probe needs embeddings of at least two languages")
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

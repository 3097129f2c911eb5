"""A tiny real encoder for evaluator tests: character n-gram TF-IDF, L2-normalised."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from lira.data import demo_path
from lira.data.xquad_r import load_xquad_r


class TfidfEncoder:
    """Fits once on a corpus; ``encode`` follows the evaluators' protocol."""

    def __init__(self, corpus: list[str]) -> None:
        self.vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4)).fit(corpus)
        self.calls = 0

    def encode(self, texts, langs=None, kind="query", batch_size=32):
        self.calls += len(texts)
        x = self.vec.transform(texts).toarray().astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)


@pytest.fixture(scope="session")
def xquad():
    return load_xquad_r(demo_path(), ["en", "de", "es", "zh"])


@pytest.fixture(scope="session")
def tfidf(xquad):
    texts = [r.text for lang in xquad.languages for r in xquad.sentences(lang)]
    texts += [xquad.question(lang, q).text for lang in xquad.languages for q in xquad.question_ids]
    return TfidfEncoder(texts)

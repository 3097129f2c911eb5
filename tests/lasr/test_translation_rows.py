"""The translate-test rows of the leaderboards (lasr.eval_models.translation_encoders): g on the
Actor's pick, the plain ensemble n(g(x)) + n(g(y)), h on one translator's own candidate."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lasr.eval_models import TRANSLATE_TEST, TRANSLATE_TEST_ENSEMBLE, translation_encoders
from lira.translation.types import Candidate

PICK = {"Hund": "dog", "Katze": "cat"}
OWN = {"Hund": [Candidate("a", "hound", (5, 5, 5)), Candidate("b", "dog", (9, 9, 9))]}


class Pool:
    """A LiRA model's translation side: the Actor's pick and the stored candidates per text."""

    def __init__(self) -> None:
        self.picked: list[str] = []

    def english_texts(
        self, texts: Sequence[str], langs: Sequence[str]
    ) -> tuple[list[str], None, None]:
        self.picked += list(texts)
        return [PICK.get(t, t) for t in texts], None, None

    def candidates(self, texts: Sequence[str], langs: Sequence[str]) -> list[list[Candidate]]:
        return [OWN.get(t, []) for t in texts]


class Letters:
    """An encoder: unit vectors of letter counts (a, c, d, g, h, n, o, t, u, K, H)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def encode(
        self, texts: Sequence[str], langs=None, kind: str = "query", batch_size: int = 32
    ) -> np.ndarray:
        self.seen += list(zip(texts, langs))
        z = np.array([[t.count(c) for c in "acdghnotuKH"] for t in texts], dtype=np.float64) + 1e-3
        return z / np.linalg.norm(z, axis=1, keepdims=True)


def test_translate_test_rows_by_hand():
    pool, g, h = Pool(), Letters(), Letters()
    rows = translation_encoders(pool, h, g, ["a", "b"])  # type: ignore[arg-type]
    texts, langs = ["Hund", "Katze", "the cat"], ["de", "de", "en"]
    tt = rows[TRANSLATE_TEST].encode(texts, langs)
    assert np.allclose(tt, g.encode(["dog", "cat", "the cat"], langs))
    # the pick is embedded as English; a text without a translation keeps its language
    assert g.seen[:3] == [("dog", "en"), ("cat", "en"), ("the cat", "en")]
    both = rows[TRANSLATE_TEST_ENSEMBLE].encode(texts, langs)
    want = g.encode(texts, langs) + g.encode(["dog", "cat", "the cat"], langs)
    assert np.allclose(both, want / np.linalg.norm(want, axis=1, keepdims=True), atol=1e-6)
    assert np.allclose(np.linalg.norm(both, axis=1), 1.0)
    assert sorted(pool.picked) == sorted(texts)  # each text through the Actor once for both rows
    # one translator's own candidate, the source where it has none
    assert np.allclose(
        rows["lira: h(a)"].encode(texts, langs), h.encode(["hound", "Katze", "the cat"], langs)
    )
    assert np.allclose(
        rows["lira: h(b)"].encode(texts, langs), h.encode(["dog", "Katze", "the cat"], langs)
    )


def test_without_g_only_the_per_translator_rows():
    rows = translation_encoders(Pool(), Letters(), None, ["a"])  # type: ignore[arg-type]
    assert list(rows) == ["lira: h(a)"]

"""The translate-test rows of the leaderboards (lasr.eval_models.translation_encoders): g on the
Actor's pick, the plain ensembles n(g(x)) + n(g(y)) and n(h(x)) + n(h(y)), h on one translator's
own candidate."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lasr.eval_models import (
    TRANSLATE_TEST,
    TRANSLATE_TEST_ENSEMBLE,
    TRANSLATE_TEST_H_ENSEMBLE,
    translation_encoders,
)
from lira.translation.types import Candidate
from tests.lasr.two_translators import two_translator_model

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


def test_without_g_only_the_rows_with_h():
    rows = translation_encoders(Pool(), Letters(), None, ["a"])  # type: ignore[arg-type]
    assert list(rows) == ["lira: h(a)", TRANSLATE_TEST_H_ENSEMBLE]


DE = ["Wie viele Punkte gab die Verteidigung ab?", "Wer führte das Team an?"]
GOOD = ["How many points did the defense allow?", "Who led the team?"]
POOR = ["The weather is nice today.", "Bananas are yellow."]


def test_h_ensemble_is_the_normalised_sum_of_h_on_source_and_pick(tmp_path, models_config):
    """n(h(x)) + n(h(y*)) with the real backbone on the real Actor's pick among two candidates."""
    lira = two_translator_model(tmp_path, models_config, DE, "de", GOOD, [POOR[0], GOOD[1]])
    h = lira.backbone
    langs = ["de", "de", "en"]
    texts = [*DE, "Who won the game?"]
    picks = lira.english_texts(DE, langs[:2])[0]
    assert all(p in (g, q) for p, g, q in zip(picks, GOOD, POOR))  # a pick among the two
    got = translation_encoders(lira, h, None, ["a", "b"])[TRANSLATE_TEST_H_ENSEMBLE].encode(
        texts, langs
    )  # [3, d]
    src, pick = h.encode(texts, langs), h.encode([*picks, texts[2]], ["en"] * 3)
    want = src + pick
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    assert got.shape == src.shape and np.allclose(got, want, atol=1e-5)
    assert not np.allclose(got[:2], pick[:2], atol=1e-3)  # the source counts …
    assert not np.allclose(got[:2], src[:2], atol=1e-3)  # … and so does the pick
    assert np.allclose(got[2], src[2], atol=1e-5)  # English: h of the text itself

"""compare's "N of N documents untranslated" is said once, plainly, where the config intends it
(issue 40 item 7): XQuAD-R's non-English documents are never translation sources."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np

from evaluators.engine import EmbeddingCache
from lasr.model import LiRAModel
from lira.data.types import Record


class _LiRALike:
    """Encodes like LiRA without a store: its own warning for every call."""

    def encode(self, texts, langs=None, kind="query", batch_size=32):
        note = LiRAModel.untranslated_note(SimpleNamespace(store=None), len(texts), len(texts))
        logging.getLogger("lasr.model").warning("%s", note)
        return np.ones((len(texts), 4), dtype=np.float32)


def _records(n: int, prefix: str) -> list[Record]:
    return [Record(f"{prefix}{i}", f"Satz {prefix}{i}", "de") for i in range(n)]


def test_expected_untranslated_documents_are_said_once(caplog, monkeypatch):
    import lira.logs

    monkeypatch.setattr(lira.logs, "_SAID", set())  # a fresh run
    cache = EmbeddingCache(_LiRALike(), 8, untranslated_documents=True)
    with caplog.at_level(logging.INFO):
        for part in range(3):  # compare encodes documents scenario by scenario
            cache(_records(5, f"d{part}-"), "document")
        cache(_records(2, "q"), "query")
    lira = [r for r in caplog.records if r.name == "lasr.model"]
    assert [r.getMessage()[:12] for r in lira] == ["2 of 2 non-E"]  # the queries' only
    said = [r for r in caplog.records if "as the config intends" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.INFO
    assert "have no stored translation" in lira[0].getMessage()  # the marker the filter uses


def test_without_the_flag_the_warning_stays(caplog):
    cache = EmbeddingCache(_LiRALike(), 8)
    with caplog.at_level(logging.INFO):
        cache(_records(5, "d"), "document")
    assert [r.levelno for r in caplog.records if r.name == "lasr.model"] == [logging.WARNING]

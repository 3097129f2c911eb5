"""STS pairs (sentence1, sentence2, score[, lang1, lang2]) from JSON Lines, CSV or TSV."""

from __future__ import annotations

import math
from pathlib import Path

from lira.data.errors import DataError, Dropper, Unique
from lira.data.io import field_text, read_records, read_table
from lira.data.types import PairData


def load_sts(path: str | Path, lang: str = "en", drop_malformed: bool = False) -> PairData:
    """Read STS pairs; ``lang`` is the default language when a row has no lang1/lang2."""
    path = Path(path)
    drop = Dropper(drop_malformed)
    rows = (
        read_table(path, drop)
        if path.suffix.lower() in (".csv", ".tsv")
        else read_records(path, drop)
    )
    out = PairData([], [], [], [], [], name=path.stem)
    ids = Unique(path, "id")
    for i, rec in rows:
        try:
            s1, s2 = field_text(rec, "sentence1", path, i), field_text(rec, "sentence2", path, i)
            raw = rec.get("score")
            try:
                score = float(raw)
            except (TypeError, ValueError, OverflowError):
                raise DataError(path, i, "score", f"not a number: {raw!r}") from None
            if not math.isfinite(score):
                raise DataError(path, i, "score", f"not a finite number: {raw!r}")
            if rec.get("id") not in (None, ""):
                ids.check(field_text(rec, "id", path, i), i)
        except DataError as e:
            drop(e)
            continue
        out.sentence1.append(s1)
        out.sentence2.append(s2)
        out.scores.append(score)
        out.lang1.append(str(rec.get("lang1") or lang))
        out.lang2.append(str(rec.get("lang2") or lang))
    out.dropped = drop.report(f"STS {path}")
    return out

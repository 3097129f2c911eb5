"""LazRetrieval (LiRA paper App. B): query.json, item.json, pairs_info.json per split.

Fields: query {ID, nation, text}; item {item_id, nation, text}; pairs {query_id, item_id,
rscore}. Files may be JSON arrays or JSON Lines. ``nation`` codes map to languages.
"""

from __future__ import annotations

from pathlib import Path

from lira.data.errors import DataError, Dropper
from lira.data.io import field_text, read_records
from lira.data.types import Record, RetrievalData

NATIONS = {"BD": "bn", "VN": "vi", "TH": "th", "ID": "id", "MY": "ms", "PK": "ur", "PH": "tl"}


def load_lazretrieval(
    folder: str | Path, nations: dict[str, str] | None = None, drop_malformed: bool = False
) -> RetrievalData:
    """Read one LazRetrieval split folder into RetrievalData (languages from ``nation``)."""
    folder = Path(folder)
    mapping = {**NATIONS, **(nations or {})}
    drop = Dropper(drop_malformed)

    def lang_of(rec: dict, path: Path, i: int) -> str:
        nation = field_text(rec, "nation", path, i)
        if nation not in mapping:
            raise DataError(
                path, i, "nation", f"unknown nation {nation!r}; known {sorted(mapping)}"
            )
        return mapping[nation]

    queries, corpus = [], []
    qf, itf, pf = folder / "query.json", folder / "item.json", folder / "pairs_info.json"
    for i, rec in read_records(qf, drop):
        try:
            queries.append(
                Record(
                    field_text(rec, "ID", qf, i),
                    field_text(rec, "text", qf, i),
                    lang_of(rec, qf, i),
                )
            )
        except DataError as e:
            drop(e)
    for i, rec in read_records(itf, drop):
        try:
            corpus.append(
                Record(
                    field_text(rec, "item_id", itf, i),
                    field_text(rec, "text", itf, i),
                    lang_of(rec, itf, i),
                )
            )
        except DataError as e:
            drop(e)
    doc_ids, query_ids = {d.id for d in corpus}, {q.id for q in queries}
    qrels: dict[str, dict[str, int]] = {}
    for i, rec in read_records(pf, drop):
        try:
            qid, did = field_text(rec, "query_id", pf, i), field_text(rec, "item_id", pf, i)
            if qid not in query_ids:
                raise DataError(pf, i, "query_id", f"unknown query id {qid!r}")
            if did not in doc_ids:
                raise DataError(pf, i, "item_id", f"unknown item id {did!r}")
            score = float(rec.get("rscore", 1.0))
        except DataError as e:
            drop(e)
            continue
        except (TypeError, ValueError):
            drop(DataError(pf, i, "rscore", f"not a number: {rec.get('rscore')!r}"))
            continue
        if score > 0:
            qrels.setdefault(qid, {})[did] = max(1, round(score))
    dropped = drop.report(f"LazRetrieval {folder}")
    queries = [q for q in queries if q.id in qrels]
    return RetrievalData(
        queries, corpus, qrels, name=f"lazretrieval {folder.name}", dropped=dropped
    )

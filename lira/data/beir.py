"""BEIR / MTEB retrieval folders: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.

Also reads the same three tables through ``datasets`` when ``path`` is a local dataset folder
saved with ``save_to_disk`` holding ``corpus``/``queries``/``qrels`` (sub)sets.
"""

from __future__ import annotations

from pathlib import Path

from lira.data.errors import DataError, Dropper
from lira.data.io import field_text, read_records, read_table
from lira.data.types import Record, RetrievalData


def _build(
    corpus_rows: list[tuple[int | str, dict]],
    query_rows: list[tuple[int | str, dict]],
    qrel_rows: list[tuple[int | str, dict]],
    files: tuple[Path, Path, Path],
    lang: str,
    drop: Dropper,
) -> RetrievalData:
    corpus, queries, qrels = [], [], {}
    for i, rec in corpus_rows:
        try:
            doc_id = field_text(rec, "_id", files[0], i)
            text = field_text(rec, "text", files[0], i)
        except DataError as e:
            drop(e)
            continue
        title = str(rec.get("title") or "").strip()
        corpus.append(Record(doc_id, f"{title}. {text}" if title else text, lang))
    for i, rec in query_rows:
        try:
            queries.append(
                Record(
                    field_text(rec, "_id", files[1], i), field_text(rec, "text", files[1], i), lang
                )
            )
        except DataError as e:
            drop(e)
    doc_ids = {d.id for d in corpus}
    query_ids = {q.id for q in queries}
    for i, row in qrel_rows:
        try:
            qid = field_text(row, "query-id", files[2], i)
            did = field_text(row, "corpus-id", files[2], i)
            if did not in doc_ids:
                raise DataError(files[2], i, "corpus-id", f"unknown doc id {did!r}")
            if qid not in query_ids:
                raise DataError(files[2], i, "query-id", f"unknown query id {qid!r}")
            score = int(float(row.get("score", 1)))
        except (DataError, ValueError) as e:
            drop(e if isinstance(e, DataError) else DataError(files[2], i, "score", str(e)))
            continue
        if score > 0:
            qrels.setdefault(qid, {})[did] = score
    queries = [q for q in queries if q.id in qrels]
    return RetrievalData(queries, corpus, qrels, name=files[0].parent.name, dropped=drop.count)


def load_beir(
    folder: str | Path, split: str = "test", lang: str = "en", drop_malformed: bool = False
) -> RetrievalData:
    """Read a BEIR folder; queries without a positive judgement in ``split`` are left out."""
    folder = Path(folder)
    files = (folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{split}.tsv")
    drop = Dropper(drop_malformed)
    data = _build(
        list(read_records(files[0], drop)),
        list(read_records(files[1], drop)),
        list(read_table(files[2], drop)),
        files,
        lang,
        drop,
    )
    drop.report(f"BEIR {folder}")
    return data


def load_hf_retrieval(
    path: str | Path, lang: str = "en", drop_malformed: bool = False
) -> RetrievalData:
    """Read a local ``datasets`` folder (``load_from_disk``) with corpus/queries/qrels sets."""
    from datasets import load_from_disk

    path = Path(path)
    parts = {}
    for name in ("corpus", "queries", "qrels"):
        sub = path / name
        if not sub.exists():
            raise FileNotFoundError(f"{path} has no '{name}' dataset (save_to_disk folders)")
        ds = load_from_disk(str(sub))
        parts[name] = [(i, dict(r)) for i, r in enumerate(ds, start=1)]
    for _, row in parts["qrels"]:
        row.setdefault("query-id", row.get("query_id"))
        row.setdefault("corpus-id", row.get("corpus_id"))
    files = (path / "corpus", path / "queries", path / "qrels")
    drop = Dropper(drop_malformed)
    data = _build(parts["corpus"], parts["queries"], parts["qrels"], files, lang, drop)
    drop.report(f"datasets {path}")
    return data

"""BEIR / MTEB retrieval folders: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.

Also reads the same three tables through ``datasets`` when ``path`` is a local dataset folder:
``corpus``/``queries``/``qrels`` saved with ``save_to_disk`` (a DatasetDict or three Dataset
folders), or local JSON / JSON Lines / Parquet files ``corpus.jsonl``, ``queries.jsonl`` and
``qrels.jsonl`` or ``qrels/<split>.jsonl`` (MTEB layout; ``query-id``/``query_id`` accepted).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from lira.data.errors import DataError, Dropper, Unique
from lira.data.io import field_text, read_records, read_table
from lira.data.types import Record, RetrievalData
from lira.errors import MissingFileError


def _id_text(
    rows: list[tuple[int | str, dict]], path: Path, drop: Dropper
) -> Iterator[tuple[dict, str, str]]:
    """(record, ``_id``, ``text``) of each well-formed record of ``path`` with a new id; the
    others go to ``drop``."""
    seen = Unique(path, "_id")
    for i, rec in rows:
        try:
            rid = field_text(rec, "_id", path, i)
            text = field_text(rec, "text", path, i)
            seen.check(rid, i)
        except DataError as e:
            drop(e)
            continue
        yield rec, rid, text


def _build(
    corpus_rows: list[tuple[int | str, dict]],
    query_rows: list[tuple[int | str, dict]],
    qrel_rows: list[tuple[int | str, dict]],
    files: tuple[Path, Path, Path],
    lang: str,
    drop: Dropper,
) -> RetrievalData:
    corpus, qrels = [], {}
    for rec, doc_id, text in _id_text(corpus_rows, files[0], drop):
        title = str(rec.get("title") or "").strip()
        corpus.append(Record(doc_id, f"{title}. {text}" if title else text, lang))
    queries = [Record(qid, text, lang) for _, qid, text in _id_text(query_rows, files[1], drop)]
    doc_ids = {d.id for d in corpus}
    query_ids = {q.id for q in queries}
    seen_pairs: dict[tuple[str, str], tuple[int, int | str]] = {}
    for i, row in qrel_rows:
        try:
            qid = field_text(row, "query-id", files[2], i)
            did = field_text(row, "corpus-id", files[2], i)
            if did not in doc_ids:
                raise DataError(files[2], i, "corpus-id", f"unknown doc id {did!r}")
            if qid not in query_ids:
                raise DataError(files[2], i, "query-id", f"unknown query id {qid!r}")
            raw = row.get("score")
            try:
                score = 1 if raw is None or raw == "" else int(float(raw))
            except (ValueError, TypeError, OverflowError):
                raise DataError(files[2], i, "score", f"not a number: {raw!r}") from None
            old = seen_pairs.setdefault((qid, did), (score, i))
            if old[0] != score:
                raise DataError(
                    files[2], i, "score",
                    f"({qid!r}, {did!r}) was judged {old[0]} at record {old[1]}, now {score}",
                )  # fmt: skip
        except DataError as e:
            drop(e)
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


_SUFFIXES = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


def _hf_table(path: Path, name: str, split: str) -> tuple[Path, list[tuple[int, dict]]]:
    """One of corpus/queries/qrels through ``datasets``: a save_to_disk folder or local files."""
    from datasets import load_dataset, load_from_disk

    sub = path / name
    if (sub / "dataset_info.json").exists() or (sub / "state.json").exists():
        return sub, [(i, dict(r)) for i, r in enumerate(load_from_disk(str(sub)), start=1)]
    candidates = [path / f"{name}{s}" for s in _SUFFIXES] + [sub / f"{split}{s}" for s in _SUFFIXES]
    for f in candidates:
        if f.is_file():
            ds = load_dataset(_SUFFIXES[f.suffix], data_files=str(f), split="train")
            return f, [(i, dict(r)) for i, r in enumerate(ds, start=1)]
    raise MissingFileError(
        f"{path} has no '{name}' dataset: expected a save_to_disk folder {sub} or one of "
        f"{[str(c) for c in candidates]}"
    )


def load_hf_retrieval(
    path: str | Path, lang: str = "en", drop_malformed: bool = False, split: str = "test"
) -> RetrievalData:
    """Read a local ``datasets`` dataset (save_to_disk folders or json/parquet files)."""
    path = Path(path)
    parts, paths = {}, []
    for name in ("corpus", "queries", "qrels"):
        where, rows = _hf_table(path, name, split)
        parts[name] = rows
        paths.append(where)
    for _, row in parts["qrels"]:
        row.setdefault("query-id", row.get("query_id"))
        row.setdefault("corpus-id", row.get("corpus_id"))
    for _, row in parts["corpus"] + parts["queries"]:
        if "_id" not in row and "id" in row:
            row["_id"] = row["id"]
    files = (paths[0], paths[1], paths[2])
    drop = Dropper(drop_malformed)
    data = _build(parts["corpus"], parts["queries"], parts["qrels"], files, lang, drop)
    drop.report(f"datasets {path}")
    return data

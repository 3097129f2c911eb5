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
from lira.data.io import data_folder, field_text, read_records, read_table
from lira.data.types import Record, RetrievalData
from lira.errors import MissingFileError
from lira.languages import language_problem


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


LANG_FIELDS = ("lang", "language")
"""Record fields that give a text's own language (ISO 639-1); they win over the side's."""

QREL_SPLITS = ("train", "dev", "test")
"""The qrels files of a BEIR folder (``qrels/<split>.tsv``) that are used as given."""


def _lang(rec: dict, default: str, path: Path, i: int | str, side: str) -> str:
    """The record's ``lang``/``language`` field (an ISO 639-1 code, else a DataError), else
    ``default`` (the language ``data.<side>`` gives the file)."""
    for name in LANG_FIELDS:
        if rec.get(name) not in (None, ""):
            code = field_text(rec, name, path, i).strip().lower()
            why = language_problem(code)
            if why is not None:
                fix = (
                    "give the text's ISO 639-1 code, or remove the field (the record is then "
                    f"in data.{side}); or set data.drop_malformed: true"
                )
                raise DataError(path, i, name, why, fix)
            return code
    return default


def _records(
    rows: list[tuple[int | str, dict]], path: Path, lang: str, drop: Dropper, side: str
) -> list[Record]:
    """The records of one file, each in its own language (its record's field, else ``lang``,
    from ``data.<side>``); a corpus record's title goes before its text."""
    out = []
    for rec, rid, text in _id_text(rows, path, drop):
        title = str(rec.get("title") or "").strip() if side == "corpus_language" else ""
        try:
            rec_lang = _lang(rec, lang, path, rid, side)
        except DataError as e:
            drop(e)
            continue
        out.append(Record(rid, f"{title}. {text}" if title else text, rec_lang))
    return out


def _texts(
    corpus_rows: list[tuple[int | str, dict]],
    query_rows: list[tuple[int | str, dict]],
    files: tuple[Path, Path],
    langs: tuple[str, str],
    drop: Dropper,
) -> tuple[list[Record], list[Record]]:
    """(corpus, queries) with each text's language: its record's field, else the side's; a
    corpus with no document is a DataError naming its file (not an unknown id in the qrels)."""
    corpus = _records(corpus_rows, files[0], langs[1], drop, "corpus_language")
    if not corpus:
        why = "no document (the file is empty, or every record was dropped)"
        fix = "point data.path to a BEIR folder whose corpus holds the documents"
        raise DataError(files[0], None, "", why, fix)
    return corpus, _records(query_rows, files[1], langs[0], drop, "query_language")


def _judged(
    corpus: list[Record],
    queries: list[Record],
    qrel_rows: list[tuple[int | str, dict]],
    qrels_file: Path,
    name: str,
    drop: Dropper,
) -> RetrievalData:
    """The queries judged (relevance > 0) in one qrels table, with the whole corpus."""
    qrels: dict[str, dict[str, int]] = {}
    doc_ids = {d.id for d in corpus}
    query_ids = {q.id for q in queries}
    seen_pairs: dict[tuple[str, str], tuple[int, int | str]] = {}
    for i, row in qrel_rows:
        try:
            qid = field_text(row, "query-id", qrels_file, i)
            did = field_text(row, "corpus-id", qrels_file, i)
            if did not in doc_ids:
                raise DataError(qrels_file, i, "corpus-id", f"unknown doc id {did!r}")
            if qid not in query_ids:
                raise DataError(qrels_file, i, "query-id", f"unknown query id {qid!r}")
            raw = row.get("score")
            try:
                score = 1 if raw is None or raw == "" else int(float(raw))
            except (ValueError, TypeError, OverflowError):
                raise DataError(qrels_file, i, "score", f"not a number: {raw!r}") from None
            old = seen_pairs.setdefault((qid, did), (score, i))
            if old[0] != score:
                raise DataError(
                    qrels_file,
                    i,
                    "score",
                    f"({qid!r}, {did!r}) was judged {old[0]} at record {old[1]}, now {score}",
                )
        except DataError as e:
            drop(e)
            continue
        if score > 0:
            qrels.setdefault(qid, {})[did] = score
    judged = [q for q in queries if q.id in qrels]
    return RetrievalData(judged, corpus, qrels, name=name, dropped=drop.count)


def _build(
    corpus_rows: list[tuple[int | str, dict]],
    query_rows: list[tuple[int | str, dict]],
    qrel_rows: list[tuple[int | str, dict]],
    files: tuple[Path, Path, Path],
    langs: tuple[str, str],
    drop: Dropper,
) -> RetrievalData:
    corpus, queries = _texts(corpus_rows, query_rows, (files[0], files[1]), langs, drop)
    return _judged(corpus, queries, qrel_rows, files[2], files[0].parent.name, drop)


def beir_qrel_splits(folder: str | Path) -> list[str]:
    """The qrels splits a BEIR folder ships (``qrels/train.tsv``, ``dev.tsv``, ``test.tsv``)."""
    return [s for s in QREL_SPLITS if (Path(folder) / "qrels" / f"{s}.tsv").is_file()]


def load_beir_splits(
    folder: str | Path,
    query_lang: str = "en",
    corpus_lang: str = "en",
    drop_malformed: bool = False,
) -> dict[str, RetrievalData]:
    """Every qrels split of a BEIR folder, as given ({split: data}; corpus and queries read
    once); a folder without ``qrels/{train,dev,test}.tsv`` is an error naming them."""
    folder = data_folder(folder, "BEIR", "corpus.jsonl, queries.jsonl and qrels/")
    splits = beir_qrel_splits(folder)
    if not splits:
        raise MissingFileError(
            f"BEIR folder {folder} has no qrels: expected one or more of "
            f"{[str(folder / 'qrels' / f'{s}.tsv') for s in QREL_SPLITS]}; check data.path"
        )
    files = (folder / "corpus.jsonl", folder / "queries.jsonl")
    drop = Dropper(drop_malformed)
    corpus, queries = _texts(
        list(read_records(files[0], drop)),
        list(read_records(files[1], drop)),
        files,
        (query_lang, corpus_lang),
        drop,
    )
    out = {}
    for split in splits:
        qrels_file = folder / "qrels" / f"{split}.tsv"
        rows = list(read_table(qrels_file, drop))
        out[split] = _judged(corpus, queries, rows, qrels_file, folder.name, drop)
    drop.report(f"BEIR {folder}")
    return out


def load_beir(
    folder: str | Path,
    split: str = "test",
    lang: str = "en",
    drop_malformed: bool = False,
    corpus_lang: str | None = None,
) -> RetrievalData:
    """Read a BEIR folder; queries without a positive judgement in ``split`` are left out.
    ``lang`` / ``corpus_lang`` (default: ``lang``): the language of queries / documents whose
    record has no ``lang`` or ``language`` field."""
    folder = Path(folder)
    files = (folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{split}.tsv")
    drop = Dropper(drop_malformed)
    data = _build(
        list(read_records(files[0], drop)),
        list(read_records(files[1], drop)),
        list(read_table(files[2], drop)),
        files,
        (lang, lang if corpus_lang is None else corpus_lang),
        drop,
    )
    drop.report(f"BEIR {folder}")
    return data


_SUFFIXES = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


HF_FIX = (
    "fix or regenerate it (JSON Lines: one JSON object per line; Parquet: a complete file; "
    "a folder: save it again with save_to_disk), or set data.format to the folder's real format"
)
"""The fix printed with a local ``datasets`` table that ``datasets`` cannot read."""


def _hf_error(where: Path, e: Exception) -> DataError:
    """A DataError naming ``where`` for an error of ``datasets`` reading it (and its cause)."""
    cause = e.__cause__ or e.__context__
    why = f"{type(e).__name__}: {e}"
    if cause is not None and str(cause):
        why += f" ({type(cause).__name__}: {cause})"
    return DataError(where, None, "<dataset>", f"datasets cannot read it: {why}", HF_FIX)


def _hf_errors() -> tuple[type[BaseException], ...]:
    """The exception types of ``datasets`` / pyarrow reading a damaged local table."""
    from datasets.exceptions import DatasetsError
    from pyarrow import ArrowException

    return (DatasetsError, ArrowException, ValueError, KeyError, TypeError)


def _hf_table(path: Path, name: str, split: str) -> tuple[Path, list[tuple[int, dict]]]:
    """One of corpus/queries/qrels through ``datasets``: a save_to_disk folder or local files;
    one ``datasets`` cannot read is a DataError naming it."""
    from datasets import load_dataset, load_from_disk

    sub = path / name
    if (sub / "dataset_info.json").exists() or (sub / "state.json").exists():
        try:
            return sub, [(i, dict(r)) for i, r in enumerate(load_from_disk(str(sub)), start=1)]
        except _hf_errors() as e:
            raise _hf_error(sub, e) from e
    candidates = [path / f"{name}{s}" for s in _SUFFIXES] + [sub / f"{split}{s}" for s in _SUFFIXES]
    for f in candidates:
        if f.is_file():
            try:
                ds = load_dataset(
                    _SUFFIXES[f.suffix], data_files=str(f), split="train", trust_remote_code=False
                )
                return f, [(i, dict(r)) for i, r in enumerate(ds, start=1)]
            except _hf_errors() as e:
                raise _hf_error(f, e) from e
    raise MissingFileError(
        f"{path} has no '{name}' dataset: expected a save_to_disk folder {sub} or one of "
        f"{[str(c) for c in candidates]}"
    )


def hf_qrel_splits(path: str | Path) -> list[str]:
    """The qrels splits of a local ``datasets`` folder (``qrels/<split>.jsonl|json|parquet``);
    one unsplit qrels table counts as ``test``."""
    sub = Path(path) / "qrels"
    found = [s for s in QREL_SPLITS if any((sub / f"{s}{x}").is_file() for x in _SUFFIXES)]
    return found or ["test"]


def load_hf_retrieval(
    path: str | Path,
    lang: str = "en",
    drop_malformed: bool = False,
    split: str = "test",
    corpus_lang: str | None = None,
) -> RetrievalData:
    """Read a local ``datasets`` dataset (save_to_disk folders or json/parquet files);
    ``lang`` / ``corpus_lang`` (default: ``lang``) as in :func:`load_beir`."""
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
    langs = (lang, lang if corpus_lang is None else corpus_lang)
    data = _build(parts["corpus"], parts["queries"], parts["qrels"], files, langs, drop)
    drop.report(f"datasets {path}")
    return data

"""LazRetrieval (LiRA paper App. B): query.json, item.json, pairs_info.json per split.

Fields: query {ID, nation, text}; item {item_id, nation, text}; pairs {query_id, item_id,
rscore}. Files may be JSON arrays or JSON Lines. ``nation`` codes map to languages.

The release is split 4:1 into train and test, each split with its own three files. Accepted
layouts of ``data.path`` (:func:`split_folders`):

- ``<path>/train/`` and ``<path>/test/``: the released split (every country in one folder);
- ``<path>/<NATION>/train/`` and ``<path>/<NATION>/test/``: the released split, one folder per
  country (merged; an id repeated across countries is an error);
- the three files directly in ``<path>``: no released split (the pipeline then re-splits by
  query id at random and says so).
"""

from __future__ import annotations

import math
from pathlib import Path

from lira.data.errors import DataError, Dropper, Unique
from lira.data.io import field_text, read_records
from lira.data.types import Record, RetrievalData

NATIONS = {"BD": "bn", "VN": "vi", "TH": "th", "ID": "id", "MY": "ms", "PK": "ur", "PH": "tl"}
SPLITS = ("train", "test")
FILES = ("query.json", "item.json", "pairs_info.json")


def split_folders(folder: str | Path) -> dict[str, list[Path]] | None:
    """The released split's folders ``{"train": [...], "test": [...]}``, or None when ``folder``
    holds one unsplit copy (the three files directly). A split present without the other, or a
    country folder with only one split, is a DataError naming what is missing."""
    folder = Path(folder)
    have = {s: (folder / s / FILES[0]).is_file() for s in SPLITS}
    if all(have.values()):
        return {s: [folder / s] for s in SPLITS}
    if any(have.values()):
        missing = next(s for s, ok in have.items() if not ok)
        raise DataError(
            folder / missing,
            None,
            "<split>",
            f"the released split needs both train/ and test/ ({missing}/{FILES[0]} is missing)",
            "copy the whole release, or put the three files directly in data.path to re-split",
        )
    countries = (
        sorted(
            p
            for p in folder.iterdir()
            if p.is_dir() and any((p / s / FILES[0]).is_file() for s in SPLITS)
        )
        if folder.is_dir()
        else []
    )
    for c in countries:
        for s in SPLITS:
            if not (c / s / FILES[0]).is_file():
                raise DataError(
                    c / s,
                    None,
                    "<split>",
                    f"country folder {c.name} has no {s}/{FILES[0]}",
                    "copy that country's train/ and test/ folders",
                )
    return {s: [c / s for c in countries] for s in SPLITS} if countries else None


def load_lazretrieval_split(
    folders: list[Path], nations: dict[str, str] | None = None, drop_malformed: bool = False
) -> RetrievalData:
    """One split read from one folder or several (one per country), merged; ids must stay unique."""
    parts = [load_lazretrieval(f, nations, drop_malformed) for f in folders]
    if len(parts) == 1:
        return parts[0]
    seen: dict[tuple[str, str], Path] = {}
    for f, part in zip(folders, parts):
        for kind, records in (("query", part.queries), ("item", part.corpus)):
            for r in records:
                if (kind, r.id) in seen:
                    raise DataError(
                        f,
                        None,
                        "ID" if kind == "query" else "item_id",
                        f"{kind} id {r.id!r} is also in {seen[(kind, r.id)]}",
                        "ids must be unique across the country folders of a split",
                    )
                seen[(kind, r.id)] = f
    name = f"lazretrieval {folders[0].name}"
    return RetrievalData(
        [q for p in parts for q in p.queries],
        [d for p in parts for d in p.corpus],
        {q: rel for p in parts for q, rel in p.qrels.items()},
        name=name,
        dropped=sum(p.dropped for p in parts),
    )


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

    def records(path: Path, id_field: str) -> list[Record]:
        """The well-formed records of ``path`` with new ids; the others go to ``drop``."""
        seen, out = Unique(path, id_field), []
        for i, rec in read_records(path, drop):
            try:
                r = Record(
                    field_text(rec, id_field, path, i),
                    field_text(rec, "text", path, i),
                    lang_of(rec, path, i),
                )
                seen.check(r.id, i)
            except DataError as e:
                drop(e)
                continue
            out.append(r)
        return out

    qf, itf, pf = folder / "query.json", folder / "item.json", folder / "pairs_info.json"
    queries, corpus = records(qf, "ID"), records(itf, "item_id")
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
            if not math.isfinite(score):
                raise ValueError
        except DataError as e:
            drop(e)
            continue
        except (TypeError, ValueError):
            drop(DataError(pf, i, "rscore", f"not a finite number: {rec.get('rscore')!r}"))
            continue
        if score > 0:
            qrels.setdefault(qid, {})[did] = max(1, round(score))
    dropped = drop.report(f"LazRetrieval {folder}")
    queries = [q for q in queries if q.id in qrels]
    return RetrievalData(
        queries, corpus, qrels, name=f"lazretrieval {folder.name}", dropped=dropped
    )

"""A small cross-lingual BEIR folder written from the shipped XQuAD-R subset (tests only)."""

from __future__ import annotations

import json
from pathlib import Path

from lira.config import DataConfig
from lira.data import demo_path
from lira.data.xquad_r import load_xquad_r


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")


def write_beir_folder(
    folder: Path, n: int = 24, qrels: tuple[str, ...] = ("test",), german_docs: int = 3
) -> dict[str, list[str]]:
    """German queries (every 4th Spanish, said by a ``language`` field) against the English
    gold sentences plus ``german_docs`` German documents (``lang: de``); the query ids are cut
    into ``qrels`` splits in order. Returns {split: query ids}."""
    ds = load_xquad_r(demo_path(), ["en", "de", "es"])
    qids = ds.question_ids[:n]
    queries, corpus, judged = [], {}, []
    for i, q in enumerate(qids):
        lang = "es" if i % 4 == 3 else "de"
        row = {"_id": q, "text": ds.question(lang, q).text}
        if lang == "es":
            row["language"] = "es"
        queries.append(row)
        rel = ds.retrieval("de", ["en"], [q])
        for doc_id in rel.qrels[f"{q}@de"]:
            text = next(d.text for d in rel.corpus if d.id == doc_id)
            corpus[doc_id] = {"_id": doc_id, "title": "", "text": text}
            judged.append((q, doc_id))
    for q in qids[:german_docs]:  # German documents: the German question as a (bad) passage
        corpus[f"de-{q}"] = {"_id": f"de-{q}", "text": ds.question("de", q).text, "lang": "de"}
    folder.mkdir(parents=True, exist_ok=True)
    _jsonl(folder / "corpus.jsonl", list(corpus.values()))
    _jsonl(folder / "queries.jsonl", queries)
    (folder / "qrels").mkdir(exist_ok=True)
    cut = [round(len(qids) * k / len(qrels)) for k in range(len(qrels) + 1)]
    out = {}
    for k, split in enumerate(qrels):
        ids = qids[cut[k] : cut[k + 1]]
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t1" for q, d in judged if q in ids]
        (folder / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", "utf-8")
        out[split] = list(ids)
    return out


def beir_config(folder: Path, **kw: object) -> DataConfig:
    """The data section for :func:`write_beir_folder`'s folder: de/es queries (German by
    default) over an English corpus, training and evaluated in de and es; ``kw`` adds fields."""
    return DataConfig(format="beir", path=str(folder), train_languages=["de", "es"],
                      eval_languages=["de", "es"], query_language="de", corpus_language="en",
                      **kw)  # fmt: skip

"""BEIR, LazRetrieval and STS loaders on real shipped text and on malformed input."""

from __future__ import annotations

import json

import pytest

from lira.config import DataConfig
from lira.data import demo_path
from lira.data.beir import load_beir, load_hf_retrieval
from lira.data.errors import DataError
from lira.data.lazretrieval import load_lazretrieval
from lira.data.sts import load_sts
from lira.data.xquad_r import load_xquad_r
from lira.errors import MissingFileError


@pytest.fixture(scope="module")
def real():
    """A small real retrieval set: German questions -> English sentences of the demo subset."""
    ds = load_xquad_r(demo_path(), ["en", "de"])
    return ds.retrieval("de", ["en"], ds.question_ids[:20])


def _jsonl(path, rows):
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )


def _beir_folder(tmp_path, real):
    _jsonl(
        tmp_path / "corpus.jsonl", [{"_id": d.id, "title": "", "text": d.text} for d in real.corpus]
    )
    _jsonl(tmp_path / "queries.jsonl", [{"_id": q.id, "text": q.text} for q in real.queries])
    (tmp_path / "qrels").mkdir()
    lines = ["query-id\tcorpus-id\tscore"] + [
        f"{q}\t{d}\t1" for q, rel in real.qrels.items() for d in rel
    ]
    (tmp_path / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def test_beir_round_trip_on_real_text(tmp_path, real):
    data = load_beir(_beir_folder(tmp_path, real), lang="de")
    assert [q.text for q in data.queries] == [q.text for q in real.queries]
    assert data.qrels == real.qrels and len(data.corpus) == len(real.corpus)


def test_beir_unknown_doc_id_is_named_or_dropped(tmp_path, real):
    folder = _beir_folder(tmp_path, real)
    with open(folder / "qrels" / "test.tsv", "a", encoding="utf-8") as f:
        f.write(f"{real.queries[0].id}\tnope\t1\n")
    with pytest.raises(
        DataError, match=r"test.tsv: record \d+: field 'corpus-id': unknown doc id 'nope'"
    ):
        load_beir(folder)
    assert load_beir(folder, drop_malformed=True).dropped == 1


def test_beir_empty_text_is_an_error(tmp_path, real):
    folder = _beir_folder(tmp_path, real)
    rows = [json.loads(x) for x in (folder / "corpus.jsonl").read_text().splitlines()]
    rows[3]["text"] = "   "
    _jsonl(folder / "corpus.jsonl", rows)
    with pytest.raises(DataError, match=r"corpus.jsonl: record 4: field 'text': empty"):
        load_beir(folder)


def test_hf_datasets_folder(tmp_path, real):
    from datasets import Dataset

    Dataset.from_list([{"_id": d.id, "text": d.text} for d in real.corpus]).save_to_disk(
        str(tmp_path / "corpus")
    )
    Dataset.from_list([{"_id": q.id, "text": q.text} for q in real.queries]).save_to_disk(
        str(tmp_path / "queries")
    )
    rows = [
        {"query-id": q, "corpus-id": d, "score": 1} for q, rel in real.qrels.items() for d in rel
    ]
    Dataset.from_list(rows).save_to_disk(str(tmp_path / "qrels"))
    data = load_hf_retrieval(tmp_path, lang="de")
    assert data.qrels == real.qrels and {q.lang for q in data.queries} == {"de"}


def _laz(tmp_path, real, pairs=None):
    json.dump([{"ID": q.id, "nation": "VN", "text": q.text} for q in real.queries],
              open(tmp_path / "query.json", "w"), ensure_ascii=False)  # fmt: skip
    _jsonl(
        tmp_path / "item.json",
        [{"item_id": d.id, "nation": "VN", "text": d.text} for d in real.corpus],
    )
    pairs = pairs or [{"nation": "VN", "query_id": q, "item_id": d, "rscore": "1.0"}
                      for q, rel in real.qrels.items() for d in rel]  # fmt: skip
    json.dump(pairs, open(tmp_path / "pairs_info.json", "w"))
    return tmp_path


def test_lazretrieval_arrays_and_jsonl(tmp_path, real):
    data = load_lazretrieval(_laz(tmp_path, real))
    assert data.qrels == real.qrels and {q.lang for q in data.queries} == {"vi"}


def test_lazretrieval_errors(tmp_path, real):
    bad = [{"nation": "VN", "query_id": "missing-q", "item_id": real.corpus[0].id, "rscore": "1"}]
    folder = _laz(tmp_path, real, pairs=bad)
    with pytest.raises(DataError, match=r"pairs_info.json: record 1: field 'query_id'"):
        load_lazretrieval(folder)
    rows = [{"ID": "q", "nation": "XX", "text": "t"}]
    json.dump(rows, open(folder / "query.json", "w"))
    with pytest.raises(
        DataError, match=r"query.json: record 1: field 'nation': unknown nation 'XX'"
    ):
        load_lazretrieval(folder)
    assert load_lazretrieval(folder, nations={"XX": "xx"}, drop_malformed=True).dropped == 1


def test_sts_formats_and_errors(tmp_path):
    f = tmp_path / "sts.tsv"
    f.write_text("sentence1\tsentence2\tscore\nA dog runs.\tA dog is running.\t4.8\n"
                 "A cat.\tThe stock fell.\t0.2\n", encoding="utf-8")  # fmt: skip
    pairs = load_sts(f, lang="en")
    assert pairs.scores == [4.8, 0.2] and pairs.lang1 == ["en", "en"]
    j = tmp_path / "sts.jsonl"
    _jsonl(j, [{"sentence1": "Hallo", "sentence2": "Hello", "score": 5, "lang1": "de"},
               {"sentence1": "x", "sentence2": "y", "score": "high"}])  # fmt: skip
    with pytest.raises(DataError, match=r"sts.jsonl: record 2: field 'score': not a number"):
        load_sts(j)
    p = load_sts(j, drop_malformed=True)
    assert p.dropped == 1 and p.lang1 == ["de"] and p.lang2 == ["en"]


def test_hf_local_json_files(tmp_path, real):
    _jsonl(tmp_path / "corpus.jsonl", [{"_id": d.id, "text": d.text} for d in real.corpus])
    _jsonl(tmp_path / "queries.jsonl", [{"id": q.id, "text": q.text} for q in real.queries])
    (tmp_path / "qrels").mkdir()
    rows = [
        {"query_id": q, "corpus_id": d, "score": 1} for q, rel in real.qrels.items() for d in rel
    ]
    _jsonl(tmp_path / "qrels" / "test.jsonl", rows)
    data = load_hf_retrieval(tmp_path, lang="de")
    assert data.qrels == real.qrels and len(data.corpus) == len(real.corpus)
    _jsonl(tmp_path / "qrels" / "test.jsonl", [*rows, {"query_id": "zz", "corpus_id": "x"}])
    with pytest.raises(DataError, match=r"test.jsonl: record \d+: field 'corpus-id'"):
        load_hf_retrieval(tmp_path, lang="de")
    assert load_hf_retrieval(tmp_path, lang="de", drop_malformed=True).dropped == 1


def test_bad_json_line_names_the_line(tmp_path):
    f = tmp_path / "sts.jsonl"
    f.write_text('{"sentence1": "a", "sentence2": "b", "score": 1}\n{"sentence1": \n',
                 encoding="utf-8")  # fmt: skip
    with pytest.raises(DataError, match=r"sts.jsonl: record 2: field '<json>'"):
        load_sts(f)
    assert load_sts(f, drop_malformed=True).dropped == 1


@pytest.mark.parametrize("fmt", ["xquad_r", "beir"])
def test_data_path_naming_a_file_says_it_is_a_file(tmp_path, fmt):
    """Issue 51 leftover: data.path pointing at a file said the folder "does not exist"."""
    from lira.data.splits import load_splits

    f = tmp_path / "queries.jsonl"
    f.write_text('{"_id": "q", "text": "t"}\n', encoding="utf-8")
    cfg = DataConfig(format=fmt, path=str(f), train_languages=["de"], eval_languages=["de"])
    with pytest.raises(
        MissingFileError, match=rf"folder {f} is a file, not a folder; set data.path"
    ):
        load_splits(cfg)
    cfg = DataConfig(format=fmt, path=str(tmp_path / "nowhere"), train_languages=["de"],
                     eval_languages=["de"])  # fmt: skip
    with pytest.raises(MissingFileError, match=r"nowhere does not exist; set data.path"):
        load_splits(cfg)

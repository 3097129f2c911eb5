"""Malformed data, table-driven: one DataError naming file, record and field (or dropped)."""

from __future__ import annotations

import copy
import json

import pytest

from lira.config import DataConfig
from lira.data.beir import load_beir
from lira.data.errors import DataError
from lira.data.lazretrieval import load_lazretrieval
from lira.data.splits import load_splits
from lira.data.sts import load_sts
from lira.data.xquad_r import load_xquad_r
from lira.errors import LiRAError


def _qa(qid: str, start: int = 0) -> dict:
    return {"id": qid, "question": f"Frage {qid}?", "answers": [{"answer_start": start}]}


def _para(*qids: str) -> dict:
    return {
        "sentences": ["Satz eins.", "Satz zwei."],
        "sentence_breaks": [[0, 9], [11, 20]],
        "qas": [_qa(q) for q in qids],
    }


XQ = {"data": [{"paragraphs": [_para("q1", "q2")]}, {"paragraphs": [_para("q3")]}]}


def _xq(mutate):
    def make(tmp_path):
        data = copy.deepcopy(XQ)
        raw = mutate(data)
        f = tmp_path / "de.json"
        if isinstance(raw, bytes):
            f.write_bytes(raw)
        else:
            f.write_text(json.dumps(data if raw is None else raw), encoding="utf-8")
        return lambda drop: load_xquad_r(tmp_path, ["de"], drop_malformed=drop).dropped

    return make


def _set(path, value):
    """A mutation that sets ``data[path...] = value``."""

    def mutate(d):
        node = d
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value

    return mutate


QA = ["data", 0, "paragraphs", 0, "qas"]

XQUAD_CASES = [
    ("article-not-object", _set(["data", 0], "oops"), r"record article 0: field 'paragraphs'", 1),
    ("paragraphs-not-list", _set(["data", 0, "paragraphs"], {"a": 1}), r"field 'paragraphs'", 1),
    ("paragraph-not-object", _set(["data", 0, "paragraphs", 0], 7), r"field '<paragraph>'", 1),
    ("breaks-not-pairs", _set(["data", 0, "paragraphs", 0, "sentence_breaks"], [[0], "x"]),
     r"paragraph 0: field 'sentence_breaks': expected \[start, end\]", 1),
    ("qas-not-list", _set(QA, "q"), r"field 'qas'", 1),
    ("question-not-object", _set([*QA, 0], ["q1"]), r"question 0: field '<question>'", 1),
    ("id-not-string", _set([*QA, 0, "id"], 12), r"question 0: field 'id': expected a string", 1),
    ("answers-not-list", _set([*QA, 0, "answers"], "A"), r"field 'answers'", 1),
    ("answer-not-object", _set([*QA, 0, "answers"], [5]), r"field 'answers'", 1),
    ("answer-start-string", _set([*QA, 0, "answers", 0, "answer_start"], "abc"),
     r"question 0: field 'answer_start': not an integer", 1),
    # issue 60, item 6: reported as "empty question" and "answer_start outside every sentence"
    ("question-number", _set([*QA, 1, "question"], 42),
     r"question 1: field 'question': expected a string, got 42 \(q2\)", 1),
    ("sentence-null", _set(["data", 0, "paragraphs", 0, "sentences", 0], None),
     r"paragraph 0: field 'sentences\[0\]': expected the sentence's text \(a string\), got null",
     1),
    ("duplicate-id", _set([*QA, 1, "id"], "q1"),
     r"question 1: field 'id': duplicate id 'q1' \(first at record article 0 paragraph 0 "
     r"question 0\)", 1),
]  # fmt: skip

FILE_CASES = [
    ("truncated-json", lambda d: json.dumps(d)[:40].encode(), r"record line 1: field '<json>'"),
    ("top-level-list", lambda d: [d], r"de.json: field 'data'|de.json: expected \{'data'"),
    ("deep-nesting", lambda d: ("[" * 100_000 + "]" * 100_000).encode(), r"unreadable JSON"),
    ("huge-number", lambda d: ('{"data": [' + "9" * 5000 + "]}").encode(), r"unreadable JSON"),
    ("invalid-utf8", lambda d: b'{"data": [\n"\xff"]}', r"record line 2: field '<bytes>'"),
    (
        "lone-surrogate",
        lambda d: json.dumps(d).replace("Frage q2", "Frage \\ud800").encode(),
        r"record <document>: field 'data\[0\].paragraphs\[0\].qas\[1\].question': holds a lone "
        r"surrogate at character 6",
    ),
]


@pytest.mark.parametrize(("name", "mutate", "pattern", "dropped"), XQUAD_CASES,
                         ids=[c[0] for c in XQUAD_CASES])  # fmt: skip
def test_xquad_malformed_record(tmp_path, name, mutate, pattern, dropped):
    load = _xq(mutate)(tmp_path)
    with pytest.raises(DataError, match=r"de.json: .*" + pattern) as e:
        load(False)
    assert "drop_malformed" in str(e.value)  # the fix is named
    assert load(True) == dropped  # dropped and counted instead


@pytest.mark.parametrize(("name", "mutate", "pattern"), FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_xquad_unreadable_file(tmp_path, name, mutate, pattern):
    load = _xq(mutate)(tmp_path)
    for drop in (False, True):  # a whole-file error cannot be dropped
        with pytest.raises(DataError, match=pattern) as e:
            load(drop)
        assert "de.json" in str(e.value) and isinstance(e.value, LiRAError)


# ------------------------------------------------------------------------------ BEIR
def _jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _beir(tmp_path, corpus=None, queries=None, qrels=None, corpus_bytes=None):
    corpus = corpus or [{"_id": f"d{i}", "text": f"doc {i}"} for i in range(4)]
    queries = queries or [{"_id": f"q{i}", "text": f"query {i}"} for i in range(4)]
    qrels = qrels or [f"q{i}\td{i}\t1" for i in range(4)]
    _jsonl(tmp_path / "corpus.jsonl", corpus)
    if corpus_bytes is not None:
        (tmp_path / "corpus.jsonl").write_bytes(corpus_bytes)
    _jsonl(tmp_path / "queries.jsonl", queries)
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n", encoding="utf-8"
    )
    return tmp_path


DOCS = [{"_id": f"d{i}", "text": f"doc {i}"} for i in range(4)]
QUERIES = [{"_id": f"q{i}", "text": f"query {i}"} for i in range(4)]
DOC_LINES = "".join(json.dumps(d) + "\n" for d in DOCS).encode()
BEIR_CASES = [
    ("duplicate-doc-id", {"corpus": [*DOCS, {"_id": "d1", "text": "again"}]},
     r"corpus.jsonl: record 5: field '_id': duplicate id 'd1' \(first at record 2\)"),
    ("duplicate-query-id", {"queries": [*QUERIES, {"_id": "q0", "text": "b"}]},
     r"queries.jsonl: record 5: field '_id': duplicate id 'q0'"),
    ("conflicting-judgements", {"qrels": ["q0\td0\t1", "q0\td0\t0"]},
     r"test.tsv: record 3: field 'score': \('q0', 'd0'\) was judged 1 at record 2, now 0"),
    ("text-is-object", {"corpus": [*DOCS, {"_id": "d9", "text": {"t": 1}}]},
     r"corpus.jsonl: record 5: field 'text': expected a string, got dict"),
    ("invalid-utf8-line", {"corpus_bytes": DOC_LINES + b'{"_id": "d9", "text": "\xff"}\n'},
     r"corpus.jsonl: record 5: field '<bytes>': invalid UTF-8"),
    ("huge-number-line", {"corpus_bytes": DOC_LINES + b'{"_id": ' + b"9" * 5000 + b"}\n"},
     r"corpus.jsonl: record 5: field '<json>': unreadable JSON"),
    ("truncated-line", {"corpus_bytes": DOC_LINES + b'{"_id": "d9", "te'},
     r"corpus.jsonl: record 5: field '<json>'"),
    # issue 60, item 6: accepted, then a fix that said to edit LiRA's source
    ("lang-klingon", {"queries": [*QUERIES, {"_id": "q9", "text": "x", "lang": "klingon"}]},
     r"queries.jsonl: record q9: field 'lang': 'klingon' is not an ISO 639-1 language code.*"
     r"or remove the field \(the record is then in data.query_language\)"),
    ("lone-surrogate", {"corpus_bytes": DOC_LINES + b'{"_id": "d9", "text": "a\\ud800b"}\n'},
     r"corpus.jsonl: record 5: field 'text': holds a lone surrogate at character 1 \(not valid "
     r"Unicode\); remove the \\ud800-\\udfff escape"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "kw", "pattern"), BEIR_CASES, ids=[c[0] for c in BEIR_CASES])
def test_beir_malformed(tmp_path, name, kw, pattern):
    folder = _beir(tmp_path, **kw)
    with pytest.raises(DataError, match=pattern):
        load_beir(folder)
    assert load_beir(folder, drop_malformed=True).dropped == 1


def test_an_empty_beir_corpus_names_its_file_not_the_qrels(tmp_path):
    """Issue 60, item 6: an empty corpus.jsonl was reported as an unknown doc id in the qrels."""
    folder = _beir(tmp_path, corpus_bytes=b"")
    for drop in (False, True):
        with pytest.raises(DataError, match=r"corpus.jsonl: no document \(the file is empty") as e:
            load_beir(folder, drop_malformed=drop)
        assert "qrels" not in str(e.value) and "\n" not in str(e.value)


# ------------------------------------------------------------------------------ LazRetrieval
LAZ_Q = [{"ID": f"q{i}", "nation": "VN", "text": f"q {i}"} for i in range(3)]
LAZ_I = [{"item_id": f"i{i}", "nation": "VN", "text": f"item {i}"} for i in range(3)]


def _laz(tmp_path, queries=None, items=None, pairs=None):
    queries = queries or LAZ_Q
    items = items or LAZ_I
    pairs = pairs or [{"query_id": f"q{i}", "item_id": f"i{i}", "rscore": 1} for i in range(3)]
    for name, rows in (("query", queries), ("item", items), ("pairs_info", pairs)):
        (tmp_path / f"{name}.json").write_text(json.dumps(rows), encoding="utf-8")
    return tmp_path


LAZ_CASES = [
    ("duplicate-query", {"queries": [*LAZ_Q, {"ID": "q0", "nation": "VN", "text": "b"}]},
     r"query.json: record 4: field 'ID': duplicate id 'q0' \(first at record 1\)"),
    ("duplicate-item", {"items": [*LAZ_I, {"item_id": "i0", "nation": "VN", "text": "b"}]},
     r"item.json: record 4: field 'item_id': duplicate id 'i0'"),
    ("nan-score", {"pairs": [{"query_id": "q0", "item_id": "i0", "rscore": "nan"},
                             {"query_id": "q1", "item_id": "i1", "rscore": 1}]},
     r"pairs_info.json: record 1: field 'rscore': not a finite number"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "kw", "pattern"), LAZ_CASES, ids=[c[0] for c in LAZ_CASES])
def test_lazretrieval_malformed(tmp_path, name, kw, pattern):
    folder = _laz(tmp_path, **kw)
    with pytest.raises(DataError, match=pattern):
        load_lazretrieval(folder)
    assert load_lazretrieval(folder, drop_malformed=True).dropped == 1


# ------------------------------------------------------------------------------ STS
GOOD = {"sentence1": "Ein Hund.", "sentence2": "A dog.", "score": 4.5}
STS_CASES = [
    ("nan-score", [GOOD, {**GOOD, "score": float("nan")}], r"record 2: field 'score': not a finite"),
    ("inf-score", [GOOD, {**GOOD, "score": "inf"}], r"record 2: field 'score': not a finite"),
    ("neg-inf-score", [GOOD, {**GOOD, "score": "-Infinity"}], r"record 2: field 'score'"),
    ("duplicate-id", [{**GOOD, "id": "p1"}, {**GOOD, "id": "p1"}],
     r"record 2: field 'id': duplicate id 'p1'"),
    ("sentence-is-list", [GOOD, {**GOOD, "sentence2": ["A", "dog"]}],
     r"record 2: field 'sentence2': expected a string, got list"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "rows", "pattern"), STS_CASES, ids=[c[0] for c in STS_CASES])
def test_sts_malformed(tmp_path, name, rows, pattern):
    f = tmp_path / "sts.jsonl"
    f.write_text("".join(json.dumps(r, allow_nan=True) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DataError, match=r"sts.jsonl: " + pattern):
        load_sts(f)
    assert load_sts(f, drop_malformed=True).dropped == 1


def test_sts_tsv_nan_score(tmp_path):
    f = tmp_path / "sts.tsv"
    f.write_text("sentence1\tsentence2\tscore\na\tb\t1.0\nc\td\tNaN\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"sts.tsv: record 3: field 'score': not a finite"):
        load_sts(f)


# ------------------------------------------------------------------------------ empty data
def _empty_xquad(tmp_path):
    data = {"data": [{"paragraphs": [_para("q1")]}]}
    data["data"][0]["paragraphs"][0]["qas"][0]["question"] = " "
    for lang in ("en", "de"):
        (tmp_path / f"{lang}.json").write_text(json.dumps(data), encoding="utf-8")
    return DataConfig(path=str(tmp_path), train_languages=["de"], eval_languages=["de"],
                      drop_malformed=True)  # fmt: skip


def _single_question(tmp_path):
    for lang in ("en", "de"):
        (tmp_path / f"{lang}.json").write_text(json.dumps({"data": [{"paragraphs": [_para("q1")]}]}),
                                               encoding="utf-8")  # fmt: skip
    return DataConfig(path=str(tmp_path), train_languages=["de"], eval_languages=["de"])


def _empty_beir(tmp_path):
    folder = _beir(tmp_path, qrels=["q0\td0\t0"])  # no positive judgement at all
    return DataConfig(format="beir", path=str(folder), train_languages=["de"],
                      eval_languages=["de"])  # fmt: skip


def _empty_sts(tmp_path):
    f = tmp_path / "sts.jsonl"
    f.write_text(json.dumps({**GOOD, "score": "x"}) + "\n", encoding="utf-8")
    return DataConfig(format="sts", path=str(f), train_languages=["en"], drop_malformed=True)


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (_empty_xquad, r"no question is usable in every language.*2 malformed record"),
        (_single_question, r"only 1 usable item.*lower data.eval_fraction"),
        (_empty_beir, r"no query with a positive judgement.*check the files and data.format"),
        (_empty_sts, r"sts.jsonl: no usable sentence pair \(1 malformed record"),
    ],
    ids=["xquad-all-dropped", "xquad-one-question", "beir-no-positive", "sts-all-dropped"],
)
def test_empty_data_is_an_error(tmp_path, make, pattern):
    cfg = make(tmp_path)
    with pytest.raises(DataError, match=pattern) as e:
        load_splits(cfg)
    assert str(tmp_path) in str(e.value)

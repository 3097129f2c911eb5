"""XQuAD-R loader on the shipped subset: alignment through question ids, gold sentences."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lira.data import demo_path
from lira.data.errors import DataError
from lira.data.xquad_r import load_xquad_r, plain_qid

LANGS = ["en", "de", "es", "ru", "zh"]


@pytest.fixture(scope="module")
def ds():
    return load_xquad_r(demo_path(), LANGS)


def _answers(lang):
    raw = json.loads((demo_path() / f"{lang}.json").read_text(encoding="utf-8"))
    return {
        qa["id"]: qa["answers"][0]["text"]
        for a in raw["data"]
        for p in a["paragraphs"]
        for qa in p["qas"]
    }


def test_shipped_subset_has_licence_and_attribution():
    assert "Attribution-ShareAlike 4.0" in (demo_path() / "LICENSE").read_text()
    assert "XQuAD-R" in (demo_path() / "ATTRIBUTION.md").read_text()


def test_questions_align_by_id_but_sentence_lists_differ(ds):
    assert len(ds.question_ids) == 522 and ds.dropped == 0
    counts = {lang: len(ds.sentences(lang)) for lang in LANGS}
    assert counts["de"] != counts["en"]  # never align sentences by position
    ids = ds.parallel_questions(LANGS).ids
    assert ids == ds.question_ids


@pytest.mark.parametrize("lang", LANGS)
def test_gold_sentence_holds_the_answer(ds, lang):
    answers = _answers(lang)
    hits = [answers[q].strip() in ds.gold_sentence(lang, q).text for q in ds.question_ids]
    assert sum(hits) / len(hits) > 0.97  # a few answers span a sentence boundary


def test_a_hand_checked_question(ds):
    qid = "56beb4343aeaaa14008c925b"  # "How many points did the Panthers defense surrender?"
    assert "308" in ds.gold_sentence("en", qid).text
    assert "308" in ds.gold_sentence("de", qid).text
    assert ds.question("de", qid).text == "Wie viele Punkte gab die Verteidigung der Panthers ab?"


def test_retrieval_qrels_point_at_each_languages_gold(ds):
    _train, held = ds.split(0.25, seed=1)
    data = ds.retrieval("de", ["en", "es"], held)
    assert len(data.queries) == len(held)
    assert {d.lang for d in data.corpus} == {"en", "es"}
    q = data.queries[0]
    rel = data.qrels[q.id]
    assert set(rel) == {ds.gold_sentence("en", plain_qid(q.id)).id,
                        ds.gold_sentence("es", plain_qid(q.id)).id}  # fmt: skip
    assert all(d in {c.id for c in data.corpus} for d in rel)


def test_split_is_deterministic_and_disjoint(ds):
    a = ds.split(0.3, seed=5)
    assert a == ds.split(0.3, seed=5)
    assert a != ds.split(0.3, seed=6)
    train, held = a
    assert not set(train) & set(held) and len(train) + len(held) == 522


def _write(tmp_path, data):
    f = tmp_path / "de.json"
    f.write_text(json.dumps({"data": data}), encoding="utf-8")
    return tmp_path


def _para(question="Wer?", start=0):
    return {
        "context": "Satz eins. Satz zwei.",
        "sentences": ["Satz eins.", "Satz zwei."],
        "sentence_breaks": [[0, 9], [11, 20]],
        "qas": [
            {"id": "q1", "question": question, "answers": [{"answer_start": start, "text": "S"}]}
        ],
    }


def test_malformed_records_name_file_record_and_field(tmp_path):
    folder = _write(tmp_path, [{"paragraphs": [_para(question="  ")]}])
    with pytest.raises(
        DataError, match=r"de.json: record article 0 paragraph 0 question 0: field 'question'"
    ):
        load_xquad_r(folder, ["de"])
    ds = load_xquad_r(folder, ["de"], drop_malformed=True)
    assert ds.dropped == 1 and ds.question_ids == []
    folder = _write(tmp_path, [{"paragraphs": [_para(start=99)]}])
    with pytest.raises(DataError, match="field 'answer_start'"):
        load_xquad_r(folder, ["de"])
    folder = _write(tmp_path, [{"paragraphs": [_para(start=12)]}])
    assert load_xquad_r(folder, ["de"]).gold_sentence("de", "q1").text == "Satz zwei."


def test_invalid_utf8_and_missing_language(tmp_path):
    (tmp_path / "de.json").write_bytes(b'{"data": [\n"\xff"]}')
    with pytest.raises(DataError, match=r"de.json: record line 2: field '<bytes>': invalid UTF-8"):
        load_xquad_r(tmp_path, ["de"])
    with pytest.raises(FileNotFoundError, match=r"no file for \['xx'\]"):
        load_xquad_r(demo_path(), ["xx"])


FULL = (
    Path(__file__).resolve().parents[3] / "shared" / "data" / "xquad-r"
)  # ../shared beside the repo


@pytest.mark.skipif(not (FULL / "de.json").exists(), reason="full XQuAD-R not available")
def test_full_data_sentence_counts_differ_but_ids_align():
    full = load_xquad_r(FULL, ["en", "de"])
    assert len(full.sentences("en")) == 1180 and len(full.sentences("de")) == 1276
    assert len(full.question_ids) == 1190
    qid = "56beb4343aeaaa14008c925b"
    assert "308" in full.gold_sentence("de", qid).text

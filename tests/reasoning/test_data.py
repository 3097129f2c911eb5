"""MGSM / X-CSQA loaders on the shipped demo files and on malformed input."""

from __future__ import annotations

import json

import pytest

from lira.data.errors import DataError
from lira.reasoning.data import demo_reasoning_path, load_mgsm, load_xcsqa


def test_demo_files_are_parallel_across_languages():
    root = demo_reasoning_path()
    answers = {
        lang: [i.answer for i in load_mgsm(root / f"mgsm_{lang}.tsv", lang)]
        for lang in ("en", "de", "es")
    }
    assert answers["en"] == answers["de"] == answers["es"] and len(answers["en"]) >= 5
    keys = {
        lang: [i.answer for i in load_xcsqa(root / f"xcsqa_{lang}.jsonl", lang)]
        for lang in ("en", "de", "es")
    }
    assert keys["en"] == keys["de"] == keys["es"]
    item = load_xcsqa(root / "xcsqa_de.jsonl", "de")[0]
    assert [label for label, _ in item.choices] == list("ABCDE")


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        (b"ok question\t3\nbad question\tmany\n", r"mgsm_xx.tsv: record line 2: field 'answer'.*many"),
        (b"\t3\n", r"line 1: field 'question'"),
        (b"q\t3\nonly a question\n", r"mgsm_xx\.tsv: record line 2: field 'answer'.*TAB"),
        (b"q\tinf\n", r"line 1: field 'answer': not a finite number"),
        (b"q\t3\nq\xff\t4\n", r"mgsm_xx\.tsv: record line 2: field '<bytes>'.*UTF-8"),
    ],
    ids=["answer-not-a-number", "empty-question", "no-tab", "infinite-answer", "bad-utf8"],
)  # fmt: skip
def test_mgsm_errors_name_file_line_field(tmp_path, content, pattern):
    f = tmp_path / "mgsm_xx.tsv"
    f.write_bytes(content)
    with pytest.raises(DataError, match=pattern):
        load_mgsm(f, "xx")


def test_xcsqa_errors_name_file_line_field(tmp_path):
    f = tmp_path / "x.jsonl"
    good = {
        "question": {
            "stem": "s",
            "choices": [{"label": "A", "text": "a"}, {"label": "B", "text": "b"}],
        },
        "answerKey": "A",
    }
    bad = dict(good, answerKey="Z")
    f.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 2: field 'answerKey'"):
        load_xcsqa(f, "xx")
    f.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 1: field '<json>'"):
        load_xcsqa(f, "xx")

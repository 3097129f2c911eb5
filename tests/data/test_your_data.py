"""Your own data (issue 40 item 5): languages per side and per record, qrels splits as given,
a validation split for every retrieval format."""

from __future__ import annotations

import json

import pytest

from lira.config import ConfigError, DataConfig
from lira.data.beir import load_beir_splits
from lira.data.errors import DataError
from lira.data.splits import load_splits
from tests.data.beir_folder import write_beir_folder


def _cfg(path, **kw) -> DataConfig:
    base = {"format": "beir", "path": str(path), "train_languages": ["de", "es"]}
    return DataConfig(**{**base, **kw})


def test_languages_per_side_and_per_record(tmp_path):
    write_beir_folder(tmp_path)
    data = load_beir_splits(tmp_path, query_lang="de", corpus_lang="en")["test"]
    langs = {q.lang for q in data.queries}
    assert langs == {"de", "es"}  # the `language` field wins over the side's
    assert sum(d.lang == "de" for d in data.corpus) == 3
    assert {d.lang for d in data.corpus} == {"en", "de"}

    splits = load_splits(_cfg(tmp_path, query_language="de", corpus_language="en"))
    sources = splits.train_sources + splits.eval_sources + splits.dev_sources
    assert sources and all(s.lang != "en" for s in sources)  # English texts are never translated
    assert sum(s.id.startswith("de-") for s in sources) == 3  # the German documents are
    assert {s.lang for s in sources} == {"de", "es"}


def test_default_languages_are_the_first_training_language(tmp_path):
    write_beir_folder(tmp_path)
    splits = load_splits(_cfg(tmp_path))
    assert {d.lang for d in splits.train.corpus} == {"de"}  # as before: one language for all


def test_bad_language_code_names_the_key():
    with pytest.raises(ConfigError, match="corpus_language"):
        DataConfig(corpus_language="EN ")


def test_train_only_qrels_work(tmp_path):
    given = write_beir_folder(tmp_path, qrels=("train",))
    splits = load_splits(_cfg(tmp_path, corpus_language="en"))
    ids = set(splits.train_ids) | set(splits.eval_ids)
    assert ids == set(given["train"]) and not set(splits.train_ids) & set(splits.eval_ids)
    assert "only train judgements" in splits.split_note


def test_train_dev_test_qrels_are_used_as_given(tmp_path):
    given = write_beir_folder(tmp_path, qrels=("train", "dev", "test"))
    splits = load_splits(_cfg(tmp_path, corpus_language="en", dev_fraction=0.3))
    assert splits.train_ids == given["train"]
    assert splits.dev_ids == given["dev"] and splits.dev is not None
    assert splits.eval_ids == given["test"]
    assert "as given" in splits.split_note


def test_dev_fraction_carves_validation_from_training_ids(tmp_path):
    given = write_beir_folder(tmp_path, n=40, qrels=("train", "test"))
    splits = load_splits(_cfg(tmp_path, corpus_language="en", dev_fraction=0.25))
    assert splits.dev is not None and len(splits.dev_ids) == 5
    assert set(splits.dev_ids) | set(splits.train_ids) == set(given["train"])
    assert not set(splits.dev_ids) & set(splits.train_ids)
    assert splits.eval_ids == given["test"]
    assert {q.id for q in splits.dev.queries} == set(splits.dev_ids)
    dev_foreign = {q.text for q in splits.dev.queries}
    assert dev_foreign == {s.text for s in splits.dev_sources if not s.id.startswith("de-")}
    # a random split (test judgements only) has a validation split too
    write_beir_folder(tmp_path / "one", n=40)
    one = load_splits(_cfg(tmp_path / "one", corpus_language="en", dev_fraction=0.25))
    assert one.dev is not None and one.dev_ids and not set(one.dev_ids) & set(one.train_ids)


def test_hf_folder_qrels_splits_and_languages(tmp_path):
    given = write_beir_folder(tmp_path, qrels=("train", "test"))
    for split in ("train", "test"):  # the MTEB layout: qrels/<split>.jsonl
        rows = (tmp_path / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]
        recs = [dict(zip(("query-id", "corpus-id", "score"), r.split("\t"))) for r in rows]
        text = "".join(json.dumps(r) + "\n" for r in recs)
        (tmp_path / "qrels" / f"{split}.jsonl").write_text(text, encoding="utf-8")
        (tmp_path / "qrels" / f"{split}.tsv").unlink()
    splits = load_splits(_cfg(tmp_path, format="hf", corpus_language="en", dev_fraction=0.2))
    assert splits.eval_ids == given["test"]
    assert set(splits.train_ids) | set(splits.dev_ids) == set(given["train"]) and splits.dev_ids
    assert {q.lang for q in splits.train.queries} == {"de", "es"}


def test_a_query_judged_in_two_splits_is_an_error(tmp_path):
    write_beir_folder(tmp_path, qrels=("train", "test"))
    test = tmp_path / "qrels" / "test.tsv"
    first = (tmp_path / "qrels" / "train.tsv").read_text().splitlines()[1]
    test.write_text(test.read_text() + first + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="both train and test"):
        load_splits(_cfg(tmp_path))


def test_a_folder_without_qrels_names_the_files(tmp_path):
    write_beir_folder(tmp_path)
    (tmp_path / "qrels" / "test.tsv").unlink()
    with pytest.raises(Exception, match=r"train\.tsv.*dev\.tsv.*test\.tsv"):
        load_splits(_cfg(tmp_path))

"""LazRetrieval's released train/test split is used as released; random only without one."""

from __future__ import annotations

import json
import logging

import pytest

from lira.config import DataConfig
from lira.data import demo_path
from lira.data.errors import DataError
from lira.data.splits import load_splits
from lira.data.xquad_r import load_xquad_r

NATIONS = {"BD": "bn", "VN": "vi", "TH": "th"}


@pytest.fixture(scope="module")
def texts():
    """Real text to stand in for queries and product titles (demo XQuAD-R, German)."""
    ds = load_xquad_r(demo_path(), ["de"])
    return [ds.question("de", q).text for q in ds.question_ids[:120]]


def _write(folder, queries, items, pairs):
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("query", queries), ("item", items), ("pairs_info", pairs)):
        (folder / f"{name}.json").write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")


def _split_rows(texts, nations, ids, offset):
    """Queries Q<id> (one per id, nations in turn), one item C<id> each, pair rscore "1.0"."""
    queries, items, pairs = [], [], []
    for k, i in enumerate(ids):
        nation = nations[k % len(nations)]
        queries.append({"ID": f"Q{i}", "nation": nation, "text": texts[offset + k]})
        items.append({"item_id": f"C{i}", "nation": nation, "text": texts[offset + k + 60]})
        pairs.append({"nation": nation, "query_id": f"Q{i}", "item_id": f"C{i}", "rscore": "1.0"})
    return queries, items, pairs


# ids interleaved on purpose: any re-split by sorted/shuffled id would mix them
TRAIN_IDS = [1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24]
TEST_IDS = [2, 3, 10, 11, 22]


@pytest.fixture
def released(tmp_path, texts):
    nations = list(NATIONS)
    _write(tmp_path / "laz" / "train", *_split_rows(texts, nations, TRAIN_IDS, 0))
    _write(tmp_path / "laz" / "test", *_split_rows(texts, nations, TEST_IDS, 30))
    return tmp_path / "laz"


def test_released_split_ids_are_respected_exactly(released):
    cfg = DataConfig(format="lazretrieval", path=str(released), eval_fraction=0.5)
    s = load_splits(cfg)
    assert s.train_ids == [f"Q{i}" for i in TRAIN_IDS]
    assert s.eval_ids == [f"Q{i}" for i in TEST_IDS]
    # per country, exactly the released ids
    lang_of = {f"Q{i}": NATIONS[list(NATIONS)[k % 3]] for k, i in enumerate(TEST_IDS)}
    for lang in NATIONS.values():
        want = {q for q, g in lang_of.items() if g == lang}
        assert {q.id for q in s.eval.queries if q.lang == lang} == want
    assert {d.id for d in s.eval.corpus} == {f"C{i}" for i in TEST_IDS}  # test items only
    assert {d.id for d in s.train.corpus} == {f"C{i}" for i in TRAIN_IDS}
    assert {r.text for r in s.eval.corpus} <= {r.text for r in s.eval_sources}  # translated too
    assert "released split" in s.split_note
    other = load_splits(DataConfig(format="lazretrieval", path=str(released), split_seed=99,
                                   eval_fraction=0.2))  # fmt: skip
    assert other.train_ids == s.train_ids and other.eval_ids == s.eval_ids  # no re-splitting


def test_released_split_per_country_folders(tmp_path, texts):
    for k, nation in enumerate(NATIONS):
        train = [i + 100 * k for i in TRAIN_IDS[:4]]
        test = [i + 100 * k for i in TEST_IDS[:2]]
        _write(tmp_path / nation / "train", *_split_rows(texts, [nation], train, 4 * k))
        _write(tmp_path / nation / "test", *_split_rows(texts, [nation], test, 30 + 2 * k))
    s = load_splits(DataConfig(format="lazretrieval", path=str(tmp_path)))
    for k, lang in enumerate(NATIONS.values()):
        assert [q.id for q in s.eval.queries if q.lang == lang] == [
            f"Q{i + 100 * k}" for i in TEST_IDS[:2]]  # fmt: skip
    assert len(s.train_ids) == 12 and len(s.eval_ids) == 6


def test_released_split_caps_per_language(released):
    cfg = DataConfig(format="lazretrieval", path=str(released), max_eval_queries=1)
    s = load_splits(cfg)
    lang_of = {f"Q{i}": NATIONS[list(NATIONS)[k % 3]] for k, i in enumerate(TEST_IDS)}
    assert sorted(lang_of[q] for q in s.eval_ids) == sorted(NATIONS.values())  # one per country
    assert load_splits(cfg).eval_ids == s.eval_ids  # a seeded draw: the same every call


def test_unsplit_folder_is_resplit_at_random_and_says_so(tmp_path, texts, caplog):
    _write(tmp_path, *_split_rows(texts, list(NATIONS), TRAIN_IDS + TEST_IDS, 0))
    with caplog.at_level(logging.WARNING, logger="lira.data.splits"):
        s = load_splits(DataConfig(format="lazretrieval", path=str(tmp_path), eval_fraction=0.3))
    assert "ships no train/test split" in caplog.text and "re-split at random" in caplog.text
    assert "re-split at random" in s.split_note
    assert not set(s.train_ids) & set(s.eval_ids)
    assert len(s.train_ids) + len(s.eval_ids) == len(TRAIN_IDS + TEST_IDS)


def test_broken_released_splits_are_named(tmp_path, texts):
    _write(tmp_path / "a" / "train", *_split_rows(texts, ["BD"], TRAIN_IDS, 0))
    with pytest.raises(DataError, match="needs both train/ and test/"):
        load_splits(DataConfig(format="lazretrieval", path=str(tmp_path / "a")))
    _write(tmp_path / "b" / "train", *_split_rows(texts, ["BD"], [1, 2, 3], 0))
    _write(tmp_path / "b" / "test", *_split_rows(texts, ["BD"], [3, 4], 10))
    with pytest.raises(DataError, match=r"1 query id\(s\) are judged in both train and test"):
        load_splits(DataConfig(format="lazretrieval", path=str(tmp_path / "b")))

"""Splits of the configured dataset: deterministic, disjoint, the shapes stages expect."""

from __future__ import annotations

from lira.config import DataConfig
from lira.data.splits import load_splits
from lira.data.xquad_r import plain_qid


def test_xquad_splits_for_the_pipeline():
    cfg = DataConfig(train_languages=["de", "es"], eval_languages=["de", "ru"], eval_fraction=0.3,
                     max_train_queries=40, max_eval_queries=20)  # fmt: skip
    s = load_splits(cfg)
    assert len(s.train_ids) == 40 and len(s.eval_ids) == 20
    assert not set(s.train_ids) & set(s.eval_ids)
    assert {r.lang for r in s.train_sources} == {"de", "es"} and len(s.train_sources) == 80
    assert {r.lang for r in s.eval_sources} == {"de", "ru"}
    assert {plain_qid(q.id) for q in s.eval.queries} == set(s.eval_ids)
    assert {d.lang for d in s.train.corpus} == {"en"}
    assert set(s.train_parallel.texts) == {"en", "de", "es"}
    assert s.train_parallel.ids == s.train_ids
    assert s.train_retrieval is s.train and s.eval_retrieval is s.eval
    assert load_splits(cfg).train_ids == s.train_ids  # deterministic


def test_sts_pairs_split_and_sources(tmp_path):
    f = tmp_path / "sts.jsonl"
    rows = [f'{{"sentence1": "Satz {i}", "sentence2": "Sentence {i}", "score": {i % 5}, "lang1": "de"}}'
            for i in range(20)]  # fmt: skip
    f.write_text("\n".join(rows) + "\n", encoding="utf-8")
    s = load_splits(
        DataConfig(format="sts", path=str(f), train_languages=["en"], eval_fraction=0.25)
    )
    assert len(s.train_pairs.scores) == 15 and len(s.eval_pairs.scores) == 5
    assert {r.text for r in s.train_sources}.isdisjoint({r.text for r in s.eval_sources})
    assert all(r.lang == "de" for r in s.train_sources + s.eval_sources)

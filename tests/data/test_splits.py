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


def test_xquad_validation_and_caps_are_seeded_samples_across_articles():
    """Validation, capped training and capped test ids are seeded draws spread over the
    articles (not the first sorted ids, which cluster by article), disjoint, and the same
    in every language and on every call."""
    for seed in (13, 7):
        cfg = DataConfig(train_languages=["en", "de", "es"], eval_languages=["de", "ru"],
                         dev_languages=["zh"], dev_fraction=0.1, eval_fraction=0.3,
                         max_train_queries=32, max_eval_queries=16, split_seed=seed)  # fmt: skip
        s = load_splits(cfg)
        ds = s.dataset
        for ids in (s.dev_ids, s.train_ids, s.eval_ids):
            articles = {ds.gold_sentence("en", q).id.split(":")[1] for q in ids}
            assert len(articles) >= len(ids) // 2, (len(ids), sorted(articles))
        pool = sorted(ds.split(0.3, seed)[0])  # every training id (validation included), sorted
        assert s.dev_ids != pool[: len(s.dev_ids)]  # not the first sorted ids
        assert len(s.dev_ids) == round(len(pool) * 0.1) and len(s.train_ids) == 32
        assert not set(s.dev_ids) & set(s.train_ids) and not set(s.dev_ids) & set(s.eval_ids)
        assert not set(s.train_ids) & set(s.eval_ids)
        for data, ids in ((s.dev, s.dev_ids), (s.train, s.train_ids), (s.eval, s.eval_ids)):
            by_lang: dict[str, list[str]] = {}
            for q in data.queries:
                by_lang.setdefault(q.lang, []).append(plain_qid(q.id))
            assert all(qs == ids for qs in by_lang.values()), sorted(by_lang)
        again = load_splits(cfg)
        assert (again.dev_ids, again.train_ids, again.eval_ids) == (
            s.dev_ids, s.train_ids, s.eval_ids)  # fmt: skip

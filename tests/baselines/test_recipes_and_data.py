"""Baseline recipes (the papers' values, the shared budget) and training data, without models."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lira.baselines.clear import ClearConfig
from lira.baselines.config import BaselinesConfig
from lira.baselines.data import (
    TrainExample,
    build_examples,
    mine_clear_negatives,
    mine_composition_negatives,
    recipe,
)
from lira.baselines.lancer import lancer_texts
from lira.baselines.merging import MergingConfig
from lira.baselines.method import english_rows
from lira.config import ConfigError, DataConfig, from_dict
from lira.data.splits import load_splits


def test_defaults_are_the_papers_values():
    bc = BaselinesConfig()
    assert (bc.steps, bc.batch_size, bc.lr) == (0, 0, 0.0)  # no shared budget by default
    clear, lancer, jsd, merging = (bc.recipes[m] for m in ("clear", "lancer", "jsd", "merging"))
    # CLEAR App. A / §4.1: lr 5e-5, batch 64, cosine, warm-up 0.05, 5 negatives from ranks 30-100
    assert (clear.lr, clear.batch_size, clear.scheduler, clear.warmup) == (
        5e-5, 64, "cosine", 0.05,
    )  # fmt: skip
    assert (clear.negatives, clear.negative_ranks, clear.lambdas) == (
        5, [30, 100], [0.4, 0.4, 0.2],
    )  # fmt: skip
    # LANCER §4.1: 64 retrieval examples + 16 texts per language, 4 epochs at 2e-5, L_R + L_C
    assert (lancer.batch_size, lancer.per_language, lancer.epochs, lancer.lr) == (
        64, 16, 4.0, 2e-5,
    )  # fmt: skip
    assert lancer.weight == 1.0
    # paper 003 App. C: batch 32, linear, warm-up 0.15, AdamW (0.9, 0.99), weight decay 0.01
    assert (jsd.batch_size, jsd.scheduler, jsd.warmup) == (32, "linear", 0.15)
    assert (jsd.beta2, jsd.weight_decay) == (0.99, 0.01)
    # paper 001 App. B.2-B.3: batch 512, lr 2e-5, linear, warm-up 0.1, AdamW (0.9, 0.99), 0.01;
    # 5 negatives from ranks 50-300, cos <= 0.8, < 0.95 x positive; merged with the base model
    assert (merging.batch_size, merging.lr, merging.warmup) == (512, 2e-5, 0.1)
    assert (merging.beta2, merging.weight_decay) == (0.99, 0.01)
    assert (merging.negatives, merging.negative_ranks) == (5, [50, 300])
    assert (merging.max_sim, merging.relative_margin) == (0.8, 0.95)
    assert merging.partner == "base" and merging.weights == [0.5, 0.5]


def test_recipe_uses_each_paper_then_the_shared_budget():
    bc = BaselinesConfig()
    r = recipe(bc, "clear", 130)
    assert (r.lr, r.batch_size, r.steps, r.scheduler, r.warmup) == (5e-5, 64, 3, "cosine", 0.05)
    assert (r.beta2, r.weight_decay, r.tau, r.shared) == (0.999, 0.0, 0.05, ())
    assert recipe(bc, "infonce", 130) == r  # CLEAR's baseline trains with CLEAR's recipe
    assert recipe(bc, "lancer", 130).steps == math.ceil(4 * 130 / 64)  # 4 epochs
    j = recipe(bc, "jsd", 130)
    assert (j.batch_size, j.steps, j.beta2, j.weight_decay) == (32, 5, 0.99, 0.01)
    g = recipe(bc, "gist", 130)
    assert (g.batch_size, g.steps, g.tau, g.lr) == (130, 1, 0.01, 2e-5)  # 512 > rows: one batch
    shared = BaselinesConfig(steps=7, batch_size=8, lr=1e-3)
    for method in ("clear", "lancer", "jsd", "gist"):
        s = recipe(shared, method, 130)
        assert (s.steps, s.batch_size, s.lr) == (7, 8, 1e-3)
        assert s.shared == ("steps", "batch_size", "lr")
    assert recipe(shared, "jsd", 130).warmup == 0.15  # the schedule stays the paper's
    only_steps = recipe(BaselinesConfig(steps=4), "jsd", 130)
    assert (only_steps.steps, only_steps.batch_size, only_steps.lr) == (4, 32, 2e-5)


def test_bad_baseline_values_name_the_key():
    with pytest.raises(ConfigError, match=r"baselines\.clear\.negative_ranks"):
        from_dict(BaselinesConfig, {"clear": {"negative_ranks": [100, 30]}}, "baselines")
    with pytest.raises(ConfigError, match="batch_size"):
        BaselinesConfig(batch_size=1)
    with pytest.raises(ConfigError, match=r"baselines\.merging\.weights"):
        from_dict(BaselinesConfig, {"merging": {"weights": [0.7, 0.7]}}, "baselines")
    with pytest.raises(ConfigError, match="weights"):
        MergingConfig(weights=[0.7, 0.7])


class _FakeBackbone:
    """encode() returns fixed vectors per text (an identity-like table)."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def encode(self, texts, langs=None, kind="query", batch_size=32):
        return np.stack([self.table[t] for t in texts]).astype(np.float32)


def _ray(deg: float) -> np.ndarray:
    return np.array([math.cos(math.radians(deg)), math.sin(math.radians(deg))])


class _Doc:
    def __init__(self, id_: str, text: str) -> None:
        self.id, self.text = id_, text


def test_clear_mining_samples_the_window_for_passages_and_queries(caplog):
    # passages at 0..90 deg; every English query at 0 deg: rank r (non-gold) is passage r
    corpus = [_Doc(f"d{i}", f"doc{i}") for i in range(10)]
    table = {f"doc{i}": _ray(10 * i) for i in range(10)}
    examples = []
    for i in range(6):  # German questions; gold d0 for all would collide, so gold = d(i)
        examples.append(TrainExample(f"q{i}", "de", "qen", f"qde{i}", f"d{i}", f"doc{i}"))
    table["qen"] = _ray(-1)
    for i in range(6):
        table[f"qde{i}"] = _ray(10 * i + 3)  # near its own gold passage
    bc = BaselinesConfig(recipes={"clear": ClearConfig(negatives=2, negative_ranks=[3, 4])})
    with caplog.at_level("INFO"):
        mine_clear_negatives(_FakeBackbone(table), examples, corpus, bc)
    for e in examples:
        gold = int(e.pos_id[1:])
        ranked = [j for j in range(10) if j != gold]  # by angle from -1 deg
        assert sorted(e.p_hn) == sorted(ranked[2:4]), (e.pos_id, e.p_hn)
        assert len(e.q_hn) == 2 and all(examples[j].lang == "de" for j in e.q_hn)
        assert all(examples[j].pos_id != e.pos_id for j in e.q_hn)
    # query negatives of example 0: anchor = its gold passage (0 deg), pool = the other German
    # queries at 13, 23, 33, 43, 53 deg: ranks 3-4 are questions 3 and 4
    assert sorted(examples[0].q_hn) == [3, 4]


def test_composition_mining_is_once_per_english_question():
    corpus = [_Doc(f"d{i}", f"doc{i}") for i in range(12)]
    table = {f"doc{i}": _ray(8 * i) for i in range(12)}
    table["qa"], table["qb"] = _ray(0), _ray(88)
    examples = [
        TrainExample("a", "de", "qa", "qa-de", "d0", "doc0"),
        TrainExample("a", "es", "qa", "qa-es", "d0", "doc0"),
        TrainExample("b", "de", "qb", "qb-de", "d11", "doc11"),
    ]
    bc = BaselinesConfig(recipes={"merging": MergingConfig(negatives=2, negative_ranks=[2, 5])})
    mine_composition_negatives(_FakeBackbone(table), examples, corpus, bc)
    assert examples[0].gist_hn == examples[1].gist_hn  # the same English query, mined once
    # question a (gold d0 at 0 deg): ranks 1.. are d1 (8 deg, cos .990) ...; cos <= 0.8 starts
    # at d5 (40 deg, .766); margin 0.95 x 1.0; so the first passing in ranks 2-5 is d5
    assert examples[0].gist_hn == [5, 6]
    assert english_rows(examples) == [0, 2]


@pytest.fixture(scope="module")
def demo_splits():
    return load_splits(DataConfig(train_languages=["de", "es"], max_train_queries=24))


def test_examples_carry_the_target_language_gold_sentence(demo_splits):
    ds = demo_splits.dataset
    examples = build_examples(demo_splits.train_parallel, demo_splits.train, ds)
    assert {e.lang for e in examples} == {"de", "es"}
    for e in examples:
        assert e.p_tgt == ds.gold_sentence(e.lang, e.qid).text  # paper 003's p_tgt
        assert e.pos_text == ds.gold_sentence("en", e.qid).text
        assert e.p_tgt != e.pos_text


def test_lancer_texts_are_non_parallel_sentences(demo_splits):
    ds = demo_splits.dataset
    examples = build_examples(demo_splits.train_parallel, demo_splits.train, ds)
    langs = ["de", "en", "es"]
    pools = lancer_texts(ds, langs, examples, seed=0)
    qids = sorted({e.qid for e in examples})
    owner: dict[str, set[str]] = {}  # English gold sentence -> languages holding a translation
    for q in qids:
        group = ds.gold_sentence("en", q).id
        for lang in langs:
            if ds.gold_sentence(lang, q).text in pools[lang]:
                owner.setdefault(group, set()).add(lang)
    assert set(owner) == {ds.gold_sentence("en", q).id for q in qids}  # every group is used
    assert all(len(v) == 1 for v in owner.values())  # ... in exactly one language
    assert all(pools[lang] for lang in langs)
    assert len(set(pools["de"])) == len(pools["de"])  # de-duplicated
    assert pools == lancer_texts(ds, langs, examples, seed=0)

"""Scenarios on the shipped XQuAD-R subset and the end-to-end evaluation with a real encoder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evaluators.diagnostics import local_lipschitz, rkhs_c_stats, summary_stats
from evaluators.leaderboard import write_leaderboard
from evaluators.probes import lancer_penalty, language_id_accuracy
from evaluators.runner import english_gaps, evaluate_encoders
from evaluators.scenarios import build_scenarios
from lira.config import EvalConfig
from lira.data.xquad_r import plain_qid


def test_scenario_shapes_and_qrels(xquad):
    qids = xquad.question_ids[:30]
    scs = {
        (s.name, s.language): s
        for s in build_scenarios(
            xquad, ["en-en", "lang-en", "multi", "multi-1", "mono-same"], ["de"], qids
        )
    }
    assert len(scs[("en-en", "en")].docs) == len(xquad.sentences("en"))
    multi = scs[("multi", "de")]
    assert len(multi.docs) == len(xquad.sentences("en")) + len(xquad.sentences("de"))
    assert all(len(r) == 2 for r in multi.qrels.values()) and multi.multi_reference
    m1 = scs[("multi-1", "de")]
    q = m1.queries[0]
    own = xquad.gold_sentence("de", plain_qid(q.id)).id
    assert own not in {d.id for d in m1.docs}
    assert list(m1.qrels[q.id]) == [xquad.gold_sentence("en", plain_qid(q.id)).id]
    assert {d.lang for d in scs[("mono-same", "de")].docs} == {"de"}
    assert ("multi@en", "de") in scs and scs[("multi@en", "de")].queries[0].lang == "en"


def test_evaluate_encoders_writes_a_readable_leaderboard(xquad, tfidf, tmp_path):
    cfg = EvalConfig(bootstrap=50)
    qids = xquad.question_ids[:40]
    rows = evaluate_encoders({"tfidf": tfidf}, xquad, qids, ["de", "zh"], cfg)
    rows += english_gaps(rows)
    get = {(r["scenario"], r["language"], r["metric"]): r for r in rows}
    en = get[("en-en", "en", "ndcg@10")]
    assert en["value"] > 50  # lexical overlap makes En-En easy for char n-grams
    assert en["ci_low"] <= en["value"] <= en["ci_high"]
    assert get[("lang-en", "zh", "ndcg@10")]["value"] < en["value"]  # no overlap zh->en
    assert 0 <= get[("multi", "de", "complete@10")]["value"] <= 100
    assert ("multi en-gap", "de", "max@r") in get
    assert get[("en-en", "all", "ndcg@10")]["value"] == pytest.approx(en["value"])
    files = write_leaderboard(rows, tmp_path)
    md = files["md"].read_text()
    assert "## ndcg@10 by scenario: zh" in md and "## en-en: every metric (all)" in md
    assert "| method | en-en | lang-en |" in md and "| tfidf |" in md
    assert json.loads(files["json"].read_text())[0].keys() == {
        "method",
        "task",
        "scenario",
        "language",
        "metric",
        "value",
        "ci_low",
        "ci_high",
    }
    assert files["ndcg@10"].stat().st_size > 5000


def test_each_text_is_encoded_once_per_method(xquad, tfidf):
    before = tfidf.calls
    qids = xquad.question_ids[:10]
    evaluate_encoders({"t": tfidf}, xquad, qids, ["de"], EvalConfig(bootstrap=0))
    n_unique = len(xquad.sentences("en")) + len(xquad.sentences("de")) + 2 * len(qids)
    assert tfidf.calls - before == n_unique


def test_language_id_probe_and_lancer_penalty():
    rng = np.random.default_rng(0)
    langs = ["de"] * 60 + ["es"] * 60
    sep = rng.normal(size=(120, 8)) + np.array([[3.0] * 8] * 60 + [[-3.0] * 8] * 60)
    assert language_id_accuracy(sep, langs) > 95
    same = rng.normal(size=(120, 8))
    assert language_id_accuracy(same, langs) < 75
    assert lancer_penalty(sep, langs) > lancer_penalty(same, langs)
    with pytest.raises(ValueError, match="two languages"):
        language_id_accuracy(same, ["de"] * 120)


def test_diagnostics_statistics_and_lipschitz():
    s = summary_stats([1, 2, 3, 4, 100])
    assert s["max"] == 100 and s["median"] == 3 and s["count"] == 5
    c = rkhs_c_stats(np.array([[3.0, 4.0], [0.0, 1.0]]))
    assert c["max"] == 5.0 and c["mean"] == 3.0
    texts = ["the cat sat on the mat", "a dog ran in the park", "rain fell all day long"]

    def embed(batch):
        return np.array([[len(t), t.count(" "), sum(map(ord, t)) % 97] for t in batch], dtype=float)

    lip = local_lipschitz(texts, embed, embed, deltas=(1, 3))  # f == z -> ratio 100 %
    assert lip[1]["median"] == pytest.approx(100.0) and set(lip) == {1, 3}

"""Scenarios on the shipped XQuAD-R subset and the end-to-end evaluation with a real encoder."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from evaluators.config import EvalConfig
from evaluators.diagnostics import local_lipschitz, rkhs_c_stats, summary_stats
from evaluators.engine import english_gaps, evaluate_encoders
from evaluators.leaderboard import write_leaderboard
from evaluators.probes import lancer_penalty, language_id_accuracy
from evaluators.scenarios import SCENARIOS, build_scenarios, describe
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


def _langs(records):
    return {r.lang for r in records}


def test_scenario_directions_match_their_names_and_papers(xquad):
    """Names are query -> documents; CLEAR names the passage language first (paper 000)."""
    qids = xquad.question_ids[:20]
    scs = {(s.name, s.language): s for s in build_scenarios(xquad, list(SCENARIOS), ["de"], qids)}
    want = {  # scenario: (query language, document languages)
        "en-en": ("en", {"en"}), "lang-en": ("de", {"en"}), "en-lang": ("en", {"de"}),
        "mono-same": ("de", {"de"}), "mono-same@en": ("en", {"en"}),
        "mono-cross": ("de", {"en"}), "mono-cross@en": ("en", {"de"}),
        "multi": ("de", {"en", "de"}), "multi@en": ("en", {"en", "de"}),
        "multi-1": ("de", {"en", "de"}), "multi-1@en": ("en", {"en", "de"}),
    }  # fmt: skip
    assert {name for name, _ in scs} == set(want)
    for (name, _), sc in scs.items():
        q_lang, d_langs = want[name]
        assert _langs(sc.queries) == {q_lang} and _langs(sc.docs) == d_langs, name
        gold = {d for rel in sc.qrels.values() for d in rel}
        assert {d.split(":")[0] for d in gold} <= d_langs, name
    # paper 003 Mono-Cross has the same data as lang-en / en-lang, by construction
    assert scs[("mono-cross", "de")].qrels == scs[("lang-en", "de")].qrels
    assert scs[("mono-cross@en", "de")].qrels == scs[("en-lang", "de")].qrels
    assert scs[("mono-same@en", "de")].qrels == scs[("en-en", "en")].qrels
    # multi-1: the relevant sentence is in the other language than the query
    for name, other in (("multi-1", "en"), ("multi-1@en", "de")):
        rel = [d for r in scs[(name, "de")].qrels.values() for d in r]
        assert {d.split(":")[0] for d in rel} == {other}
    # the words and the paper columns
    assert describe("lang-en")[0] == "target-language queries → English sentences"
    assert "CLEAR (000) English-Lang" in describe("lang-en")[1]
    assert describe("en-lang")[0] == "English queries → target-language sentences"
    assert "CLEAR (000) Lang-English" in describe("en-lang")[1]
    assert "Mono-Cross, English queries" in describe("mono-cross@en")[1]
    assert describe("multi en-gap")[0].startswith("multi@en minus multi")


def test_english_gap_is_english_minus_target():
    def row(scenario, value):
        return {"method": "m", "task": "t", "scenario": scenario, "language": "de",
                "metric": "ndcg@1", "value": value, "ci_low": value, "ci_high": value}  # fmt: skip

    gaps = english_gaps([row("mono-cross", 30.0), row("mono-cross@en", 42.5), row("x@en", 1.0)])
    assert len(gaps) == 1
    assert gaps[0]["scenario"] == "mono-cross en-gap" and gaps[0]["value"] == 12.5


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
    assert "## Scenarios" in md
    assert (
        "| lang-en | target-language queries → English sentences | CLEAR (000) English-Lang" in md
    )
    assert "| mono-cross@en | English queries → target-language sentences" in md
    mc = get[("mono-cross", "zh", "ndcg@10")]["value"]
    assert mc == pytest.approx(get[("lang-en", "zh", "ndcg@10")]["value"])  # same data
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


def test_summary_stats_and_rkhs_c():
    s = summary_stats([1, 2, 3, 4, 100])
    assert s["max"] == 100 and s["median"] == 3 and s["count"] == 5
    # population std: squared deviations from 22 sum to 441+400+361+324+6084 = 7610
    assert s["mean"] == 22.0 and s["std"] == pytest.approx((7610 / 5) ** 0.5)
    assert s["p90"] == pytest.approx(4 + 0.6 * 96)  # linear interpolation at 0.9 * 4 = 3.6
    c = rkhs_c_stats(np.array([[3.0, 4.0], [0.0, 1.0]]))
    assert c["max"] == 5.0 and c["mean"] == 3.0


def test_local_lipschitz_is_def2_max_over_corpus_neighbours_per_levenshtein():
    """Def. 2 / Eq. 21-23 with App. A's ratio: L_loc(y; δ) = max over corpus sentences y' with
    0 < d_tok(y, y') <= δ of ||f(y) - f(y')|| / Lev(y, y') (character Levenshtein), in %."""
    texts = ["the cat sat", "the cat ran", "the cat sat down", "rain fell all day long"]

    def f(batch):  # (length, number of t's)
        return np.array([[len(t), t.count("t")] for t in batch], dtype=float)

    # f: (11, 3), (11, 2), (16, 3), (22, 0). Pairs within 2 token edits:
    # 0-1: d_tok 1, ||(0, 1)|| = 1,       Lev("sat" -> "ran") = 2          -> 0.5
    # 0-2: d_tok 1, ||(5, 0)|| = 5,       Lev(+" down") = 5                -> 1.0
    # 1-2: d_tok 2, ||(5, 1)|| = sqrt 26, Lev(r->s, a, +"t dow", n) = 6    -> sqrt(26)/6
    # sentence 3 is >= 4 token edits from every other one: no neighbour, not counted
    lip = local_lipschitz(texts, f, deltas=(1, 2), perturbations=0)
    assert set(lip) == {1, 2}
    one = [100.0, 50.0, 100.0]  # max over neighbours: y0 max(0.5, 1.0), y1 0.5, y2 1.0
    two = [100.0, 100 * math.sqrt(26) / 6, 100.0]
    for got, want in ((lip[1], one), (lip[2], two)):
        assert got["count"] == 3
        assert got["mean"] == pytest.approx(sum(want) / 3)
        assert got["median"] == pytest.approx(sorted(want)[1])
        assert got["max"] == pytest.approx(max(want))
        assert got["std"] == pytest.approx(float(np.std(want)))
    assert local_lipschitz(texts[2:], f, deltas=(1,), perturbations=0)[1]["count"] == 0


def test_local_lipschitz_perturbed_neighbours_use_the_same_ratio():
    """App. A's perturbed versions s' join N_δ(y): with f = text length, |len(y) - len(y')| <=
    Lev(y, y'), so every ratio is at most 100 % and perturbations give every y a neighbour."""
    texts = ["rain fell all day long", "a dog ran in the park today"]

    def length(batch):
        return np.array([[float(len(t))] for t in batch])

    lip = local_lipschitz(texts, length, deltas=(1, 3), perturbations=4, seed=3)
    for stats_d in lip.values():
        assert stats_d["count"] == 2 and 0.0 <= stats_d["max"] <= 100.0


class _Noisy:
    """The TF-IDF encoder with seeded noise added: a worse method on the same queries."""

    def __init__(self, base, scale: float) -> None:
        self.base, self.scale = base, scale

    def encode(self, texts, langs=None, kind="query", batch_size=32):
        x = self.base.encode(texts, langs, kind, batch_size)
        rng = np.random.default_rng(len(texts))
        x = x + self.scale * rng.standard_normal(x.shape).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_paired_differences_to_the_reference(xquad, tfidf, tmp_path):
    """Δ rows = mean per-query difference to the reference, with a paired bootstrap interval:
    a method identical to the reference has Δ = 0 with a zero-width interval (an unpaired
    bootstrap would not), and a worse one a negative Δ equal to the difference of the means."""
    cfg = EvalConfig(bootstrap=200, scenarios=["en-en", "lang-en"])
    qids = xquad.question_ids[:40]
    models = {"ref": tfidf, "same": tfidf, "noisy": _Noisy(tfidf, 0.05)}
    rows = evaluate_encoders(models, xquad, qids, ["de", "es"], cfg, reference="ref")
    get = {(r["method"], r["scenario"], r["language"], r["metric"]): r for r in rows}
    assert ("ref", "lang-en", "all", "Δndcg@10 vs ref") not in get  # no Δ to itself
    for lang in ("de", "es", "all"):
        same = get[("same", "lang-en", lang, "Δndcg@10 vs ref")]
        assert same["value"] == same["ci_low"] == same["ci_high"] == 0.0
        d = get[("noisy", "lang-en", lang, "Δndcg@10 vs ref")]
        want = (get[("noisy", "lang-en", lang, "ndcg@10")]["value"]
                - get[("ref", "lang-en", lang, "ndcg@10")]["value"])  # fmt: skip
        assert d["value"] == pytest.approx(want) and d["value"] < 0
        assert d["ci_low"] <= d["value"] <= d["ci_high"]
    assert not any(r["metric"].startswith("Δ") for r in english_gaps(rows))
    files = write_leaderboard(rows, tmp_path)
    assert "Δndcg@10 vs ref" in files["md"].read_text()
    assert files["Δndcg@10 vs ref"].name == "delta_ndcg_at_10_vs_ref.png"

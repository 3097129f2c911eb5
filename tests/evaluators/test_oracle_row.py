"""The oracle row of ``lira compare`` (issue "LiRA improves a strong backbone"): per question,
the better of the translators' candidates under h (the Actor's ceiling), built from the
per-query nDCG@10 of the ``lira: h(<name>)`` rows, with its interval and paired differences
like every other row's, only where the queries are translated."""

from __future__ import annotations

import numpy as np
import pytest

from evaluators.bootstrap import bootstrap_ci
from evaluators.config import EvalConfig
from evaluators.engine import (
    EmbeddingCache,
    evaluate_encoders,
    evaluate_retrieval,
    oracle_rows,
    scenario_values,
)
from evaluators.scenarios import build_scenarios
from lasr.eval_models import BACKBONE, ORACLE, translation_encoders, translation_oracles
from lira.data.types import RetrievalData
from tests.lasr.two_translators import two_translator_model

A, B = "lira: h(a)", "lira: h(b)"
POOR = "Bananas are yellow."
CFG = EvalConfig(scenarios=["en-en", "lang-en"], metrics=["ndcg@10"], bootstrap=200,
                 diagnostics=False)  # fmt: skip


@pytest.fixture(scope="module")
def rows_and_models(tmp_path_factory, models_config, xquad):
    """backbone + one h row per translator, where ``a`` translates the even questions and
    ``b`` the odd ones (the other writes nonsense): each is right on half the questions."""
    qids = xquad.question_ids[:16]
    de = [xquad.question("de", q).text for q in qids]
    en = [xquad.question("en", q).text for q in qids]
    by_a = [e if i % 2 == 0 else POOR for i, e in enumerate(en)]
    by_b = [POOR if i % 2 == 0 else e for i, e in enumerate(en)]
    folder = tmp_path_factory.mktemp("oracle")
    lira = two_translator_model(folder, models_config, de, "de", by_a, by_b)
    h = lira.backbone
    h.memo = {}  # as in run_encoders: each text through h once
    models = {BACKBONE: h, **translation_encoders(lira, h, None, ["a", "b"])}
    return qids, models


def test_oracle_is_the_per_question_best_translator(rows_and_models, xquad):
    qids, models = rows_and_models
    oracles = translation_oracles(models)
    assert oracles == {ORACLE: [A, B]}
    assert translation_oracles({m: models[m] for m in (BACKBONE, A)}) == {}  # one translator
    rows = evaluate_encoders(models, xquad, qids, ["de"], CFG, reference=BACKBONE,
                             oracles=oracles)  # fmt: skip
    # by hand: the per-query nDCG@10 of each row on L→En
    [sc] = build_scenarios(xquad, ["lang-en"], ["de"], qids)
    per = {m: np.asarray(scenario_values(sc, EmbeddingCache(models[m], 32), ["ndcg@10"],
                                         CFG.chunk_size, CFG)["ndcg@10"])
           for m in (BACKBONE, A, B)}  # fmt: skip
    best = np.maximum(per[A], per[B])
    assert (best > per[A]).any() and (best > per[B]).any()  # each translator loses somewhere
    per_query = {("lang-en", "de", "ndcg@10"): {m: v.tolist() for m, v in per.items()}}
    oracle_rows(per_query, oracles, {("lang-en", "de")}, CFG, "xquad-r")
    assert per_query[("lang-en", "de", "ndcg@10")][ORACLE] == best.tolist()  # per query: max

    got = {(r["method"], r["scenario"], r["language"], r["metric"]): r for r in rows}
    for lang in ("de", "all"):  # one language: the pooled row holds the same queries
        oracle = got[(ORACLE, "lang-en", lang, "ndcg@10")]
        mean, lo, hi = bootstrap_ci(best.tolist(), CFG.bootstrap, seed=CFG.seed)
        assert (oracle["value"], oracle["ci_low"], oracle["ci_high"]) == pytest.approx(
            (mean, lo, hi)
        )
        for m in (A, B):
            assert got[(m, "lang-en", lang, "ndcg@10")]["value"] == pytest.approx(per[m].mean())
            assert oracle["value"] > got[(m, "lang-en", lang, "ndcg@10")]["value"]
        delta = got[(ORACLE, "lang-en", lang, "Δndcg@10 vs backbone")]
        want = bootstrap_ci((best - per[BACKBONE]).tolist(), CFG.bootstrap, seed=CFG.seed)
        assert (delta["value"], delta["ci_low"], delta["ci_high"]) == pytest.approx(want)
    # English queries are not translated (every h row is h): no oracle there
    assert {r["scenario"] for r in rows if r["method"] == ORACLE} == {"lang-en"}
    assert {r["metric"] for r in rows if r["method"] == ORACLE} == {
        "ndcg@10", "Δndcg@10 vs backbone"}  # fmt: skip


def test_oracle_on_a_retrieval_set(rows_and_models, xquad):
    """The same row on a retrieval set's foreign queries (``de→en``, pooled as ``lang-en``)."""
    qids, models = rows_and_models
    de, en = xquad.retrieval("de", ["en"], qids), xquad.retrieval("en", ["en"], qids)
    data = RetrievalData(de.queries + en.queries, de.corpus, {**de.qrels, **en.qrels})
    rows = evaluate_retrieval(models, data, CFG, "beir", oracles=translation_oracles(models))
    got = {(r["method"], r["scenario"], r["language"]): r["value"] for r in rows
           if r["metric"] == "ndcg@10"}  # fmt: skip
    assert {k for k in got if k[0] == ORACLE} == {(ORACLE, "de→en", "de"),
                                                  (ORACLE, "lang-en", "all")}  # fmt: skip
    assert got[(ORACLE, "de→en", "de")] > max(got[(A, "de→en", "de")], got[(B, "de→en", "de")])

"""``lira compare`` on a BEIR folder with ``qrels/dev.tsv`` follows XQuAD-R's protocol (issue
52.4): a validation leaderboard, a summary table, and columns named by language pair."""

from __future__ import annotations

import json

from evaluators.compare import run_compare
from evaluators.config import EvalConfig
from pipeline.runconfig import RunConfig
from tests.data.beir_folder import beir_config, write_beir_folder


def test_beir_folder_gets_validation_and_test_leaderboards_by_language_pair(
    tmp_path, models_config
):
    folder = tmp_path / "my-beir"
    given = write_beir_folder(folder, n=24, qrels=("train", "dev", "test"), german_docs=0)
    out = tmp_path / "out"
    cfg = RunConfig(
        output_dir=str(out),
        stages=["compare"],
        models=models_config,
        data=beir_config(folder),
        eval=EvalConfig(bootstrap=10, diagnostics=False),
    )
    run_compare(cfg)
    for split, where in (("dev", out / "compare" / "validation"), ("test", out / "compare")):
        rows = json.loads((where / "leaderboard.json").read_text())
        md = (where / "leaderboard.md").read_text()
        head = {(r["scenario"], r["language"]) for r in rows if r["metric"] == "ndcg@10"}
        assert head == {("de→en", "de"), ("es→en", "es"), ("lang-en", "all")}, (split, head)
        assert "beir" not in {r["scenario"] for r in rows}  # was the one column
        assert "## Summary: ndcg@10, every language pooled" in md
        assert "| method | L→En |" in md and "| backbone |" in md
        assert "| method | de→en |" in md and "## de→en: every metric (de)" in md
        assert "| de→en | de queries → en documents |" in md
    dev_md = (out / "compare" / "validation" / "leaderboard.md").read_text()
    assert dev_md.startswith("# VALIDATION split (beir: 8 queries")
    assert len(given["dev"]) == 8
    assert (out / "compare" / "ndcg_at_10_by_language.png").is_file()

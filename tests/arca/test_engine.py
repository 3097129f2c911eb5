"""``lira arca`` engine: splits + translation store -> trained Arca checkpoint."""

from __future__ import annotations

import json

import pytest

from pipeline.runconfig import RunConfig

from .conftest import reference_run


@pytest.mark.slow
def test_run_arca_reads_the_store_and_writes_a_checkpoint(models_config, tmp_path):
    from arca.engine import run_arca

    cfg = reference_run(models_config, tmp_path, 24, 8)
    summary = run_arca(cfg, resume=False)
    out = tmp_path / "arca"
    assert summary["step"] == 4 and set(summary["selection"]) <= {"xquad-en", "noisy"}
    assert summary["eval"]["n"] == 8 and summary["eval_before"]["n"] == 8
    # the Actor's picks on the held-out sources, their gold English offered as a third candidate
    actor = summary["eval"]["actor"]
    assert actor["n"] == 8 and actor["k"] == 3 and actor["n_reference"] == 8
    assert 0 <= actor["argmax_reference"] <= 1 and 0 < actor["entropy"] <= 1.0986123 + 1e-6
    assert actor["argmax_best_critic"] == 1  # no critic: every candidate ties at 5.5
    saved = json.loads((tmp_path / "arca" / "summary.json").read_text())
    assert saved["eval"]["actor"]["k"] == 3
    meta = json.loads((out / "final" / "arca_config.json").read_text())
    assert meta["format"] == "arca-v1" and meta["arca"]["steps"] == 4
    assert (out / "summary.json").is_file() and (out / "step-00000004").is_dir()
    # --resume on a finished run does no more steps
    again = run_arca(cfg, resume=True)
    assert again["step"] == 4


def test_run_arca_without_a_store_is_a_clear_error(models_config, tmp_path):
    from arca.engine import run_arca

    cfg = RunConfig(output_dir=str(tmp_path), models=models_config)
    with pytest.raises(FileNotFoundError, match="lira translate"):
        run_arca(cfg, resume=False)

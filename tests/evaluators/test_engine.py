"""``lira eval`` writes strict JSON: a non-finite metric becomes null, never a bare NaN."""

from __future__ import annotations

import json
import math

import pytest

from evaluators import engine as runner
from evaluators.config import EvalConfig
from lira.config import DataConfig
from pipeline.runconfig import RunConfig


def _strict(text: str):
    def no_constants(name):
        raise ValueError(f"bare {name} in JSON")

    return json.loads(text, parse_constant=no_constants)


def test_results_json_has_null_not_nan(tmp_path, tfidf, monkeypatch):
    real_ci = runner.bootstrap_ci

    def ci_with_nan(values, n, seed=0):
        _mean, lo, _hi = real_ci(values, n, seed=seed)
        return float("nan"), lo, float("inf")  # what a metric over zero queries gives

    monkeypatch.setattr(runner, "bootstrap_ci", ci_with_nan)
    monkeypatch.setattr(runner, "encoder_for_eval", lambda cfg, path: ("tfidf", tfidf))
    cfg = RunConfig(
        output_dir=str(tmp_path),
        data=DataConfig(train_languages=["de"], eval_languages=["de"], max_eval_queries=5),
        eval=EvalConfig(scenarios=["en-en", "lang-en"], bootstrap=0,
                        diagnostics=False),
    )  # fmt: skip
    rows = runner.run_eval(cfg)
    assert any(isinstance(r["value"], float) and math.isnan(r["value"]) for r in rows)
    data = _strict((tmp_path / "eval" / "results.json").read_text(encoding="utf-8"))
    assert len(data) == len(rows)
    assert all(r["value"] is None and r["ci_high"] is None for r in data)


def test_missing_eval_model_folder_is_a_clear_error(tmp_path):
    from lasr.eval_models import encoder_for_eval
    from lira.errors import MissingFileError

    with pytest.raises(MissingFileError, match=r"eval.model '.*nope' is not a folder"):
        encoder_for_eval(RunConfig(output_dir=str(tmp_path)), str(tmp_path / "nope"))

"""The models ``lira compare`` collects: missing baselines are said once, or not at all when
the config does not ask for them (issue 52.5)."""

from __future__ import annotations

import logging

import pytest

from evaluators.compare import compared_models
from pipeline.runconfig import RunConfig


@pytest.mark.parametrize(
    ("stages", "warnings"),
    [(["translate", "arca", "lasr", "compare"], 0),
     (["translate", "arca", "lasr", "baselines", "compare"], 1)],
    ids=["no-baselines-stage", "baselines-stage"],
)  # fmt: skip
def test_missing_baselines_are_said_once(tmp_path, models_config, caplog, stages, warnings):
    cfg = RunConfig(output_dir=str(tmp_path), models=models_config, stages=stages)
    assert len(cfg.baselines.methods) > 1
    with caplog.at_level(logging.INFO):
        models = compared_models(cfg)
    assert "backbone" in models and not set(cfg.baselines.methods) & set(models)
    said = [r for r in caplog.records if r.levelno >= logging.WARNING
            and any(m in r.getMessage() for m in cfg.baselines.methods)]  # fmt: skip
    assert len(said) == warnings, [r.getMessage() for r in said]  # was one per method
    # said before the silent model loading and encoding (issue 52.5: ~50 s without a line)
    assert "compare: loading every model under" in caplog.text
    assert "compare: 1 model(s): backbone; each encodes every text once" in caplog.text
    if warnings:
        assert all(m in said[0].getMessage() for m in cfg.baselines.methods)
        assert "run `lira baseline CONFIG` first" in said[0].getMessage()

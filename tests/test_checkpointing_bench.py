"""``benchmarks/baseline_checkpointing.py`` runs end to end on a tiny step (the lead runs it at
its default size; docs/benchmarks.md has the figures)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "checkpointing_bench", REPO / "benchmarks" / "baseline_checkpointing.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("checkpointing_bench", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_benchmark_measures_both_settings_and_prints_the_ratios(models_config, capsys):
    bench = _bench()
    args = ["--model", models_config.backbone, "--batch", "4", "--negatives", "1",
            "--tokens", "128"]  # fmt: skip
    ratios = bench.main(args)
    out = capsys.readouterr().out
    assert "| off |" in out and "| on |" in out and "time on/off" in out
    assert ratios["time_on_over_off"] > 0 and math.isfinite(ratios["time_on_over_off"])
    # a tiny step may stay under the model-loading peak (NaN, said so); a measured one is > 0
    m = ratios["memory_on_over_off"]
    assert (math.isnan(m) and "raise --batch" in out) or m > 0

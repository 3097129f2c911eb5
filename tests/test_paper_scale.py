"""``benchmarks/paper_scale.py --tiny``: every stage runs on random tiny shapes and is measured."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "paper_scale", REPO / "benchmarks" / "paper_scale.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("paper_scale", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_tiny_paper_scale_run_measures_every_stage(tmp_path, capsys):
    bench = _bench()
    costs = bench.main(["--tiny", "--arca-steps", "3", "--lasr-steps", "2", "--out",
                        str(tmp_path)])  # fmt: skip
    printed = capsys.readouterr().out
    by_name = {c.name: c for c in costs}
    assert list(by_name) == ["translate", "arca", "lasr", "baseline", "compare"]
    assert all(not c.error for c in costs), [c.error for c in costs]
    assert by_name["arca"].steps == 3 and by_name["lasr"].steps == 2
    assert all(c.wall > 0 for c in costs)
    for name in ("arca", "lasr", "baseline", "compare"):  # h encoded texts in each of them
        assert by_name[name].encoded > 0 and by_name[name].encode_seconds > 0, name
    # the stages really ran: Arca's and LaSR's folders, the baseline, compare's leaderboards
    assert (tmp_path / "arca" / "final").is_dir() and (tmp_path / "lira-model").is_dir()
    assert (tmp_path / "baselines" / "clear").is_dir()
    assert (tmp_path / "compare" / "leaderboard.md").is_file()
    # the paths users run: the validation split (LaSR's fit, evaluations, compare's rows) ...
    metrics = json.loads((tmp_path / "lasr" / "metrics.json").read_text())
    assert metrics["fixed_fusion"] and [e["step"] for e in metrics["evals"]] == [0, 1, 2]
    assert (tmp_path / "compare" / "validation" / "leaderboard.md").is_file()
    # ... the Actor's pick between two translators on held-out questions at inference
    assert metrics["translation_lookups"] > metrics["missing_translations"]
    board = (tmp_path / "compare" / "leaderboard.md").read_text()
    assert "clear" in board and "fixed fusion" in board
    assert "random weights: cost only, never a result" in printed
    for line in ("stage", "translate", "arca", "lasr", "baseline", "compare", "total", "ratios",
                 "paper Tables 13-14", "plain transformers forward", "GB released"):  # fmt: skip
        assert line in printed, line
    if not bench.torch.cuda.is_available():
        assert "CPU only" in printed and "n/a" in printed


def test_a_failing_stage_is_reported_not_raised():
    bench = _bench()

    def broken() -> None:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")

    cost, result = bench.run_stage("baseline", broken, bench.Meter())
    assert (
        result is None and cost.error == "RuntimeError: CUDA out of memory. Tried to allocate 2 GiB"
    )
    assert cost.row()[-1].startswith("FAILED: RuntimeError")

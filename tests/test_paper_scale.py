"""``benchmarks/paper_scale.py --tiny``: every stage runs on random tiny shapes and is measured."""

from __future__ import annotations

import importlib.util
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
    assert list(by_name) == ["translate", "arca", "lasr", "compare"]
    assert by_name["arca"].steps == 3 and by_name["lasr"].steps == 2
    assert all(c.wall > 0 for c in costs)
    for name in ("arca", "lasr", "compare"):  # h encoded texts in each of them
        assert by_name[name].encoded > 0 and by_name[name].encode_seconds > 0, name
    # the stages really ran: Arca's and LaSR's folders, compare's leaderboard
    assert (tmp_path / "arca" / "final").is_dir() and (tmp_path / "lira-model").is_dir()
    assert (tmp_path / "compare" / "leaderboard.md").is_file()
    assert "random weights: cost only, never a result" in printed
    for line in ("stage", "translate", "arca", "lasr", "compare", "total", "ratios",
                 "paper Tables 13-14", "plain transformers forward"):  # fmt: skip
        assert line in printed, line
    if not bench.torch.cuda.is_available():
        assert "CPU only" in printed and "n/a" in printed

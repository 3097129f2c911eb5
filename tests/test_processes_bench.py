"""``benchmarks/processes.py``: its table and how it reports a failed run (the runs
themselves take minutes; the lead runs the benchmark, CI does not)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "processes_bench", REPO / "benchmarks" / "processes.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("processes_bench", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_table_shows_the_ratio_and_a_failed_run():
    bench = _bench()
    runs = [bench.Run("arca", 1, wall=10.0, examples=32), bench.Run("arca", 2, wall=8.0, examples=64),
            bench.Run("lasr", 1, wall=5.0, examples=32),
            bench.Run("lasr", 2, wall=6.0, examples=64, error="exit 1: RuntimeError: boom")]  # fmt: skip
    lines = bench.table(runs).splitlines()
    assert lines[0].split()[:3] == ["stage", "procs", "wall"]
    arca2 = lines[2].split()
    assert arca2[:6] == ["arca", "2", "8.0", "64", "8.00", "2.50"] and arca2[-1] == "ok"
    lasr2 = lines[4]
    assert "FAILED (exit 1: RuntimeError: boom)" in lasr2 and " - " in lasr2  # no ratio


def test_the_error_named_is_the_ranks_exception_not_the_launchers():
    bench = _bench()
    log = "\n".join([
        "Traceback (most recent call last):",
        "[rank1]: RuntimeError: Expected to have finished reduction in the prior iteration",
        "[rank0]: RuntimeError: Expected to have finished reduction in the prior iteration",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "  error_file: <N/A>",
    ])  # fmt: skip
    assert bench.last_error(log).startswith("[rank1]: RuntimeError: Expected to have finished")
    assert (
        bench.last_error("error: data.path: no such folder") == "error: data.path: no such folder"
    )
    assert bench.last_error("") == "(no output)"


def test_examples_count_every_process_batch(tmp_path):
    bench = _bench()
    cfg = bench.job_config(tmp_path, steps=8, batch=4)
    assert bench.examples("arca", cfg, 1) == 32 and bench.examples("lasr", cfg, 2) == 64
    two_procs = bench.job_config(tmp_path, steps=8, batch=4, procs=2)
    assert two_procs.baselines.batch_size == 8  # a baseline's batch size is the global batch
    assert bench.examples("baseline", two_procs, 2) == 64
    assert bench.command("arca", tmp_path / "c.yaml", 1)[1:4] == ["-m", "lira", "arca"]
    two = bench.command("lasr", tmp_path / "c.yaml", 2)
    assert two[1] == "launch" and two[two.index("--num_processes") + 1] == "2"

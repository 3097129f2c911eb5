"""``lira run`` / ``lira compare`` under a multi-process launcher (issue 38, finding 6): the
stages that do not split their work run on the main process only, only the main process writes
the run's files, ``lira compare`` / ``lira eval`` refuse with one line, and the process group is
ended once, by the CLI, after the command (never by a stage)."""

from __future__ import annotations

import json

import pytest

import pipeline.run as pipeline
from lira.config import save_config
from pipeline.cli import main
from pipeline.runconfig import RunConfig


def _fake_engines(monkeypatch, calls: list[str]) -> None:
    def fake(stage, cfg, opts):
        return calls.append(stage) or {}

    monkeypatch.setattr(pipeline, "run_stage", fake)


@pytest.mark.parametrize("rank", [0, 1])
def test_one_process_stages_run_on_the_main_process_only(tmp_path, monkeypatch, rank):
    calls: list[str] = []
    _fake_engines(monkeypatch, calls)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", str(rank))
    cfg = RunConfig(output_dir=str(tmp_path), stages=["translate", "arca", "lasr", "compare"])
    timings = pipeline.run_pipeline(cfg)
    if rank == 0:
        assert calls == ["translate", "arca", "lasr", "compare"]
        assert json.loads((tmp_path / "stages" / "compare.json").read_text())["stage"] == "compare"
        assert (tmp_path / "run_summary.json").is_file() and (tmp_path / "config.yaml").is_file()
    else:  # every training stage, not compare; no file of the run written twice
        assert calls == ["translate", "arca", "lasr"] and timings["compare"] == "main process"
        assert not list((tmp_path / "stages").iterdir())
        assert not (tmp_path / "run_summary.json").exists()
        assert not (tmp_path / "config.yaml").exists()


@pytest.mark.parametrize("command", ["compare", "eval"])
def test_compare_and_eval_refuse_a_launcher_in_one_line(tmp_path, monkeypatch, capsys, command):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    save_config(RunConfig(output_dir=str(tmp_path)), tmp_path / "run.yaml")
    assert main([command, str(tmp_path / "run.yaml")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert f"lira {command} does not split its work across processes" in err
    assert "without accelerate launch" in err


def test_the_cli_ends_the_process_group_once_after_the_command(tmp_path, monkeypatch):
    """No stage destroys the group (a later stage needs it); the CLI does, after the command."""
    import torch.distributed as dist

    events: list[str] = []
    monkeypatch.setattr(pipeline, "run_pipeline", lambda cfg, **kw: events.append("run"))
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "destroy_process_group", lambda: events.append("destroy"))
    save_config(RunConfig(output_dir=str(tmp_path)), tmp_path / "run.yaml")
    assert main(["run", str(tmp_path / "run.yaml")]) == 0
    assert events == ["run", "destroy"]

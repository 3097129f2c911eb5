"""The ``lira`` command: every subcommand has a working --help; config errors exit cleanly."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lira.cli import COMMANDS, build_parser, main


@pytest.mark.parametrize("command", [*COMMANDS, "baseline-merge"])
def test_help_describes_the_subcommand(command, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "usage: lira" in out
    if command in COMMANDS:
        section = COMMANDS[command][1]
        assert f"{section.__name__} keys" in out


def test_python_dash_m_lira_runs():
    res = subprocess.run(
        [sys.executable, "-m", "lira", "--help"], capture_output=True, text=True, check=False
    )
    assert res.returncode == 0 and "translate" in res.stdout


def test_bad_override_is_a_clear_error_with_exit_code_2(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("arca:\n  steps: 3\n")
    code = main(["arca", str(cfg), "arca.pool_size=0"])
    assert code == 2
    assert "arca.pool_size" in capsys.readouterr().err


def test_overrides_after_options_are_overrides_and_stray_words_an_error(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("arca:\n  steps: 3\n")
    code = main(["arca", str(cfg), "--output-dir", str(tmp_path / "o"), "arca.pool_size=0"])
    assert code == 2
    assert "arca.pool_size" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["arca", str(cfg), "--output-dir", str(tmp_path / "o"), "--bogus"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err

"""``lira`` on the command line (issue 40 item 7): -v / -q anywhere, --version, and the data.*
and models.* keys in every command's --help (item 5)."""

from __future__ import annotations

import logging
import os

import pytest

from lira import __version__
from pipeline.cli import COMMANDS, build_parser, main


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_of_every_command_lists_data_and_models_keys(command):
    sub = build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    text = sub.format_help()
    for key in ("data.*", "corpus_language", "query_language", "dev_fraction", "models.*",
                "backbone", "backbone_pooling"):  # fmt: skip
        assert key in text, (command, key)


def _levels(monkeypatch) -> list[int]:
    seen: list[int] = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: seen.append(kw["level"]))
    return seen


@pytest.mark.parametrize(
    "flags, level",
    [([], logging.INFO), (["-v"], logging.DEBUG), (["-q"], logging.WARNING),
     (["--quiet"], logging.WARNING), (["-q", "-v"], logging.DEBUG)],
)  # fmt: skip
def test_verbosity_flags_work_anywhere_on_the_line(tmp_path, capsys, monkeypatch, flags, level):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("arca:\n  steps: 3\n")
    for where in ("end", "middle", "front"):
        monkeypatch.delenv("TQDM_DISABLE", raising=False)
        seen = _levels(monkeypatch)
        args = ["arca", str(cfg), "arca.pool_size=0"]
        args = {"end": args + flags, "middle": args[:1] + flags + args[1:],
                "front": flags + args}[where]  # fmt: skip
        assert main(args) == 2, (where, flags)
        assert seen == [level], (where, flags)
        err = capsys.readouterr().err
        assert "arca.pool_size" in err
        assert ("Traceback" in err) == (level == logging.DEBUG), (where, flags)
        assert ("TQDM_DISABLE" in os.environ) == (level == logging.WARNING)  # -q: no bars


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"lira {__version__}"

"""The ``lira`` command: every subcommand has a working --help; config errors exit cleanly."""

from __future__ import annotations

import errno
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lira.config import field_docs, open_sections
from pipeline.cli import COMMANDS, build_parser, describe_config, main
from pipeline.runconfig import config_sections


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


@pytest.mark.parametrize("section", config_sections(), ids=lambda c: c.__name__)
def test_every_config_field_has_a_one_line_doc_shown_by_help(section):
    """Each field of each config section has an attribute docstring, and --help prints it."""
    import dataclasses

    docs = field_docs(section)
    names = [f.name for f in dataclasses.fields(section)]
    assert [n for n in names if not docs.get(n)] == []
    text = describe_config(section)
    opened = open_sections(section)
    for name in names:
        if opened and name == opened[0]:  # one YAML section per entry, each described below
            sections = list(opened[1])
            assert f"  {', '.join(sections)}: sections" in text and f"      {docs[name]}" in text
            assert all(f"{s}.* (a section of {section.__name__}):" in text for s in sections)
        else:
            assert f"  {name}: " in text and f"      {docs[name]}" in text


def test_field_docs_reads_attribute_docstrings():
    """field_docs maps a field to the docstring right under it, and skips undocumented ones."""
    import dataclasses

    @dataclasses.dataclass
    class Demo:
        a: int = 1
        """First.

        More text."""
        b: int = 2
        c: str = "x"
        """Third."""

    assert field_docs(Demo) == {"a": "First.", "c": "Third."}


def test_the_cli_starts_without_torch():
    """``lira --help`` imports no engine: stage modules (and torch) load when a stage runs."""
    code = "import sys, pipeline.cli; sys.exit(int('torch' in sys.modules))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr


ROOT = Path(__file__).resolve().parents[2]
TORCH_AFTER = (
    "import sys\nfrom pipeline.cli import main\ntry:\n    sys.exit(main(sys.argv[1:]))\nfinally:\n"
    "    print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))"
)
"""``lira ARGS`` in a subprocess that prints the torch modules it imported (``[]``: none)."""


def test_loading_a_config_imports_no_torch():
    """Issue 60.7: loading a config imported torch (the baselines' recipes sat in the method
    files), so a config error took 2.6 s; the recipes now load without it."""
    code = (
        "import sys\nfrom pipeline.runconfig import load_config\n"
        "cfg = load_config('configs/demo.yaml', ['baselines.clear.tau=0.1'])\n"
        "assert cfg.baselines.recipes['clear'].tau == 0.1\n"
        "sys.exit(int('torch' in sys.modules))"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=False, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["lasr", "configs/demo.yaml", "lasr.nosuch=1"], 2),
        (["baseline", "configs/demo.yaml", "baselines.clear.nosuch=1"], 2),
        (["baseline", "--help"], 0),
    ],
    ids=["unknown-key", "unknown-recipe-key", "baseline-help"],
)
def test_a_config_error_and_help_import_no_torch(args, code):
    """Issue 60.7: a config error is one ``lira:`` line naming the key, found before torch is
    imported (it was 2.6 s of imports before; now a fraction of a second)."""
    res = subprocess.run([sys.executable, "-c", TORCH_AFTER, *args], cwd=ROOT,
                         capture_output=True, text=True, check=False, timeout=120)  # fmt: skip
    assert res.returncode == code, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "[]"  # no torch module was imported
    if code:
        err = res.stderr.strip()
        assert err == err.splitlines()[0] and err.startswith("lira: config key "), err
        assert args[-1].split("=")[0] in err


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


def test_overrides_after_a_list_option_are_overrides(tmp_path, capsys, monkeypatch):
    """`--methods clear baselines.steps=5`: the override is not taken for a method name (it was,
    and the engine raised a traceback); an unknown name is a one-line usage error."""
    from pipeline import cli

    cfg = tmp_path / "c.yaml"
    cfg.write_text("arca:\n  steps: 3\n")
    seen = []
    monkeypatch.setattr(cli, "_dispatch", seen.append)
    argv = ["baseline", str(cfg), "--methods", "clear", "jsd", "baselines.steps=5", "seed=3"]
    assert main(argv) == 0
    assert seen[0].methods == ["clear", "jsd"]
    assert seen[0].overrides == ["baselines.steps=5", "seed=3"]
    assert main(["ablate", str(cfg), "--rows", "no-queue", "arca.steps=2"]) == 0
    assert (seen[1].rows, seen[1].overrides) == (["no-queue"], ["arca.steps=2"])
    for bad, says in ((["--rows", "no-such-row"], "unknown no-such-row; choose from"),
                      (["--rows", "arca.steps=2"], "needs at least one name")):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            main(["ablate", str(cfg), *bad])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err


def test_an_unknown_baseline_method_is_a_config_error(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output_dir: {tmp_path / 'out'}\n")
    assert main(["baseline", str(cfg), "--methods", "nope"]) == 2
    err = capsys.readouterr().err
    assert "'baselines.methods': unknown method(s) ['nope']" in err and "Traceback" not in err


# ------------------------------------------------------------------------------ user errors
def _xquad_folder(tmp_path, payload: bytes):
    folder = tmp_path / "xq"
    folder.mkdir(parents=True)
    for lang in ("en", "de", "es", "ru"):
        (folder / f"{lang}.json").write_bytes(payload)
    return folder


@pytest.mark.parametrize(
    ("args", "code", "pattern"),
    [
        (["lasr.fusion_heads=0"], 2, r"lira: config key 'lasr.fusion_heads': must be >= 1"),
        (["eval.metrics=[bogus]"], 2, r"'eval.metrics': unknown \['bogus'\]"),
        (["output_dir="], 2, r"'output_dir': must name a folder"),
        (["data.path=/nonexistent/xquad"], 1, r"lira: XQuAD-R folder /nonexistent/xquad does not"),
        (["data.path={xq_truncated}"], 1, r"lira: .*en.json: record line 1: field '<json>'.*"
                                           r"truncated or not JSON"),
        (["data.path={xq_bad_utf8}"], 1, r"lira: .*en.json: record line 1: field '<bytes>': "
                                         r"invalid UTF-8.*save the file as UTF-8"),
        (["data.path={xq_surrogate}"], 1, r"lira: .*en.json: record <document>: field "
                                          r"'data\[0\]\.title': holds a lone surrogate"),
        (["arca.seed=-1"], 2, r"lira: config key 'arca.seed': must be in \[0, 2\*\*32 - 1\]"),
        (["arca.adaptor_lr=1e30"], 2, r"lira: config key 'arca.adaptor_lr': learning rate 1e\+30"),
        (["tune_translator.name=../../x"], 2, r"'tune_translator.name': '../../x' is used as a "
                                              r"folder name"),
    ],
    ids=["fusion-heads", "bogus-metric", "empty-output-dir", "missing-data", "truncated-json",
         "invalid-utf8", "lone-surrogate", "negative-seed", "huge-lr", "name-leaves-output-dir"],
)  # fmt: skip
def test_user_errors_are_one_line_without_traceback(tmp_path, capsys, args, code, pattern):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output_dir: {tmp_path / 'out'}\narca:\n  steps: 3\n")
    folders = {
        "xq_truncated": _xquad_folder(tmp_path / "a", b'{"data": [{"paragraphs": ['),
        "xq_bad_utf8": _xquad_folder(tmp_path / "b", b'{"data": ["\xff"]}'),
        "xq_surrogate": _xquad_folder(tmp_path / "c", b'{"data": [{"title": "\\ud800"}]}'),
    }
    args = [a.format(**folders) for a in args]
    assert main(["translate", str(cfg), *args]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert re.search(pattern, err[-1]), err
    assert not any("Traceback" in line for line in err)


def test_internal_bugs_keep_their_traceback(monkeypatch, tmp_path):
    import pipeline.run as run

    def engine(cfg, args):
        raise ValueError("an internal bug")

    monkeypatch.setattr(run, "run_command", engine)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("arca:\n  steps: 3\n")
    with pytest.raises(ValueError, match="an internal bug"):
        main(["arca", str(cfg)])


@pytest.mark.parametrize(
    ("exc", "code", "pattern"),
    [
        (KeyboardInterrupt(), 130, r"^lira: interrupted$"),
        (OSError(errno.ENOSPC, "No space left on device"), 1, r"No space left.*free disk space"),
        (PermissionError(errno.EACCES, "Permission denied"), 1, r"Permission denied.*writable"),
        (FileNotFoundError("no such model folder: x"), 1, r"^lira: no such model folder: x$"),
    ],
    ids=["ctrl-c", "disk-full", "permission", "missing-path"],
)
def test_environment_errors_are_one_line(monkeypatch, tmp_path, capsys, exc, code, pattern):
    import pipeline.run as run

    def engine(cfg, args):
        raise exc

    monkeypatch.setattr(run, "run_command", engine)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("arca:\n  steps: 3\n")
    assert main(["arca", str(cfg)]) == code
    assert re.search(pattern, capsys.readouterr().err.strip())


@pytest.mark.parametrize(
    ("yaml_bytes", "extra", "pattern"),
    [
        (b"arca:\n  steps: 3\n# Gr\xf6\xdfe\n", [], r"is not UTF-8 text.*save it as UTF-8"),
        (b"lasr:\n  fusion_heads: 0\n", [], r"'lasr.fusion_heads': must be >= 1"),
        (b"arca:\n  steps: 3\n", ["lasr.save_every=0"], r"'lasr.save_every': must be >= 1"),
    ],
    ids=["non-utf8-yaml", "fusion-heads-0", "save-every-0"],
)
def test_cli_subprocess_user_error_has_no_traceback(tmp_path, yaml_bytes, extra, pattern):
    cfg = tmp_path / "c.yaml"
    cfg.write_bytes(yaml_bytes)
    res = subprocess.run([sys.executable, "-m", "lira", "lasr", str(cfg), *extra],
                         capture_output=True, text=True, check=False, timeout=120)  # fmt: skip
    assert res.returncode != 0
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lira: ") and re.search(pattern, lines[0])


def test_translate_exits_non_zero_when_nothing_could_be_translated(tmp_path, capsys):
    """The issue's probe: a bad base_url made every item fail, and `lira translate` exited 0."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"output_dir: {tmp_path / 'out'}\n"
        "data: {max_train_queries: 2, max_eval_queries: 1, train_languages: [de], "
        "eval_languages: [de]}\n"
        "translation:\n  num_candidates: 1\n  mt_translators:\n"
        "    - {name: dead, kind: openai, role: mt, model: m, base_url: 'http://127.0.0.1:9/v1',"
        " max_retries: 0, timeout_s: 5}\n"
    )
    assert main(["translate", str(cfg)]) == 1
    out, err = capsys.readouterr()
    assert "translation failures per translator:" in out and "dead: 3 of 3 texts failed" in out
    last = err.strip().splitlines()[-1]
    assert re.match(r"lira: nothing could be translated \(dead: 3 of 3 texts failed \(last "
                    r"error: .*\)\); check each translator's base_url", last), last  # fmt: skip
    assert "Traceback" not in err
    summary = json.loads((tmp_path / "out" / "translate_summary.json").read_text())
    assert summary["failed"] == 3 and summary["generated"] == 0  # the summary is still written


def test_lasr_without_a_trained_arca_stops_in_one_line(tmp_path, capsys):
    """Issue 52.5: `lira lasr` on an output folder with no Arca checkpoint trained an untrained
    Adaptor and exited 0 with two warnings; it now stops naming the folder and the fix."""
    out = tmp_path / "out"
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output_dir: {out}\n")
    assert main(["lasr", str(cfg)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert err[0].startswith(f"lira: no trained Arca at {out / 'arca' / 'final'} ")
    assert "run `lira arca CONFIG` first" in err[0]
    assert not (out / "lira-model").exists() and not (out / "lasr").exists()


# ------------------------------------------- issue 60, item 7: user errors before the engines load
def _no_engines(monkeypatch) -> None:
    """``pipeline.run`` (torch, transformers, the models) may not be imported before the error."""
    import pipeline.cli as cli

    def engines():
        raise AssertionError("the engines were imported before the user error was found")

    monkeypatch.setattr(cli, "_engines", engines)


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (["arca", "models.backbone={missing}"], "models.backbone"),
        (["eval", "models.backbone={missing}"], "models.backbone"),
        (["run", "stages=[translate, arca]", "models.encoder={missing}"], "models.encoder"),
    ],
    ids=["arca", "eval", "run"],
)
def test_a_missing_model_folder_is_reported_before_the_engines_load(
    monkeypatch, tmp_path, capsys, args, key
):
    """A missing model folder took 13-25 s to report (torch, the data, the other model)."""
    _no_engines(monkeypatch)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("{}\n")
    missing = tmp_path / "no-such-model"
    argv = [args[0], str(cfg), "--output-dir", str(tmp_path / "o")]
    assert main([*argv, *(a.format(missing=missing) for a in args[1:])]) == 1
    err = capsys.readouterr().err.strip()
    assert err == err.splitlines()[0] and err.startswith(f"lira: {key}: model folder {missing}")
    assert "does not exist" in err


def test_a_folder_in_use_is_reported_before_the_engines_load(monkeypatch, tmp_path, capsys):
    from tests.test_untrusted import HOLD

    _no_engines(monkeypatch)
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        cfg = tmp_path / "c.yaml"
        cfg.write_text("{}\n")
        assert main(["lasr", str(cfg), "--output-dir", str(out)]) == 1
        assert f"{out} is in use by another LiRA run" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()


def test_only_the_models_a_command_loads_are_checked():
    from pipeline.preflight import models_used
    from pipeline.runconfig import load_config

    cfg = load_config(None, ["stages=[translate, baselines]"])
    assert models_used(cfg, "translate") == [] and models_used(cfg, "run") == ["backbone"]
    assert models_used(cfg, "lasr") == ["backbone", "encoder"]
    assert models_used(load_config(None, ["eval.model=out/lira-model"]), "eval") == []


@pytest.mark.parametrize("command", ["translate", "arca", "lasr", "eval"])
def test_a_bad_data_record_is_reported_before_the_engines_load(
    monkeypatch, tmp_path, capsys, command
):
    """Issue 60.7: a malformed record stopped a command only after torch and the models had
    loaded; the data is read first now (no torch needed) and handed on to the engine."""
    _no_engines(monkeypatch)
    folder = tmp_path / "beir"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n{not json\n', "utf-8")
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "y"}\n', "utf-8")
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", "utf-8")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"data: {{format: beir, path: '{folder}', train_languages: [de]}}\n")
    assert main([command, str(cfg), "--output-dir", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip()
    assert err == err.splitlines()[0], err
    assert err.startswith(f"lira: {folder / 'corpus.jsonl'}: record 2: field '<json>'"), err
    assert "fix the record" in err


@pytest.mark.parametrize("command", ["arca", "lasr"])
def test_a_damaged_g_cache_is_reported_before_the_engines_load(
    monkeypatch, tmp_path, capsys, command
):
    """Issue 60.7's leftover: a damaged frozen-g cache stopped ``lira arca`` only when the cache
    opened, after torch and the models (13-25 s); its schema is read first now."""
    from arca.g_cache_file import cache_path

    _no_engines(monkeypatch)
    out = tmp_path / "o"
    cache = cache_path(out)
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"not an sqlite file" * 300)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("{}\n")
    assert main([command, str(cfg), "--output-dir", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == err.splitlines()[0], err
    assert err == (f"lira: frozen-g cache {cache}: file is not a database; delete the file (it "
                   "is rebuilt) or set models.encoder_cache: false"), err  # fmt: skip
    from pipeline.preflight import preflight
    from pipeline.runconfig import load_config

    preflight(load_config(str(cfg), [f"output_dir={out}", "models.encoder_cache=false"]), command)
    preflight(load_config(str(cfg), [f"output_dir={out}"]), "translate")  # g is not loaded


def test_the_splits_read_early_are_handed_on_not_read_again(monkeypatch):
    from lira.data import splits as data_splits
    from pipeline.runconfig import load_config

    cfg = load_config(None, [])  # the shipped demo data
    monkeypatch.setattr(data_splits, "EARLY", {})
    reads = []
    real = data_splits.read_splits
    monkeypatch.setattr(data_splits, "read_splits", lambda c: reads.append(c) or real(c))
    data_splits.load_splits_early(cfg.data)
    first = data_splits.load_splits(cfg.data)  # the engine's load: the early splits
    assert len(reads) == 1 and data_splits.EARLY == {}
    assert data_splits.load_splits(cfg.data) is not first and len(reads) == 2  # a later one reads


@pytest.mark.parametrize(
    ("command", "change"), [("arca", "arca.actor_lr=0.5"), ("lasr", "lasr.lr=0.5")]
)
def test_resume_with_a_changed_config_is_refused_before_the_engines_load(
    monkeypatch, tmp_path, capsys, command, change
):
    """Issue 60.7: ``--resume`` under another config was refused by the trainer, after torch, the
    data and the models; the saved fingerprint is compared first now (the same check)."""
    from lira.checkpoint.fingerprint import write_fingerprint
    from lira.checkpoint.folders import step_dir
    from pipeline.preflight import RESUMES
    from pipeline.runconfig import load_config

    _no_engines(monkeypatch)
    out = tmp_path / "out"
    folder, fingerprint, _ = RESUMES[command]
    saved = step_dir(out / folder, 10)
    saved.mkdir(parents=True)
    write_fingerprint(saved, fingerprint(load_config(None, [f"output_dir={out}"])))
    cfg = tmp_path / "c.yaml"
    cfg.write_text("{}\n")
    assert main([command, str(cfg), "--output-dir", str(out), "--resume", change]) == 1
    err = capsys.readouterr().err.strip()
    assert err == err.splitlines()[0], err
    assert err.startswith(f"lira: cannot resume {RESUMES[command][2]} from {saved}: it was "
                          f"trained with another config ({change.split('=')[0]}: "), err  # fmt: skip
    assert "run without --resume" in err

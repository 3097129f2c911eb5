"""kill -9 + ``--resume`` of the real ``lira arca`` / ``lira lasr`` processes reaches the
uninterrupted run's weights bit for bit (issue 18). One kill per stage, after the first
checkpoint; ``benchmarks/kill_resume.py`` runs many trials at random kill points."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

from arca.config import ArcaConfig
from lasr.config import LaSRConfig
from lira.config import DataConfig, save_config
from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from pipeline.runconfig import RunConfig

REPO = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "kill_resume", REPO / "benchmarks" / "kill_resume.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("kill_resume", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _base(tmp: Path, models_config) -> tuple[Path, RunConfig]:
    """A config (reference translators only, no critic) and an output folder with its store."""
    from lira.data.splits import load_splits
    from lira.translation.engine import run_translate, store_path
    from lira.translation.store import TranslationStore

    base = tmp / "base"
    cfg = RunConfig(
        output_dir=str(base),
        models=models_config,
        data=DataConfig(
            train_languages=["de"], eval_languages=["de"], max_train_queries=12, max_eval_queries=4
        ),
        translation=TranslationConfig(
            pass_at_k=0,
            num_candidates=2,
            mt_translators=[
                TranslatorConfig(name="xquad-en", kind="reference", role="mt", train_only=True),
                TranslatorConfig(name="machine", kind="reference", role="mt"),
            ],
            critic=CriticConfig(kind="none"),
        ),
        arca=ArcaConfig(steps=10, batch_size=4, log_every=2, save_every=2),
        lasr=LaSRConfig(
            steps=10,
            batch_size=4,
            fusion_dim=32,
            fusion_layers=1,
            num_negatives=4,
            save_every=2,
            log_every=2,
        ),
    )
    splits = load_splits(cfg.data)
    rng = random.Random(0)
    rows = []
    for r in splits.train_sources + splits.eval_sources:
        words = splits.dataset.question("en", r.id.split("@")[0]).text.split()
        rows.append((r.text, r.lang, " ".join(w for w in words if rng.random() > 0.3), r.id))
    with TranslationStore(store_path(cfg)) as store:
        store.add_reference("machine", rows)
    run_translate(cfg)  # fills the xquad-en references (nothing to generate)
    save_config(cfg, tmp / "run.yaml")
    return base, cfg


@pytest.mark.slow
def test_kill_9_and_resume_gives_the_uninterrupted_weights(tmp_path, models_config):
    kr = _bench()
    base, _ = _base(tmp_path, models_config)
    # jobs=3: the Arca trial and both LaSR runs go at once (each a separate process and folder)
    res = kr.run_benchmark(tmp_path / "run.yaml", [], ["arca", "lasr"], trials=1, kills=1,
                           seed=0, workdir=tmp_path / "work", after_checkpoint=True,
                           base=(base, None), timeout=300, jobs=3)  # fmt: skip
    print("\n" + kr.summary_table(res))
    for stage in ("arca", "lasr"):
        r = res[stage]
        assert r["failures"] == 0, (stage, r["problems"])
        assert r["killed"] == 1, (stage, r["kill_points"])  # killed after a checkpoint, resumed
        assert r["kill_points"][0]["latest"] is not None
        assert r["identical"] == 1, (stage, r["max_diff"])


DIE_IN_SAVE = """
import os, signal, sys
import lira.checkpoint.folders as folders
real, seen = folders.write_manifest, []
def write_manifest(tmp):  # the 2nd step save of LaSR: its files are written, not yet renamed
    if os.path.basename(str(tmp)).startswith(".step-"):
        seen.append(tmp)
        if len(seen) == 2:
            os.kill(os.getpid(), signal.SIGKILL)
    return real(tmp)
folders.write_manifest = write_manifest
from pipeline.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_kill_9_of_lira_lasr_during_a_save_then_resume_gives_the_uninterrupted_weights(
    tmp_path, models_config
):
    """Issue 51, untried case 1: ``lira lasr`` SIGKILLed inside a step save (files written,
    manifest not, folder not renamed); ``--resume`` drops the half save, resumes from the
    previous step and ends on the uninterrupted run's weights, bit for bit."""
    import subprocess

    kr = _bench()
    base, _ = _base(tmp_path, models_config)
    st = kr.stages_for([])
    config = tmp_path / "run.yaml"
    kr.run_reference(st["arca"], config, [], base, tmp_path / "ref-arca", 600)
    kr.run_reference(st["lasr"], config, [], tmp_path / "ref-arca", tmp_path / "ref-lasr", 600)
    killed = tmp_path / "killed"
    import shutil

    shutil.copytree(tmp_path / "ref-arca", killed, symlinks=True)
    env = {**kr._env(), "PYTHONPATH": str(REPO)}
    cmd = ["lasr", str(config), "--output-dir", str(killed)]
    run = subprocess.run([sys.executable, "-c", DIE_IN_SAVE, *cmd], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == -9, run.stderr[-2000:]
    assert kr._leftovers(killed), "the kill did not land inside a save"
    steps = [p.name for p in (killed / "lasr").glob("step-*")]
    assert steps == ["step-00000002"], steps
    again = subprocess.run([sys.executable, "-m", "lira", *cmd, "--resume"], env=env, cwd=REPO,
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    assert not kr._leftovers(killed)
    same, worst, problems = kr.compare_weights(tmp_path / "ref-lasr", killed, ["lira-model"])
    assert same and not problems, (worst, problems)


@pytest.mark.slow
def test_two_lira_translate_on_one_store_at_once_keep_each_row_once(tmp_path):
    """Issue 51, untried case 2: two ``lira translate`` (two output folders, one absolute
    store) at the same time: both finish, and the store holds each translation once, as one
    run alone writes it."""
    import sqlite3
    import subprocess

    import yaml

    from tests.translation.fake_openai import FakeServer

    server = FakeServer(delay_s=0.05).start()
    store = tmp_path / "shared" / "store.sqlite"
    doc = {
        "data": {"train_languages": ["de", "es"], "eval_languages": ["de"],
                 "max_train_queries": 12, "max_eval_queries": 4},
        "translation": {
            "store": str(store), "pass_at_k": 1, "num_candidates": 1, "commit_every": 4,
            "llm_translators": [{"name": "t0", "kind": "openai", "model": "m0",
                                 "base_url": server.url, "max_retries": 0, "timeout_s": 30}],
            "critic": {"kind": "none"},
        },
    }  # fmt: skip
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    env = {**_bench()._env(), "PYTHONPATH": str(REPO)}
    try:
        runs = [
            subprocess.Popen([sys.executable, "-m", "lira", "translate", str(cfg), "--output-dir",
                              str(tmp_path / f"out{i}")], env=env, cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(2)
        ]  # fmt: skip
        results = [(p.wait(timeout=600), p.stderr.read()) for p in runs]
        alone = tmp_path / "alone.yaml"
        doc["translation"]["store"] = str(tmp_path / "alone" / "store.sqlite")
        alone.write_text(yaml.safe_dump(doc))
        one = subprocess.run([sys.executable, "-m", "lira", "translate", str(alone),
                              "--output-dir", str(tmp_path / "out-alone")], env=env, cwd=REPO,
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    finally:
        server.stop()
    for rc, err in results:
        assert rc == 0 and "Traceback" not in err, err[-2000:]
    assert one.returncode == 0, one.stderr[-2000:]

    def rows(path):
        with sqlite3.connect(path) as db:
            return sorted(db.execute("SELECT key, text, status FROM translations").fetchall())

    shared, single = rows(store), rows(tmp_path / "alone" / "store.sqlite")
    assert len(shared) == len({r[0] for r in shared}) == len(single) > 0
    assert [r[0] for r in shared] == [r[0] for r in single]
    assert all(r[2] == "ok" for r in shared)

"""Every baseline fine-tunes the demo backbone on the demo data and lowers its training loss."""

from __future__ import annotations

import json
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest

from lira.baselines.trainer import (
    ContrastiveTrainer,
    _splits,
    build_examples,
    load_baseline,
    run_baselines,
    save_baseline,
)
from lira.cli import main
from lira.config import BaselinesConfig, DataConfig, RunConfig, save_config

pytestmark = pytest.mark.slow

TEXTS = ["Wie viele Punkte gab die Verteidigung ab?", "The Panthers defense gave up 308 points."]


def _cfg(models_config, out: Path, **baselines) -> RunConfig:
    bc = dict(steps=6, batch_size=8, lr=1e-3, hard_negatives=1)
    bc.update(baselines)
    return RunConfig(
        output_dir=str(out),
        models=models_config,
        data=DataConfig(train_languages=["de", "es"], max_train_queries=12),
        baselines=BaselinesConfig(**bc),
    )


@pytest.fixture(scope="module")
def trained(models_config, tmp_path_factory):
    out = tmp_path_factory.mktemp("baselines")
    cfg = _cfg(models_config, out)
    save_config(cfg, out / "run.yaml")
    assert main(["baseline", str(out / "run.yaml")]) == 0  # the `lira baseline` command
    summary = json.loads((out / "baselines" / "summary.json").read_text())
    return cfg, out, summary


@pytest.mark.parametrize("method", ["infonce", "clear", "lancer", "jsd", "merging"])
def test_baseline_lowers_training_loss(trained, method):
    _, out, summary = trained
    stats = summary[method]
    assert np.isfinite(stats["loss_before"]) and np.isfinite(stats["loss_after"])
    assert stats["loss_after"] < stats["loss_before"], stats
    folder = out / "baselines" / method
    assert (folder / "config.json").is_file() and (folder / "lira_baseline.json").is_file()
    assert list(folder.glob("*.safetensors"))


def test_merging_keeps_both_parts(trained):
    _, _, summary = trained
    parts = summary["merging"]["parts"]
    assert len(parts) == 2
    for name, p in parts.items():
        assert Path(p["path"]).is_dir(), name
        assert p["loss_after"] < p["loss_before"], (name, p)


def test_resume_skips_trained_methods(trained, caplog):
    cfg, out, summary = trained
    mtime = (out / "baselines" / "clear" / "config.json").stat().st_mtime
    with caplog.at_level("INFO"):
        again = run_baselines(cfg, Namespace(methods=["clear"], resume=True))
    assert again["clear"] == summary["clear"]
    assert (out / "baselines" / "clear" / "config.json").stat().st_mtime == mtime


@pytest.mark.parametrize("lora", [False, True])
def test_checkpoint_loads_in_fresh_process(models_config, tmp_path, lora):
    cfg = _cfg(models_config, tmp_path, lora=lora, steps=3, hard_negatives=0)
    parallel, retrieval = _splits(cfg)
    examples = build_examples(parallel, retrieval)  # no mined negatives: K = M = 0
    from lira.models import load_backbone

    trainer = ContrastiveTrainer(
        load_backbone(cfg.models), cfg.baselines, "clear", examples, retrieval.corpus
    )
    trainer.train(3)
    model = trainer.finish()
    mine = model.encode(TEXTS, kind="query")
    base = load_backbone(cfg.models).encode(TEXTS, kind="query")
    assert not np.allclose(mine, base, atol=1e-5), "training did not change the weights"
    path = save_baseline(model, tmp_path / "ckpt", cfg.models, {"method": "clear"})
    code = (
        "import sys, numpy as np; from lira.baselines.trainer import load_baseline;"
        f"np.save(sys.argv[1], load_baseline(sys.argv[2]).encode({TEXTS!r}, kind='query'))"
    )
    npy = tmp_path / "emb.npy"
    subprocess.run([sys.executable, "-c", code, str(npy), str(path)], check=True, timeout=120)
    fresh = np.load(npy)
    np.testing.assert_allclose(fresh, mine, atol=1e-5)
    np.testing.assert_allclose(load_baseline(path).encode(TEXTS, kind="query"), mine, atol=1e-5)


def test_bad_method_and_missing_checkpoint(models_config, tmp_path):
    cfg = _cfg(models_config, tmp_path)
    with pytest.raises(ValueError, match="unknown baseline methods"):
        run_baselines(cfg, Namespace(methods=["nope"], resume=False))
    with pytest.raises(FileNotFoundError, match=r"lira_baseline\.json"):
        load_baseline(tmp_path)

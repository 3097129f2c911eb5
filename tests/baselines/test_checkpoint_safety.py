"""Baselines (issue 18): a non-finite loss or gradient skips the step (counted) and never reaches
the saved model; ``--resume`` refuses a method trained with another config."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from lira.baselines.clear import ClearConfig
from lira.baselines.config import BaselinesConfig
from lira.baselines.contrastive import ContrastiveTrainer
from lira.baselines.data import build_examples, training_splits
from lira.baselines.engine import run_baselines
from lira.checkpoint.fingerprint import FINGERPRINT_FILE
from lira.config import DataConfig
from lira.errors import CheckpointError
from pipeline.runconfig import RunConfig

pytestmark = pytest.mark.slow


def _recipe(bc: BaselinesConfig, name: str, **changes) -> BaselinesConfig:
    """``bc`` with fields of the recipe ``baselines.<name>`` changed."""
    recipes = {**bc.recipes, name: dataclasses.replace(bc.recipes[name], **changes)}
    return dataclasses.replace(bc, recipes=recipes)


def _cfg(models_config, out: Path, **baselines) -> RunConfig:
    bc = dict(methods=["jsd"], steps=2, batch_size=8, lr=1e-3,
              recipes={"clear": ClearConfig(negatives=0)})  # fmt: skip
    bc.update(baselines)
    return RunConfig(
        output_dir=str(out),
        models=models_config,
        data=DataConfig(train_languages=["de", "es"], max_train_queries=12),
        baselines=BaselinesConfig(**bc),
    )


@pytest.mark.filterwarnings("ignore:Detected call of")  # every step is skipped
@pytest.mark.parametrize("where", ["loss", "gradient"])
def test_nonfinite_steps_are_skipped_and_the_saved_model_is_finite(models_config, tmp_path, where):
    from lira.models import load_backbone

    cfg = _cfg(models_config, tmp_path, steps=3)
    parallel, retrieval, _ = training_splits(cfg)
    examples = build_examples(parallel, retrieval)
    trainer = ContrastiveTrainer(
        cfg.baselines, load_backbone(cfg.models), "clear", examples, retrieval.corpus,
        tmp_path / "ckpt", models_cfg=cfg.models,
    )  # fmt: skip
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    real = trainer.loss

    def poisoned(batch):
        loss = real(batch)
        if where == "loss":
            return loss * float("nan")
        # finite loss, NaN gradients (d sqrt(x)/dx at 0 is inf, times 0)
        zero = sum(p.sum() for p in trainer.model.parameters() if p.requires_grad) * 0.0
        return loss + torch.sqrt(zero * 0.0)

    trainer.loss = poisoned
    trainer.train(steps=3)
    assert trainer.nonfinite_steps == 3
    for k, v in trainer.model.state_dict().items():
        assert torch.equal(v, before[k]), k
    path = trainer.finalize()
    weights = load_file(str(path / "model.safetensors"))
    assert all(bool(torch.isfinite(v).all()) for v in weights.values() if v.is_floating_point())


def test_resume_refuses_a_method_trained_with_another_config(models_config, tmp_path):
    cfg = _cfg(models_config, tmp_path)
    first = run_baselines(cfg, methods=None, resume=False)
    assert first["jsd"]["nonfinite_steps"] == 0
    folder = tmp_path / "baselines" / "jsd"
    assert (folder / FINGERPRINT_FILE).is_file()
    mtime = (folder / "model.safetensors").stat().st_mtime_ns

    # another method's recipe changed: jsd's model still holds, it is skipped
    other = dataclasses.replace(cfg, baselines=_recipe(cfg.baselines, "clear", lr=1e-6))
    again = run_baselines(other, methods=None, resume=True)
    assert again["jsd"]["loss_after"] == first["jsd"]["loss_after"]
    assert (folder / "model.safetensors").stat().st_mtime_ns == mtime

    changed = dataclasses.replace(cfg, baselines=dataclasses.replace(cfg.baselines, steps=3))
    with pytest.raises(CheckpointError, match=r"baselines\.steps: 2 -> 3") as e:
        run_baselines(changed, methods=None, resume=True)
    assert "without --resume" in str(e.value)
    assert (folder / "model.safetensors").stat().st_mtime_ns == mtime  # nothing overwritten

    # a folder from before fingerprints: refused too (it cannot be checked)
    (folder / FINGERPRINT_FILE).unlink()
    with pytest.raises(CheckpointError, match=FINGERPRINT_FILE):
        run_baselines(cfg, methods=None, resume=True)
    json.loads((tmp_path / "baselines" / "summary.json").read_text())  # still strict JSON


def test_resume_continues_exactly_from_a_step_checkpoint(models_config, tmp_path):
    """baselines.save_every: train(resume=True) picks up the latest step checkpoint and ends
    where an uninterrupted run ends; a checkpoint of another config is refused."""
    from lira.checkpoint.folders import step_dir
    from lira.models import load_backbone

    cfg = _cfg(models_config, tmp_path, steps=4, save_every=2)
    parallel, retrieval, _ = training_splits(cfg)
    examples = build_examples(parallel, retrieval)

    def make(bc: BaselinesConfig) -> ContrastiveTrainer:
        torch.manual_seed(0)
        return ContrastiveTrainer(
            bc, load_backbone(cfg.models), "clear", examples, retrieval.corpus,
            tmp_path / "clear", models_cfg=cfg.models,
        )  # fmt: skip

    full = make(cfg.baselines)
    full.train()
    ckpts = full.checkpoint_dir
    assert step_dir(ckpts, 2).is_dir() and step_dir(ckpts, 4).is_dir()
    shutil.rmtree(step_dir(ckpts, 4))  # "killed" after step 3: the latest is step 2
    again = make(cfg.baselines)
    again.train(resume=True)
    assert again.step == 4 and again.history == full.history
    for (k, a), b in zip(full.model.state_dict().items(), again.model.state_dict().values()):
        assert torch.equal(a, b), k

    other = make(_recipe(cfg.baselines, "clear", tau=0.1))
    with pytest.raises(CheckpointError, match=r"baselines\.clear_tau"):
        other.train(resume=True)

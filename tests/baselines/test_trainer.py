"""Every baseline fine-tunes the demo backbone on the demo data and lowers its training loss."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lira.baselines.config import BaselinesConfig
from lira.baselines.contrastive import ContrastiveTrainer
from lira.baselines.data import build_examples, training_splits
from lira.baselines.engine import run_baselines
from lira.baselines.export import load_baseline
from lira.config import ConfigError, DataConfig, from_dict, save_config
from pipeline.cli import main
from pipeline.runconfig import RunConfig

pytestmark = pytest.mark.slow

TEXTS = ["Wie viele Punkte gab die Verteidigung ab?", "The Panthers defense gave up 308 points."]


def _cfg(models_config, out: Path, clear_negatives: int = 1, **baselines) -> RunConfig:
    # 12 steps at 3e-4: at 1e-3 merging's tau-0.01 fine-tune of MiniLM overshoots (its loss on
    # the fixed batches rises on some seeded samples); 6 steps leave JSD's change within noise
    bc = dict(steps=12, batch_size=8, lr=3e-4, clear={"negatives": clear_negatives},
              merging={"negatives": 2}, lancer={"per_language": 4})  # fmt: skip
    bc.update(baselines)
    return RunConfig(
        output_dir=str(out),
        models=models_config,
        data=DataConfig(train_languages=["de", "es"], max_train_queries=12),
        baselines=from_dict(BaselinesConfig, bc, "baselines"),
    )


@pytest.fixture(scope="module")
def trained(models_config, tmp_path_factory):
    out = tmp_path_factory.mktemp("baselines")
    cfg = _cfg(models_config, out)
    save_config(cfg, out / "run.yaml")
    assert main(["baseline", str(out / "run.yaml")]) == 0  # the `lira baseline` command
    summary = json.loads((out / "baselines" / "summary.json").read_text())
    yield cfg, out, summary
    shutil.rmtree(out, ignore_errors=True)  # 0.5 GB of models, once the module's tests ran


@pytest.mark.parametrize("method", ["infonce", "clear", "lancer", "jsd", "merging"])
def test_baseline_lowers_training_loss(trained, method):
    _, out, summary = trained
    stats = summary[method]
    assert np.isfinite(stats["loss_before"]) and np.isfinite(stats["loss_after"])
    assert stats["loss_after"] < stats["loss_before"], stats
    folder = out / "baselines" / method
    assert (folder / "config.json").is_file() and (folder / "lira_baseline.json").is_file()
    assert list(folder.glob("*.safetensors"))


def test_shared_budget_is_recorded_per_method(trained):
    _, _, summary = trained
    for method in ("infonce", "clear", "lancer", "jsd", "merging"):
        r = summary[method]["recipe"]
        assert (r["steps"], r["batch_size"], r["lr"]) == (12, 8, 3e-4), method
        assert r["shared"] == ["steps", "batch_size", "lr"]
    assert summary["clear"]["recipe"]["scheduler"] == "cosine"  # the paper's schedule stays
    assert summary["merging"]["recipe"]["tau"] == 0.01


def test_merging_averages_the_cross_lingual_fine_tune_with_the_base_model(trained, models_config):
    """Paper 001 §4.3: a CLIR fine-tune merged with the best mono-lingual model (the base)."""
    from safetensors.torch import load_file

    from lira.models import load_backbone

    _, out, summary = trained
    parts = summary["merging"]["parts"]
    assert list(parts) == ["de+es-en-en"] and summary["merging"]["partner"] == "base"
    part = parts["de+es-en-en"]
    assert part["loss_after"] < part["loss_before"], part
    tuned = load_file(str(Path(part["path"]) / "model.safetensors"))
    merged = load_file(str(out / "baselines" / "merging" / "model.safetensors"))
    base = load_backbone(models_config).model.state_dict()
    checked = 0
    for k, v in merged.items():
        if v.is_floating_point() and not torch.equal(tuned[k], base[k]):
            torch.testing.assert_close(v, 0.5 * tuned[k] + 0.5 * base[k], rtol=1e-5, atol=1e-6)
            checked += 1
    assert checked > 10


def test_resume_skips_trained_methods(trained, caplog):
    cfg, out, summary = trained
    mtime = (out / "baselines" / "clear" / "config.json").stat().st_mtime
    with caplog.at_level("INFO"):
        again = run_baselines(cfg, methods=["clear"], resume=True)
    assert again["clear"] == summary["clear"]
    assert (out / "baselines" / "clear" / "config.json").stat().st_mtime == mtime


@pytest.mark.parametrize("lora", [False, True])
def test_checkpoint_loads_in_fresh_process(models_config, tmp_path, lora):
    cfg = _cfg(models_config, tmp_path, lora=lora, steps=3, clear_negatives=0)
    parallel, retrieval, _ = training_splits(cfg)
    examples = build_examples(parallel, retrieval)  # no mined negatives: K = M = 0
    from lira.models import load_backbone

    trainer = ContrastiveTrainer(
        cfg.baselines, load_backbone(cfg.models), "clear", examples, retrieval.corpus,
        tmp_path / "ckpt", models_cfg=cfg.models,
    )  # fmt: skip
    trainer.train(steps=3)
    path = trainer.finalize()
    model = trainer.backbone
    mine = model.encode(TEXTS, kind="query")
    base = load_backbone(cfg.models).encode(TEXTS, kind="query")
    assert not np.allclose(mine, base, atol=1e-5), "training did not change the weights"
    assert path == tmp_path / "ckpt" and (path / "lira_baseline.json").is_file()
    code = (
        "import sys, numpy as np; from lira.baselines.export import load_baseline;"
        f"np.save(sys.argv[1], load_baseline(sys.argv[2]).encode({TEXTS!r}, kind='query'))"
    )
    npy = tmp_path / "emb.npy"
    subprocess.run([sys.executable, "-c", code, str(npy), str(path)], check=True, timeout=120)
    fresh = np.load(npy)
    np.testing.assert_allclose(fresh, mine, atol=1e-5)
    np.testing.assert_allclose(load_baseline(path).encode(TEXTS, kind="query"), mine, atol=1e-5)
    # the same folder is an ordinary sentence-transformers model (same pooling and prompts)
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(path), device="cpu")
    np.testing.assert_allclose(st.encode(TEXTS, prompt_name="query"), mine, atol=1e-5)


def test_bad_method_and_missing_checkpoint(models_config, tmp_path):
    cfg = _cfg(models_config, tmp_path)
    with pytest.raises(ConfigError, match=r"'baselines.methods': unknown method\(s\) \['nope'\]"):
        run_baselines(cfg, methods=["nope"], resume=False)
    with pytest.raises(FileNotFoundError, match=r"lira_baseline\.json"):
        load_baseline(tmp_path)


def test_bf16_training_keeps_fp32_master_weights(models_config, tmp_path):
    """models.dtype=bfloat16: the forward runs under bf16 autocast, AdamW updates fp32 weights.

    A bf16 weight w drops an update below half its spacing (2^-9·|w|): at lr 1e-5 nearly every
    weight of a pure-bf16 fine-tune stays put."""
    import dataclasses

    from lira.models import load_backbone

    cfg = _cfg(dataclasses.replace(models_config, dtype="bfloat16"), tmp_path, steps=3, lr=1e-5,
               clear_negatives=0)  # fmt: skip
    parallel, retrieval, _ = training_splits(cfg)
    backbone = load_backbone(cfg.models)
    start = {n: p.detach().float().clone() for n, p in backbone.named_parameters()}
    trainer = ContrastiveTrainer(
        cfg.baselines, backbone, "clear", build_examples(parallel, retrieval), retrieval.corpus,
        tmp_path / "bf16", models_cfg=cfg.models,
    )  # fmt: skip
    assert trainer.accelerator.mixed_precision == "bf16"
    trainer.train(steps=3)
    trained = trainer._trainable()
    assert {p.dtype for p in trained.values()} == {torch.float32}
    dense = {n: p for n, p in trained.items() if "embeddings" not in n}  # rows of unseen tokens
    changed = sum(int((p.detach() != start[n]).sum()) for n, p in dense.items())
    total = sum(p.numel() for p in dense.values())
    assert changed / total > 0.9, f"only {changed / total:.1%} of the weights moved"
    assert trainer.finalize().is_dir()
    assert {p.dtype for p in trainer.backbone.parameters()} == {torch.bfloat16}  # saved as set


def test_gradient_checkpointing_recomputes_layers_and_keeps_the_gradients(models_config, tmp_path):
    """baselines.gradient_checkpointing (what an 8B h needs on one GPU): each layer of h runs
    again in the backward pass, and the gradients are those of the plain forward (LoRA)."""
    import dataclasses
    import random

    from lira.models import load_backbone

    cfg = _cfg(models_config, tmp_path, steps=1, clear_negatives=0, lora=True)
    parallel, retrieval, _ = training_splits(cfg)
    examples = build_examples(parallel, retrieval)
    grads, calls = {}, {}
    for on in (False, True):
        bc = dataclasses.replace(cfg.baselines, gradient_checkpointing=on)
        torch.manual_seed(0)  # the same LoRA initialisation
        trainer = ContrastiveTrainer(
            bc, load_backbone(cfg.models), "clear", examples, retrieval.corpus,
            tmp_path / f"gc-{on}", models_cfg=cfg.models,
        )  # fmt: skip
        query = next(
            m
            for n, m in trainer.model.named_modules()
            if n.endswith("layer.0.attention.self.query.base_layer")
        )
        seen: list[int] = []
        query.register_forward_hook(lambda *_, seen=seen: seen.append(1))
        trainer.model.train()
        torch.manual_seed(1)  # the same dropout masks
        trainer.loss(trainer.draw(random.Random(0))).backward()
        calls[on] = len(seen)
        grads[on] = {k: p.grad for k, p in trainer.model.named_parameters() if p.grad is not None}
    assert calls[False] > 0 and calls[True] == 2 * calls[False]  # forward + recompute
    assert grads[True].keys() == grads[False].keys() and grads[False]
    for k, g in grads[False].items():
        torch.testing.assert_close(grads[True][k], g, atol=1e-6, rtol=1e-5, msg=k)

"""The baselines under ``accelerate launch`` with two CPU processes (gloo).

One launch covers CLEAR, LANCER, JSD and the merging part (GIST) through the shared trainer,
and merging's own loop: each rank trains on its own slice of the global batch, the ranks hold
identical weights after every step (with activation checkpointing too, ending on the plain
run's weights), a run stopped at its step-2 checkpoint and resumed ends
bit-identical to the uninterrupted run, and the negatives are mined once (rank 0) and shared.

2 processes × B rows vs 1 process × 2B: the rows of a step are the same (the global batch is
drawn alike and split), but the weights are not: each process's contrastive loss sees only
its own B rows as in-batch negatives (embeddings are not gathered across processes), so the
losses, and the updates, differ by construction; the test checks the rows, not the weights.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lira.baselines.config import BaselinesConfig
from lira.config import DataConfig, from_dict, save_config
from pipeline.runconfig import RunConfig
from tests.launch import free_port

ROOT = Path(__file__).resolve().parents[2]
STEPS = 3


@pytest.fixture(scope="module")
def ranks(models_config, tmp_path_factory) -> list[dict]:
    """Launch the worker on two processes; each rank's record."""
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    if accelerate is None:
        pytest.skip("the accelerate command is not installed next to this Python")
    out = tmp_path_factory.mktemp("baselines-ddp")
    bc = dict(steps=STEPS, batch_size=8, lr=1e-3, save_every=2, clear={"negatives": 1},
              merging={"negatives": 2}, lancer={"per_language": 2})  # fmt: skip
    cfg = RunConfig(
        output_dir=str(out),
        models=models_config,
        data=DataConfig(train_languages=["de", "es"], max_train_queries=12),
        baselines=from_dict(BaselinesConfig, bc, "baselines"),
    )
    save_config(cfg, out / "run.yaml")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    cmd = [
        accelerate, "launch", "--config_file", str(ROOT / "scripts" / "accelerate_cpu_2proc.yaml"),
        "--main_process_port", str(free_port()), str(ROOT / "tests" / "baselines" / "ddp_worker.py"),
        str(out / "run.yaml"), str(out),
    ]  # fmt: skip
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1500, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-4000:]
    records = [torch.load(out / f"rank{r}.pt", weights_only=False) for r in (0, 1)]
    assert [r["world"] for r in records] == [2, 2]
    assert (out / "merging" / "lira_baseline.json").is_file()
    shutil.rmtree(out)  # 1.9 GB of records and run folders, read: the records are in memory
    return records


pytestmark = pytest.mark.slow
OBJECTIVES = ("clear", "lancer", "jsd", "gist")


@pytest.mark.parametrize("method", OBJECTIVES)
def test_ranks_train_on_distinct_slices_of_the_global_batch(ranks, method):
    r0, r1 = ranks[0][method], ranks[1][method]
    assert len(r0["rows"]) == len(r1["rows"]) == STEPS
    for step, (a, b, whole) in enumerate(zip(r0["rows"], r1["rows"], r0["single"])):
        assert len(a) == len(b) == 4, step  # batch_size 8 split over 2 processes
        assert not set(a) & set(b), f"step {step + 1}: both ranks trained on {set(a) & set(b)}"
        if method != "lancer" or step == 0:  # LANCER draws a multilingual batch per process
            assert a + b == whole, "the two slices are not one process's global batch"


@pytest.mark.parametrize("method", OBJECTIVES)
def test_ranks_hold_identical_weights_after_every_step(ranks, method):
    r0, r1 = ranks[0][method], ranks[1][method]
    assert r0["sums"] == r1["sums"]
    assert len(set(r0["sums"])) == STEPS  # every step moved the weights
    for k, v in r0["final"].items():
        assert torch.equal(v, r1["final"][k]), k


@pytest.mark.parametrize("method", ["clear", "lancer"])  # one checkpoint code for all
def test_resume_is_bit_identical_to_the_uninterrupted_run(ranks, method):
    for rank in ranks:
        rec = rank[method]
        assert rec["resumed_from"] == 2
        assert rec["resumed_sums"] == rec["sums"][2:]  # the steps after the checkpoint
        for k, v in rec["final"].items():
            assert torch.equal(v, rec["resumed_final"][k]), k


def test_activation_checkpointing_keeps_the_ranks_and_the_weights_of_the_plain_run(ranks):
    """baselines.gradient_checkpointing under two processes: layers are recomputed, the ranks
    stay identical, and every weight ends where the plain CLEAR run's does (same gradients)."""
    for rank in ranks:
        rec, plain = rank["clear_checkpointed"], rank["clear"]
        assert rec["recomputes"]
        assert rec["final"].keys() == plain["final"].keys()
        for k, v in rec["final"].items():
            torch.testing.assert_close(v, plain["final"][k], rtol=0, atol=1e-5, msg=k)
    assert ranks[0]["clear_checkpointed"]["sums"] == ranks[1]["clear_checkpointed"]["sums"]
    for k, v in ranks[0]["clear_checkpointed"]["final"].items():
        assert torch.equal(v, ranks[1]["clear_checkpointed"]["final"][k]), k


def test_negatives_are_mined_once_and_shared(ranks):
    assert ranks[0]["mine_calls"] > 0 and ranks[1]["mine_calls"] == 0
    assert ranks[0]["negatives"] == ranks[1]["negatives"]
    assert any(p for p, _, _ in ranks[0]["negatives"])


def test_merging_trains_under_two_processes(ranks):
    assert ranks[0]["merging_steps"] == ranks[1]["merging_steps"] == STEPS

"""LaSR under ``accelerate launch`` with two CPU processes (gloo): every config trains and the
processes end with identical weights, they train on disjoint examples, ``--resume`` is exact,
and 2 processes × batch B equal 1 process × batch 2B where the maths says so (issue 38).

One launch trains every case (tests/lasr/ddp_worker.py) and ends as ``lira lasr`` does
(finalize, then a barrier); one single-process run gives the 2B reference.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lira.config import to_dict
from tests.launch import failure, free_port

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "lasr" / "ddp_worker.py"
BASE = dict(
    steps=3, batch_size=4, fusion_dim=32, fusion_layers=1, num_negatives=4, corr_min=4,
    doc_queue_size=64, corr_queue_size=64, ema_decay=0.9, save_every=1000, log_every=1000,
)  # fmt: skip
EQUIV = {"negatives": "corpus", "dropout": 0.0}
"""The config where 2 × B equals 1 × 2B: see test_two_processes_equal_one_with_twice_the_batch."""
CASES = [
    {"name": "default"},
    {"name": "no-temperature", "lasr": {"learn_temperature": False}},
    {"name": "no-multi-enc", "lasr": {"use_multilingual_encoder": False}},
    {"name": "no-queue", "lasr": {"use_queue": False}},
    {"name": "no-translations", "lasr": {"use_translations": False}},
    {"name": "raw-view", "lasr": {"raw_view": True}},
    {"name": "both-tasks", "pairs": True},
    {"name": "rank-task", "lasr": {"task": "rank"}, "pairs": True},
    {"name": "corpus-negatives", "lasr": {"negatives": "corpus"}},
    {"name": "queue-rescore", "lasr": {"queue_rescore": True}},
    {"name": "scale-free", "lasr": {"scale_free": True}},
    {"name": "grad-accum", "lasr": {"grad_accum": 2}},
    {"name": "resume", "lasr": {"steps": 4, "save_every": 2}, "resume_at": 2, "pairs": True},
    {"name": "equiv", "lasr": EQUIV},
    {"name": "train-g", "lasr": {"train_encoder": True}},
]
"""Every LaSR ablation row (Table 5's LaSR switches; the Arca critic rows change only the gate
features' values, not what trains) and the other switches that change what trains."""


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}


def _spec(tmp: Path, models_config, cases: list[dict], **base: object) -> Path:
    spec = tmp / "spec.json"
    doc = {"models": to_dict(models_config), "base": {**BASE, **base}, "cases": cases,
           "finalize": True}  # fmt: skip
    spec.write_text(json.dumps(doc), encoding="utf-8")
    return spec


@pytest.fixture(scope="module")
def two(models_config, tmp_path_factory) -> Path:
    """Every case trained by 2 processes; the folder of their dumps."""
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    if accelerate is None:
        pytest.skip("the accelerate command is not installed next to this Python")
    tmp = tmp_path_factory.mktemp("lasr-ddp")
    spec = _spec(tmp, models_config, CASES)
    cmd = [
        accelerate, "launch", "--config_file", str(ROOT / "scripts" / "accelerate_cpu_2proc.yaml"),
        "--main_process_port", str(free_port()), str(WORKER), str(spec), str(tmp),
    ]  # fmt: skip
    res = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert res.returncode == 0, failure(res.stderr)
    return tmp


def _load(folder: Path, name: str) -> tuple[dict, dict]:
    return tuple(torch.load(folder / f"{name}-{r}.pt", weights_only=False) for r in (0, 1))


@pytest.mark.slow
@pytest.mark.parametrize("case", [c["name"] for c in CASES])
def test_every_config_trains_and_the_processes_agree(two, case):
    """Exits 0 (the launch), every step trains, and both processes hold the same weights."""
    w0, w1 = _load(two, case)
    assert w0["world"] == w1["world"] == 2
    assert len(w0["history"]) == len(w1["history"]) > 0
    for k, v in w0["state"].items():
        torch.testing.assert_close(v, w1["state"][k], rtol=0, atol=0, msg=f"{case}: {k} differs")
    frozen = set(w0["frozen"])
    spec = next(c for c in CASES if c["name"] == case).get("lasr", {})
    # what the config does not use does not train (DDP needs a gradient for each trainable one)
    assert ("head.raw_gate.weight" in frozen) == (not spec.get("raw_view", False))
    uses_temperature = spec.get("learn_temperature", True) and spec.get("task") != "rank"
    assert ("head.logit_scale" in frozen) == (not uses_temperature)
    multi = spec.get("use_multilingual_encoder", True)
    assert ("head.delta.weight" in frozen) == (not multi)
    assert any(k.startswith("adaptor.") for k in frozen) == (not multi)


@pytest.mark.slow
def test_trained_g_is_the_same_on_both_processes(two):
    """``lasr.train_encoder``: g's gradients are all-reduced with the net's (it is inside the
    wrapped module), so g moves and stays identical across processes."""
    w0, w1 = _load(two, "train-g")
    g = [k for k in w0["state"] if k.startswith("g.")]
    assert g
    for k in g:
        torch.testing.assert_close(w0["state"][k], w1["state"][k], rtol=0, atol=0, msg=k)
    start = w0["g_start"]
    assert any(not torch.equal(w0["state"][k], start[k[2:]]) for k in g)  # g trained


@pytest.mark.slow
def test_no_two_processes_train_on_the_same_example_in_a_step(two):
    for case in ("default", "both-tasks", "rank-task"):
        w0, w1 = _load(two, case)
        for t, (a, b) in enumerate(zip(w0["drawn"], w1["drawn"])):
            assert a and b, f"{case} step {t + 1}: a process trained on nothing"
            assert not set(a) & set(b), (
                f"{case} step {t + 1}: both processes drew {set(a) & set(b)}"
            )


@pytest.mark.slow
def test_resume_from_a_mid_run_checkpoint_is_bit_identical(two):
    """Each process restores its own sampler, queues and RNG states: the run resumed from step 2
    ends with the uninterrupted run's weights, bit for bit, on both processes."""
    for r in (0, 1):
        whole = torch.load(two / f"resume-{r}.pt", weights_only=False)
        resumed = torch.load(two / f"resume-resumed-{r}.pt", weights_only=False)
        assert whole["drawn"][2:] == resumed["drawn"]
        for k, v in whole["state"].items():
            torch.testing.assert_close(resumed["state"][k], v, rtol=0, atol=0, msg=f"rank {r} {k}")


@pytest.mark.slow
def test_two_processes_equal_one_with_twice_the_batch(two, models_config, tmp_path):
    """2 processes × B = 1 process × 2B for ``negatives: corpus`` without dropout: both draw the
    same 2B queries (one shared sampler, split in process order), each query's loss reads only
    its own positive and the corpus-wide hard negatives of the current net, the loss is the mean
    over queries, and DDP averages the two halves' gradients: the same update up to float
    rounding (measured: 4.3e-7 at most after 3 steps at lr 1e-4; tolerance 1e-5, as Adam
    divides by √v and so magnifies rounding in a near-zero gradient).

    With the DocQueue (the default) it cannot hold: each process mines negatives from its own
    batch and queue, so a query competes with B documents and its process's queue instead of 2B
    and one queue; ``lasr.dropout`` draws other masks; the rank task's correlation loss is not a
    mean over pairs (Pearson over the batch and the CorrQueue)."""
    spec = _spec(tmp_path, models_config, [{"name": "equiv", "lasr": EQUIV}],
                 batch_size=2 * BASE["batch_size"])  # fmt: skip
    res = subprocess.run([sys.executable, str(WORKER), str(spec), str(tmp_path)], env=_env(),
                         capture_output=True, text=True, timeout=600, cwd=ROOT)  # fmt: skip
    assert res.returncode == 0, failure(res.stderr)
    one = torch.load(tmp_path / "equiv-0.pt", weights_only=False)
    pair = _load(two, "equiv")
    assert one["world"] == 1
    assert one["drawn"] == [a + b for a, b in zip(pair[0]["drawn"], pair[1]["drawn"])]
    for k, v in one["state"].items():
        torch.testing.assert_close(pair[0]["state"][k], v, rtol=0, atol=1e-5, msg=k)
    losses = [h["retrieval"] for h in one["history"]]
    halves = [
        (a["retrieval"] + b["retrieval"]) / 2
        for a, b in zip(pair[0]["history"], pair[1]["history"])
    ]
    torch.testing.assert_close(torch.tensor(halves), torch.tensor(losses), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_lira_run_under_two_processes(models_config, tmp_path):
    """``lira run`` (Arca -> LaSR, tiny steps) under 2 processes exits 0: no stage ends the
    process group (Arca's and LaSR's finalize used to; the CLI does, once, at the end), and
    ``lira compare`` alone refuses a launcher in one line. (compare inside ``lira run`` runs on
    the main process only: tests/test_pipeline_launcher.py, without a launch.)"""
    from tests.test_kill_resume import _base

    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    if accelerate is None:
        pytest.skip("the accelerate command is not installed next to this Python")
    base, _ = _base(tmp_path, models_config)
    launch = [
        accelerate, "launch", "--config_file", str(ROOT / "scripts" / "accelerate_cpu_2proc.yaml"),
        "--main_process_port", str(free_port()), "-m", "lira",
    ]  # fmt: skip
    steps = ["arca.steps=2", "lasr.steps=2", "arca.save_every=100", "lasr.save_every=100"]
    cmd = [*launch, "run", str(tmp_path / "run.yaml"), "stages=[arca,lasr]", *steps]
    res = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert res.returncode == 0, failure(res.stderr)
    assert (base / "lira-model").is_dir() and (base / "lasr" / "metrics.json").is_file()
    done = json.loads((base / "run_summary.json").read_text(encoding="utf-8"))["stages"]
    assert set(done) == {"arca", "lasr"} and all(isinstance(v, float) for v in done.values())
    cmd = [*launch, "compare", str(tmp_path / "run.yaml")]
    res = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode != 0
    # one line per process from lira, no Python traceback of lira's (the launcher adds its own);
    # when one process exits first the launcher may end the other before it prints its line
    refused = res.stderr.count("lira: lira compare does not split its work across processes")
    assert refused in (1, 2), res.stderr[-3000:]
    assert "refuse_launcher" not in res.stderr

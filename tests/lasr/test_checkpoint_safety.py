"""LaSR checkpoints and the non-finite guard (issue 18): trainer state without pickle, the last
two step folders kept, a checkpoint of another config refused on --resume, a fresh run clearing
a previous run's checkpoints, and a NaN loss or gradient never reaching the weights."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from safetensors.torch import load_file

from lasr.config import LaSRConfig
from lasr.trainer import LaSRTrainer
from lira.checkpoint.folders import step_dirs
from lira.checkpoint.state import load_state
from lira.errors import CheckpointError
from tests.pickles import plant_pickles

from .test_trainer import SMALL, _fresh, _subset, demo  # noqa: F401  (demo is a fixture)

pytestmark = pytest.mark.slow


def _cfg(**kw) -> LaSRConfig:
    return LaSRConfig(**{**SMALL, "batch_size": 8, "lr": 1e-3, "steps": 6, "save_every": 2, **kw})


def _trainer(demo, out, cfg):  # noqa: F811
    model, train, _, _, adaptor = demo
    return LaSRTrainer(cfg, _fresh(model, cfg, adaptor), out, retrieval=_subset(train, 16))


def _finite(tensors) -> bool:
    return all(bool(torch.isfinite(v).all()) for v in tensors if v.is_floating_point())


def test_checkpoints_are_pickle_free_pruned_and_checked_on_resume(demo):  # noqa: F811
    tmp = demo[3] / "safety"
    a = _trainer(demo, tmp, _cfg())
    a.train()
    root = tmp / "lasr"
    assert [p.name for p in step_dirs(root)] == ["step-00000004", "step-00000006"]  # keep 2
    assert not list(root.rglob("*.pt")), "trainer state must not be pickled"
    marker = tmp / "pwned"
    plant_pickles(root / "step-00000006", marker)

    b = _trainer(demo, tmp, _cfg(steps=8))  # more steps: the same run continues
    assert b.resume() and b.step == 6 and not marker.exists()
    b.train()
    assert b.step == 8 and [p.name for p in step_dirs(root)][-1] == "step-00000008"

    with pytest.raises(CheckpointError, match=r"lasr\.lr: 0\.001 -> 0\.0005") as e:
        _trainer(demo, tmp, _cfg(steps=10, lr=5e-4)).resume()
    assert "without --resume" in str(e.value) and "--output-dir" in str(e.value)
    with pytest.raises(CheckpointError, match=r"past lasr\.steps=4"):
        _trainer(demo, tmp, _cfg(steps=4)).resume()


def test_fresh_run_removes_a_previous_runs_checkpoints(demo, caplog):  # noqa: F811
    tmp = demo[3] / "fresh"
    _trainer(demo, tmp, _cfg(steps=6)).train()  # old run: step-4, step-6
    new = _trainer(demo, tmp, _cfg(lr=5e-4))
    with caplog.at_level("WARNING"):
        new.train(steps=2)
    assert "removed 2 checkpoint(s) of a previous run" in caplog.text
    assert [p.name for p in step_dirs(tmp / "lasr")] == ["step-00000002"]
    again = _trainer(demo, tmp, _cfg(lr=5e-4))
    assert again.resume() and again.step == 2  # the new run's checkpoint, not the old step 6


@pytest.mark.parametrize("where", ["loss", "gradient"])
def test_nonfinite_steps_are_skipped_and_counted(demo, where):  # noqa: F811
    tmp = demo[3] / f"nan-{where}"
    tr = _trainer(demo, tmp, _cfg(steps=3, save_every=3))
    before = {k: v.clone() for k, v in tr.net.state_dict().items()}
    real = tr.retrieval_loss

    def poisoned():
        loss = real()
        if where == "loss":
            return loss * float("nan")
        # finite loss (0 added), but d sqrt(x)/dx at 0 is inf: every gradient becomes NaN
        zero = sum(p.sum() for p in tr.params if p.requires_grad) * 0.0
        return loss + torch.sqrt(zero * 0.0)

    tr.retrieval_loss = poisoned
    hist = tr.train()
    assert tr.nonfinite_steps == 3 and len(hist) == 3
    for k, v in tr.net.state_dict().items():
        assert torch.equal(v, before[k]), k  # no update reached the weights
    assert all(_finite(s.values()) for s in tr.optimizer.state.values())
    state = load_state(tmp / "lasr" / "step-00000003")
    assert state["nonfinite_steps"] == 3
    assert _finite(state["net"].values()) and _finite(state["ema"]["shadow"].values())
    tr.finalize()
    out = tmp / "model"
    demo[0].save_pretrained(out)
    saved = [t for f in out.rglob("*.safetensors") for t in load_file(str(f)).values()]
    assert saved and _finite(saved)


def test_one_bad_step_is_skipped_and_training_goes_on(demo):  # noqa: F811
    tmp = demo[3] / "nan-once"
    tr = _trainer(demo, tmp, dataclasses.replace(_cfg(steps=4, save_every=100)))
    before = {k: v.clone() for k, v in tr.net.state_dict().items()}
    real = tr.retrieval_loss
    tr.retrieval_loss = lambda: real() * (float("inf") if tr.step == 1 else 1.0)
    tr.train()
    assert tr.nonfinite_steps == 1 and tr.step == 4
    after = tr.net.state_dict()
    assert _finite(after.values())
    assert any(not torch.equal(after[k], before[k]) for k in before)  # the other steps trained

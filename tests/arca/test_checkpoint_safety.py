"""Arca checkpoints are safe to resume (issue 18): no pickle is ever loaded, a checkpoint of
another config is refused on --resume, a fresh run never keeps or resumes a previous run's
checkpoints, and log.jsonl has each step once after a resume."""

from __future__ import annotations

import json

import pytest
import torch

from arca.config import ArcaConfig
from arca.trainer import ArcaTrainer
from lira.checkpoint.fingerprint import FINGERPRINT_FILE, read_fingerprint
from lira.checkpoint.folders import latest_checkpoint, step_dirs
from lira.errors import CheckpointError, LiRAError
from tests.pickles import plant_pickles

from .conftest import make_items

pytestmark = pytest.mark.slow


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.fixture
def run(build_model, xquad_pairs):
    items = make_items(xquad_pairs[:16])

    def make(out, **kw):
        cfg = ArcaConfig(**{"steps": 4, "batch_size": 4, "log_every": 1, "save_every": 2, **kw})
        trainer = ArcaTrainer(cfg, build_model(cfg), items, out)
        torch.manual_seed(7)
        return trainer

    return make


def test_planted_pickle_never_runs_on_resume(run, tmp_path):
    out, marker = tmp_path / "arca", tmp_path / "pwned"
    run(out).train()
    last = latest_checkpoint(out)
    assert last is not None and (last / "trainer_state.json").is_file()
    assert not list(out.rglob("*.pt")), "trainer/RNG state must not be pickled"
    plant_pickles(last, marker)
    resumed = run(out, steps=6)
    resumed.train(resume=True)  # reads trainer_state.{json,safetensors}; the .pt files are inert
    assert resumed.step == 6 and not marker.exists()

    # a legacy checkpoint (pickles only, no fingerprint): refused with a message, nothing runs
    legacy = out / "step-00000008"
    legacy.mkdir()
    plant_pickles(legacy, marker)
    with pytest.raises(CheckpointError, match=FINGERPRINT_FILE) as e:
        run(out, steps=10).train(resume=True)
    assert "--output-dir" in str(e.value) and not marker.exists()


def test_resume_with_a_changed_config_is_refused(run, tmp_path):
    out = tmp_path / "arca"
    run(out).train()
    with pytest.raises(LiRAError, match=r"arca\.actor_lr: 0\.0001 -> 0\.001") as e:
        run(out, actor_lr=1e-3).train(resume=True)
    assert "without --resume" in str(e.value) and "--output-dir" in str(e.value)
    # more steps (constant learning rates) continue the same run; fewer than done are refused
    with pytest.raises(CheckpointError, match=r"past arca\.steps=2"):
        run(out, steps=2).train(resume=True)
    assert run(out, steps=6).train(resume=True)["step"] == 6


def test_resume_with_more_steps_equals_the_longer_run(run, tmp_path):
    full = run(tmp_path / "full", steps=6)
    full.train()
    short = run(tmp_path / "short", steps=4)
    short.train()
    longer = run(tmp_path / "short", steps=6)
    longer.train(resume=True)
    wa, wb = _weights(full.model), _weights(longer.model)
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k


def test_fresh_run_replaces_a_previous_runs_checkpoints(run, tmp_path, caplog):
    """The issue's probe: a fresh run with a changed config into a used output dir must not
    prune its own checkpoints in favour of the old run's, nor resume the old run later."""
    out = tmp_path / "arca"
    run(out, steps=8).train()  # the old run: step-6, step-8 (actor_lr 1e-4)
    new = run(out, actor_lr=1e-3)
    real_step = new.train_step

    def dying_step():
        if new.step == 3:
            raise KeyboardInterrupt("simulated kill")
        return real_step()

    new.train_step = dying_step
    with caplog.at_level("WARNING"), pytest.raises(KeyboardInterrupt):
        new.train()
    assert "removed 2 checkpoint(s) of a previous run" in caplog.text
    names = [p.name for p in step_dirs(out)]
    assert names == ["step-00000002"], names
    assert read_fingerprint(out / names[0])["hash"] == new.fingerprint["hash"]
    resumed = run(out, actor_lr=1e-3)
    resumed.train(resume=True)  # from the new run's step 2, not the old run's step 8
    assert resumed.history[0]["step"] == 1 and resumed.step == 4
    assert [p.name for p in step_dirs(out)] == ["step-00000002", "step-00000004"]


def test_log_has_each_step_once_after_resume(run, tmp_path):
    ref = run(tmp_path / "ref", steps=6, save_every=3)
    ref.train()
    out = tmp_path / "killed"
    killed = run(out, steps=6, save_every=3)
    real_step = killed.train_step

    def dying_step():
        if killed.step == 5:
            raise KeyboardInterrupt("simulated kill")
        return real_step()

    killed.train_step = dying_step
    with pytest.raises(KeyboardInterrupt):
        killed.train()
    with open(out / "log.jsonl", "a", encoding="utf-8") as f:
        f.write('{"step": 5, "loss": 1.0')  # a row torn by the kill
    run(out, steps=6, save_every=3).train(resume=True)  # from step 3: steps 4-6 are logged again

    def rows(path):
        return [json.loads(line) for line in path.read_text().splitlines()]

    got, want = rows(out / "log.jsonl"), rows(tmp_path / "ref" / "log.jsonl")
    assert [r["step"] for r in got] == [1, 2, 3, 4, 5, 6]
    for a, b in zip(got, want, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-6, abs=1e-7)
    run(out, steps=6, save_every=3).train()  # a fresh run starts the log anew
    assert [r["step"] for r in rows(out / "log.jsonl")] == [1, 2, 3, 4, 5, 6]


def test_a_pickled_lora_adapter_is_one_line_and_never_runs(build_model, arca_backbone, tmp_path):
    """Issue 51, item 4: ``encoder_mode: lora`` with ``adapter_model.bin`` a pickle (manifest
    rewritten, so the folder looks whole) is the one-line pickle refusal, not a traceback."""
    import pickle

    from arca.model import ArcaModel
    from arca.trainable import apply_lora
    from lira.checkpoint.manifest import write_manifest
    from lira.errors import UserInputError
    from tests.pickles import _Payload

    model = build_model(ArcaConfig(lora=True, lora_r=4))
    apply_lora(model, model.arca_cfg)
    folder, marker = tmp_path / "arca-lora", tmp_path / "pwned"
    model.save_pretrained(folder)
    ArcaModel.from_pretrained(folder, backbone=arca_backbone)  # intact: loads
    (folder / "encoder" / "adapter_model.safetensors").unlink()
    (folder / "encoder" / "adapter_model.bin").write_bytes(pickle.dumps(_Payload(marker)))
    write_manifest(folder)
    with pytest.raises(UserInputError) as e:
        ArcaModel.from_pretrained(folder, backbone=arca_backbone)
    msg = str(e.value)
    assert "weights file is a pickle" in msg and "encoder" in msg and "\n" not in msg
    assert not marker.exists()

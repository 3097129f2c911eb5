"""The trainers' shared base and accelerate setup: one Trainer contract for every trainer,
trackers from ``report_to`` and a clear error."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
from pathlib import Path

import pytest
from accelerate import Accelerator
from accelerate.tracking import GeneralTracker

from lira.accelerator import adamw_kwargs, log_metrics, make_accelerator
from lira.baselines.clear import ClearConfig
from lira.baselines.config import BaselinesConfig
from lira.config import ConfigError, DataConfig
from lira.training import Trainer, TrainResult
from pipeline.runconfig import RunConfig


class Recorder(GeneralTracker):
    """An in-memory accelerate tracker."""

    name = "recorder"
    requires_logging_directory = False

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[dict, int]] = []

    @property
    def tracker(self) -> Recorder:
        return self

    def store_init_configuration(self, values: dict) -> None:
        pass

    def log(self, values: dict, step: int | None = None, **kwargs) -> None:
        self.rows.append((values, step))


def test_log_metrics_sends_the_numeric_terms_to_the_trackers():
    rec = Recorder()
    acc = Accelerator(cpu=True, log_with=[rec])
    acc.init_trackers("test")
    log_metrics(acc, {"loss": 0.5, "step": 3, "selection": {"a": 1.0}, "note": "x"}, 3)
    assert rec.rows == [({"loss": 0.5, "step": 3.0}, 3)]


def test_no_tracker_by_default(tmp_path):
    acc = make_accelerator("lasr", "none", tmp_path)
    assert not acc.trackers
    log_metrics(acc, {"loss": 1.0}, 1)  # a no-op, no error


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is not None, reason="installed")
def test_a_missing_tracker_package_is_a_config_error_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"lasr\.report_to.*pip install tensorboard"):
        make_accelerator("lasr", "tensorboard", tmp_path)


def _trainers() -> list[type]:
    from arca.trainer import ArcaTrainer
    from lasr.trainer import LaSRTrainer
    from lira.baselines.contrastive import ContrastiveTrainer

    return [ArcaTrainer, LaSRTrainer, ContrastiveTrainer]


def _subclasses(cls: type) -> set[type]:
    """Every subclass in the packages (toy trainers that tests define are not LiRA's)."""
    found = {c for s in cls.__subclasses__() for c in (s, *_subclasses(s))}
    return {c for c in found if not c.__module__.startswith("tests.")}


def test_every_trainer_subclass_is_covered():
    """The contract below runs over every Trainer subclass there is."""
    assert _subclasses(Trainer) == set(_trainers())


@pytest.mark.parametrize("trainer", _trainers(), ids=lambda c: c.__name__)
def test_every_trainer_has_the_one_contract(trainer):
    """A Trainer: XTrainer(cfg, model, ..., output_dir); train(resume=False, steps=None) ->
    TrainResult; finalize() -> Path; one accelerator attribute; no lifecycle of its own."""
    assert issubclass(trainer, Trainer)
    init = inspect.signature(trainer.__init__).parameters
    assert list(init)[1:3] == ["cfg", "model"] and "output_dir" in init
    assert inspect.signature(trainer.train) == inspect.signature(Trainer.train)
    train = list(inspect.signature(trainer.train).parameters.values())
    assert [p.name for p in train] == ["self", "resume", "steps"] and train[1].default is False
    assert "TrainResult" in str(inspect.signature(trainer.train).return_annotation)
    assert list(inspect.signature(trainer.finalize).parameters) == ["self"]
    assert "Path" in str(inspect.signature(trainer.finalize).return_annotation)
    for inherited in ("train", "resume", "save_checkpoint", "clip_and_step", "start_fresh"):
        assert getattr(trainer, inherited) is getattr(Trainer, inherited), inherited
    for hook in ("train_step", "checkpoint_state", "load_checkpoint_state", "finalize"):
        assert getattr(trainer, hook) is not getattr(Trainer, hook), hook


def test_trainer_files_leave_checkpoints_to_the_base():
    """Only lira/training.py reads and writes checkpoints (lira.checkpoint); a saved model's
    folder is checked where it is loaded (lasr/model.py, arca/model.py, and the baselines'
    export.py and merging.py, which read saved folders and train nothing)."""
    root = Path(__file__).resolve().parents[1]
    loaders = {"export.py", "merging.py"}
    files = [root / "arca" / "trainer.py", root / "lasr" / "trainer.py"]
    files += [
        f for f in sorted((root / "lira" / "baselines").glob("*.py")) if f.name not in loaders
    ]
    users = [f.name for f in files if "lira.checkpoint" in f.read_text(encoding="utf-8")]
    assert users == []


def test_train_result_reads_as_its_summary_and_history():
    r = TrainResult(step=3, history=[1.0, 2.0, 3.0], nonfinite_steps=1, summary={"eval": {}})
    assert len(r) == 3 and r["step"] == 3 and r["eval"] == {} and r["nonfinite_steps"] == 1
    with pytest.raises(KeyError):
        r["missing"]


def test_the_baseline_optimizer_is_fused_or_foreach():
    assert adamw_kwargs("cpu") in ({"fused": True}, {"foreach": True})


@pytest.mark.slow
def test_the_baseline_trainer_honours_report_to_and_max_grad_norm(models_config, tmp_path):
    """baselines.report_to picks the tracker (make_accelerator), the loss reaches it through
    log_metrics, gradients are clipped at baselines.max_grad_norm, finalize writes the folder."""
    from lira.baselines.contrastive import ContrastiveTrainer
    from lira.baselines.data import build_examples, training_splits
    from lira.models import load_backbone

    no_negatives = {"clear": ClearConfig(negatives=0)}
    bc = BaselinesConfig(steps=3, batch_size=4, lr=1e-3, recipes=no_negatives, max_grad_norm=0.25)
    cfg = RunConfig(output_dir=str(tmp_path), models=models_config, baselines=bc,
                    data=DataConfig(train_languages=["de"], max_train_queries=8))  # fmt: skip
    parallel, retrieval, _ = training_splits(cfg)
    examples, backbone = build_examples(parallel, retrieval), load_backbone(cfg.models)

    def trainer(bc: BaselinesConfig, **kw) -> ContrastiveTrainer:
        return ContrastiveTrainer(bc, backbone, "infonce", examples, retrieval.corpus,
                                  tmp_path / "infonce", models_cfg=cfg.models, **kw)  # fmt: skip

    tb = dataclasses.replace(bc, report_to="tensorboard")
    if importlib.util.find_spec("tensorboard") is None:
        with pytest.raises(ConfigError, match=r"baselines\.report_to.*pip install tensorboard"):
            trainer(tb)
    else:
        assert [t.name for t in trainer(tb).accelerator.trackers] == ["tensorboard"]
    assert not trainer(bc).accelerator.trackers  # report_to: none

    rec = Recorder()
    acc = Accelerator(cpu=True, log_with=[rec])
    acc.init_trackers("test")
    clips: list[float] = []
    real_clip = acc.clip_grad_norm_

    def clip(params, max_norm, *a, **kw):
        clips.append(max_norm)
        return real_clip(params, max_norm, *a, **kw)

    acc.clip_grad_norm_ = clip
    t = trainer(bc, accelerator=acc)
    result = t.train()
    assert isinstance(result, TrainResult) and result.history == t.history and t.step == 3
    assert result.step == 3 and result.nonfinite_steps == 0
    assert [step for _, step in rec.rows] == [1, 3]  # every 10th step and the last
    assert all(set(row) == {"loss", "lr"} for row, _ in rec.rows)
    assert clips == [0.25] * 3
    path = t.finalize()
    assert path == tmp_path / "infonce" and (path / "lira_baseline.json").is_file()


class Tiny(Trainer):
    """A trainer whose checkpoint is its step and one tensor."""

    section = "tiny"

    def checkpoint_state(self) -> dict:
        import torch

        return {"step": self.step, "w": torch.ones(2)}

    def save_files(self, folder: Path) -> None:
        pass

    def load_checkpoint_state(self, folder: Path, state: dict) -> None:
        self.step = int(state["step"])


def _tiny(cls: type[Trainer], root: Path, keep: int = 2) -> Trainer:
    from types import SimpleNamespace

    from lira.training import run_fingerprint

    fingerprint = run_fingerprint("tiny", {"tiny": {"steps": 8}})
    cfg = SimpleNamespace(steps=8, max_grad_norm=1.0)
    return cls(cfg, Accelerator(cpu=True), root, "Tiny", fingerprint, keep_checkpoints=keep)


def test_an_error_after_resuming_is_not_blamed_on_the_checkpoint(tmp_path):
    """:meth:`Trainer.after_resume` runs once the state is loaded, outside the check that calls a
    state "not fitting": a failure there (a translator down while Arca replays its memo) is
    raised as itself, not as a CheckpointError telling the user to delete a good checkpoint."""
    from lira.training import CheckpointError

    class Failing(Tiny):
        def after_resume(self) -> None:
            raise ValueError("translator down")

    first = _tiny(Tiny, tmp_path)
    first.step = 2
    first.save_checkpoint()
    again = _tiny(Failing, tmp_path)
    with pytest.raises(ValueError, match="translator down") as err:
        again.resume()
    assert not isinstance(err.value, CheckpointError) and again.step == 2


def test_resume_prunes_what_a_kill_between_save_and_prune_left(tmp_path):
    """A kill after a step folder is in place but before the older ones are pruned leaves one
    folder too many; ``--resume`` loads the newest and prunes to ``keep_checkpoints`` (the
    kill -9 benchmark found 3 folders kept where 2 are expected)."""
    first = _tiny(Tiny, tmp_path, keep=5)  # as if the last save's pruning never ran
    for step in (2, 4, 6):
        first.step = step
        first.save_checkpoint()
    again = _tiny(Tiny, tmp_path, keep=2)
    assert again.resume() and again.step == 6
    assert sorted(p.name for p in tmp_path.glob("step-*")) == ["step-00000004", "step-00000006"]


def test_stages_of_one_process_each_get_their_own_mixed_precision(tmp_path):
    """`lira run` and paper_scale run Arca (bf16), then a baseline ("no") in one process: the
    second Accelerator used to raise "AcceleratorState has already been initialized" (found on
    an H100 by ../shared/gpu_check.sh)."""
    first = make_accelerator("arca", "none", tmp_path, mixed_precision="bf16")
    assert first.mixed_precision == "bf16"
    second = make_accelerator("baselines", "none", tmp_path, mixed_precision="no")
    assert second.mixed_precision == "no"
    assert make_accelerator("lasr", "none", tmp_path).mixed_precision == "no"

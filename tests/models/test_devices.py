"""Every stage runs every model on the accelerator's device (issue 31), checked on a CPU.

A CPU-only machine has one device, so a model left where its loader put it computes just as
well as a placed one: the bug is silent (on a GPU node the 8B backbone then runs on the CPU).
The check gives the accelerator a device of its own, ``cpu:0`` (``Accelerator.device`` and
:func:`lira.models.devices.default_device` both answer it), which computes on the CPU but is
*named* apart from ``cpu``: ``Module.to`` is wrapped to record the device each module was
moved to, and a forward pre-hook on every ``nn.Module`` records each module with parameters or
buffers that runs a forward without having been moved to ``cpu:0`` (never moved, or moved to
plain ``cpu``) and each tensor input on another device than the module's parameters. A stage
passes when that record is empty and the forwards of its frozen h and g (and trained parts)
were seen.
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

from arca.config import ArcaConfig
from lasr.config import LaSRConfig
from lira.baselines.clear import ClearConfig
from lira.baselines.config import BaselinesConfig
from lira.config import DataConfig
from lira.data.splits import load_splits
from lira.data.types import RetrievalData
from pipeline.runconfig import RunConfig

pytestmark = pytest.mark.slow

ACCELERATOR = torch.device("cpu", 0)
"""The accelerator's device in these tests: computes on the CPU, named apart from ``cpu``."""
_ATTR = "_placed_on"


class Placement:
    """What ran where while :func:`accelerator_device` was active."""

    def __init__(self) -> None:
        self.wrong: list[str] = []
        """One line per forward of a module off the accelerator's device."""
        self.ran: set[int] = set()
        """ids of the modules that ran a forward."""

    def saw(self, module: nn.Module) -> bool:
        """True when ``module`` or one of its submodules ran a forward."""
        return any(id(m) in self.ran for m in module.modules())


@contextlib.contextmanager
def accelerator_device() -> Iterator[Placement]:
    """Give the accelerator the device ``cpu:0`` and record the forwards that run elsewhere."""
    import accelerate

    import lira.models.devices as devices

    rec = Placement()
    flagged: list[weakref.ref] = []
    orig_to, orig_cpu = nn.Module.to, nn.Module.cpu
    orig_device, orig_default = accelerate.Accelerator.device, devices.default_device

    def mark(module: nn.Module, device: torch.device) -> None:
        for m in module.modules():
            m.__dict__[_ATTR] = device
            flagged.append(weakref.ref(m))

    def to(self: nn.Module, *args, **kwargs) -> nn.Module:
        out = orig_to(self, *args, **kwargs)
        device = torch._C._nn._parse_to(*args, **kwargs)[0]
        if device is not None:
            mark(self, device)
        return out

    def cpu(self: nn.Module) -> nn.Module:
        out = orig_cpu(self)
        mark(self, torch.device("cpu"))
        return out

    def hook(module: nn.Module, args: tuple) -> None:
        own = [*module.parameters(recurse=False), *module.buffers(recurse=False)]
        if not own:
            return
        rec.ran.add(id(module))
        placed = module.__dict__.get(_ATTR)
        name = type(module).__name__
        if placed != ACCELERATOR:
            rec.wrong.append(f"{name} ran on {placed or 'its loader device (never placed)'}")
        physical = own[0].device
        for a in args:
            if isinstance(a, torch.Tensor) and a.device != physical:
                rec.wrong.append(f"{name} got an input on {a.device}, its weights on {physical}")

    nn.Module.to, nn.Module.cpu = to, cpu
    accelerate.Accelerator.device = property(lambda self: ACCELERATOR)
    devices.default_device = lambda: ACCELERATOR
    handle = nn.modules.module.register_module_forward_pre_hook(hook)
    try:
        yield rec
    finally:
        handle.remove()
        nn.Module.to, nn.Module.cpu = orig_to, orig_cpu
        accelerate.Accelerator.device = orig_device
        devices.default_device = orig_default
        for ref in flagged:
            m = ref()
            if m is not None:
                m.__dict__.pop(_ATTR, None)


def _summary(rec: Placement) -> str:
    lines = list(dict.fromkeys(rec.wrong))
    return f"{len(rec.wrong)} forwards off the accelerator's device:\n  " + "\n  ".join(lines[:12])


def _subset(data: RetrievalData, n: int, extra: int = 12) -> RetrievalData:
    """The first ``n`` queries with their gold documents plus ``extra`` others."""
    queries = data.queries[:n]
    gold = {d for q in queries for d in data.qrels[q.id]}
    corpus = [d for d in data.corpus if d.id in gold]
    corpus += [d for d in data.corpus if d.id not in gold][:extra]
    return RetrievalData(queries, corpus, {q.id: data.qrels[q.id] for q in queries})


LASR = dict(steps=2, batch_size=4, encode_batch_size=8, fusion_dim=32, fusion_layers=1,
            log_every=100, save_every=100, eval_every=0)  # fmt: skip


@pytest.fixture(scope="module")
def run_cfg(models_config, tmp_path_factory) -> RunConfig:
    """A tiny run: MiniLM as h, the demo mT5 as g, German XQuAD-R (demo)."""
    out = tmp_path_factory.mktemp("devices")
    return RunConfig(
        output_dir=str(out),
        models=models_config,
        data=DataConfig(train_languages=["de"], eval_languages=["de"], max_train_queries=8),
        arca=ArcaConfig(steps=2, batch_size=2, eval_batch_size=4, log_every=1, save_every=100),
        lasr=LaSRConfig(**LASR),
        baselines=BaselinesConfig(
            steps=2, batch_size=4, recipes={"clear": ClearConfig(negatives=1)}
        ),
    )


def test_arca_trains_and_evaluates_on_the_accelerator(run_cfg, tmp_path):
    from arca.data import ArcaItem
    from arca.model import ArcaModel
    from arca.trainer import ArcaTrainer
    from lira.models import load_backbone, load_encoder
    from lira.translation.types import Candidate

    pairs = [(f"Wie heißt die Stadt Nummer {i}?", f"What is city number {i} called?")
             for i in range(8)]  # fmt: skip
    items = [ArcaItem(de, "de", [Candidate("gold", en, (9, 9, 9)), Candidate("short", en[:9],
             (3, 3, 3))]) for de, en in pairs]  # fmt: skip
    backbone, encoder = load_backbone(run_cfg.models), load_encoder(run_cfg.models)
    model = ArcaModel.from_config(run_cfg.models, run_cfg.arca, backbone=backbone, encoder=encoder)
    with accelerator_device() as rec:
        trainer = ArcaTrainer(run_cfg.arca, model, items[:6], tmp_path / "arca",
                              eval_items=items[6:])  # fmt: skip
        trainer.evaluate(items[6:])  # the held-out pass before training (as `lira arca`)
        summary = trainer.train()
    assert summary["step"] == 2 and summary["eval"]["n"] == 2
    assert rec.saw(backbone) and rec.saw(encoder) and rec.saw(model.adaptor)
    assert not rec.wrong, _summary(rec)


def test_lasr_builds_banks_trains_and_evaluates_on_the_accelerator(run_cfg):
    from lasr.model import LiRAModel
    from lasr.trainer import LaSRTrainer

    splits = load_splits(run_cfg.data)
    train, dev = _subset(splits.train, 6), _subset(splits.train, 3, extra=6)
    torch.manual_seed(0)
    model = LiRAModel.from_config(run_cfg, None)
    with accelerator_device() as rec:
        trainer = LaSRTrainer(run_cfg.lasr, model, run_cfg.output_dir, retrieval=train,
                              eval_retrieval=dev)  # fmt: skip
        trainer.train()
        result = trainer.evaluate(dev)
        trainer.finalize()  # <output_dir>/lira-model, read by the compare test below
    assert trainer.step == 2 and result["retrieval"]["queries"] == 3
    assert rec.saw(model.backbone) and rec.saw(model.arca.encoder) and rec.saw(model.head)
    assert not rec.wrong, _summary(rec)


def test_baseline_mines_and_trains_on_the_accelerator(run_cfg, monkeypatch):
    from lira.baselines import contrastive as baselines
    from lira.baselines.engine import run_baselines

    seen: list[nn.Module] = []
    load = baselines.load_backbone

    def loaded(*args, **kwargs):  # keep every backbone the stage loads (miner, model)
        seen.append(load(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(baselines, "load_backbone", loaded)
    with accelerator_device() as rec:
        summary = run_baselines(run_cfg, methods=["clear"], resume=False)
    assert summary["clear"]["steps"] == 2
    assert len(seen) == 2 and all(rec.saw(m) for m in seen)  # the miner and the trained model
    assert not rec.wrong, _summary(rec)


def test_compare_and_eval_encode_on_the_accelerator(run_cfg):
    from lasr.eval_models import encoder_for_eval, run_encoders
    from lasr.model import LiRAModel

    out = Path(run_cfg.output_dir)
    if not (out / "lira-model").is_dir():  # run alone: an untrained LiRA model will do
        LiRAModel.from_config(run_cfg, None).save_pretrained(out / "lira-model")
    cfg = dataclasses.replace(run_cfg, baselines=dataclasses.replace(run_cfg.baselines,
                                                                    methods=["clear"]))  # fmt: skip
    texts, langs = ["Wie viele Punkte gab es?", "How many points were there?"], ["de", "en"]
    with accelerator_device() as rec:
        models = run_encoders(cfg)
        for encoder in models.values():
            encoder.encode(texts, langs=langs)
        _, lira = encoder_for_eval(cfg, str(out / "lira-model"))
        lira.encode(texts, langs=langs)
        _, backbone = encoder_for_eval(cfg, "")
        backbone.encode(texts)
    assert rec.saw(models["backbone"]) and rec.saw(models["lira"]) and rec.saw(lira)
    assert not rec.wrong, _summary(rec)


def test_from_pretrained_places_every_part_and_to_moves_them(run_cfg, tmp_path):
    from lasr.model import LiRAModel

    LiRAModel.from_config(run_cfg, None).save_pretrained(tmp_path / "m")
    with accelerator_device():
        model = LiRAModel.from_pretrained(tmp_path / "m")
        parts = [model.backbone, model.arca.encoder, model.arca.adaptor, model.arca.actor,
                 model.head, model.net.adaptor, model.arca.backbone]  # fmt: skip
        assert all(m.__dict__.get(_ATTR) == ACCELERATOR for p in parts for m in p.modules())
        model.cpu()
        assert all(m.__dict__.get(_ATTR) == torch.device("cpu") for p in parts for m in p.modules())

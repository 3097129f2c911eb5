"""A tiny trained Arca checkpoint for the tuning tests (its anchor space gives the reward)."""

from __future__ import annotations

import pytest
import torch

from arca.config import ArcaConfig
from arca.model import load_arca
from arca.trainer import ArcaTrainer

from ..conftest import make_items

SRC = "Wie viele Menschen leben in Berlin?"
EN = "How many people live in Berlin?"


def _reset_accelerate() -> None:
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)


@pytest.fixture(scope="session")
def arca_dir(models_config, arca_backbone, xquad_pairs, tmp_path_factory):
    """A tiny Arca (frozen demo mT5 as g, MiniLM as h) trained for 3 steps, saved as final/."""
    from arca.model import ArcaModel
    from lira.models import load_encoder

    torch.manual_seed(0)
    cfg = ArcaConfig(steps=3, batch_size=4, train_encoder=False, log_every=1, save_every=100)
    model = ArcaModel.from_config(
        models_config, cfg, backbone=arca_backbone, encoder=load_encoder(models_config)
    )
    out = tmp_path_factory.mktemp("arca")
    _reset_accelerate()
    ArcaTrainer(cfg, model, make_items(xquad_pairs[:16]), out).train()
    _reset_accelerate()
    return out / "final"


@pytest.fixture(scope="module")
def arca(arca_dir, arca_backbone):
    return load_arca(arca_dir, backbone=arca_backbone)

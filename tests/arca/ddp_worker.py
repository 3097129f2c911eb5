"""Worker for test_ddp.py, run as ``accelerate launch ... tests/arca/ddp_worker.py SPEC OUT``.

SPEC is a JSON file: {"models": ModelsConfig dict, "pairs": [[source, english], ...]}. Each
rank trains the same Arca config on its shard and writes its final weights to OUT/w<rank>.pt.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from accelerate.utils import set_seed

from arca.config import ArcaConfig
from arca.data import ArcaItem
from arca.model import ArcaModel
from arca.trainer import ArcaTrainer
from lira.config import ModelsConfig, from_dict
from lira.models import load_backbone, load_encoder
from lira.translation.types import Candidate


def main(spec_path: str, out: str) -> None:
    """Train 4 steps (grad_accum 2) and save this rank's weights."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    models = from_dict(ModelsConfig, spec["models"], "models")
    items = [
        ArcaItem(
            src, "de", [Candidate("gold", en, (9, 9, 9)), Candidate("bad", en[::-1], (2, 2, 2))]
        )
        for src, en in spec["pairs"]
    ]
    cfg = ArcaConfig(steps=4, batch_size=4, grad_accum=2, log_every=2, save_every=100)
    set_seed(0)
    model = ArcaModel.from_config(models, cfg, load_backbone(models), load_encoder(models))
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    trainer = ArcaTrainer(cfg, model, items, Path(out) / "arca")
    set_seed(1 + trainer.accelerator.process_index)  # ranks sample differently
    trainer.train()
    rank = trainer.accelerator.process_index
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    torch.save(
        {"state": state, "init": init, "world": trainer.world, "history": trainer.history},
        Path(out) / f"w{rank}.pt",
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

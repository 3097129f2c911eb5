"""``lira compare`` draws Arca's selection shares (paper 004 Fig. 10) from what Arca writes."""

from __future__ import annotations

import json

import pytest

from evaluators import compare
from evaluators.compare import arca_diagnostics


def test_selection_plot_from_an_arca_summary(tmp_path, monkeypatch):
    # the keys `lira arca` writes in <out>/arca/summary.json (arca/trainer.py: summary)
    summary = {
        "step": 60,
        "selection": {"m2m": 0.25, "smollm2": 0.75},
        "eval": {"cos": 0.7, "eps1": 0.4, "selection": {"m2m": 0.5, "smollm2": 0.5}},
    }
    (tmp_path / "arca").mkdir()
    (tmp_path / "arca" / "summary.json").write_text(json.dumps(summary))
    drawn = []
    real = compare.diag.plot_selection

    def spy(shares, path, title):
        drawn.append(shares)
        return real(shares, path, title)

    monkeypatch.setattr(compare.diag, "plot_selection", spy)
    got = arca_diagnostics(tmp_path, tmp_path / "dg")
    assert drawn == [{"held-out (arg-max)": {"m2m": 0.5, "smollm2": 0.5},
                      "train (sampled)": {"m2m": 0.25, "smollm2": 0.75}}]  # fmt: skip
    png = tmp_path / "dg" / "arca_selection.png"
    assert png.is_file() and png.stat().st_size > 2000
    assert got["selection"] == summary["selection"]


def test_no_plot_without_selection(tmp_path, caplog):
    (tmp_path / "arca" / "final").mkdir(parents=True)
    (tmp_path / "arca" / "final" / "metrics.json").write_text(json.dumps({"step": 3}))
    with caplog.at_level("WARNING"):
        arca_diagnostics(tmp_path, tmp_path / "dg")
    assert not (tmp_path / "dg" / "arca_selection.png").exists()
    assert "no 'selection' shares" in caplog.text
    assert arca_diagnostics(tmp_path / "nothing", tmp_path / "dg") == {}


@pytest.mark.slow
def test_selection_plot_after_a_real_arca_run(models_config, tmp_path):
    """Two Arca steps on demo models: what ArcaTrainer writes is what compare reads."""
    import torch

    from arca.config import ArcaConfig
    from arca.data import ArcaItem
    from arca.model import ArcaModel
    from arca.trainer import ArcaTrainer
    from lira.models import load_backbone, load_encoder
    from lira.translation.types import Candidate

    items = [
        ArcaItem(src, "de", [Candidate("good", en, (9, 9, 9)), Candidate("bad", en[::-1], (2, 2, 2))])
        for src, en in [("Wie alt ist er?", "How old is he?"), ("Wo ist das Haus?", "Where is the house?"),
                        ("Was kostet das?", "What does it cost?"), ("Wer kommt?", "Who is coming?")]
    ]  # fmt: skip
    cfg = ArcaConfig(steps=2, batch_size=2, log_every=1, save_every=100)
    torch.manual_seed(0)
    model = ArcaModel.from_config(
        models_config,
        cfg,
        backbone=load_backbone(models_config),
        encoder=load_encoder(models_config),
    )
    trainer = ArcaTrainer(cfg, model, items, tmp_path / "arca", eval_items=items[:2])
    trainer.train()
    arca_diagnostics(tmp_path, tmp_path / "dg")
    assert (tmp_path / "dg" / "arca_selection.png").is_file()


def test_training_curves_from_arca_and_lasr_logs(tmp_path):
    from evaluators.diagnostics import plot_training_curves

    (tmp_path / "arca").mkdir()
    (tmp_path / "lasr").mkdir()
    arca = [{"step": s, "loss": 1 / s, "reward": s / 10, "selection": {"m": 1.0}} for s in (1, 2)]
    lasr = [{"step": s, "loss": 2 / s, "loss_rank": 1 / s, "lr": 1e-4} for s in (1, 2, 3)]
    (tmp_path / "arca" / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in arca))
    (tmp_path / "lasr" / "log.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in lasr) + '{"step": 4, "lo'  # a torn last line
    )
    logs = {"Arca": tmp_path / "arca" / "log.jsonl", "LaSR": tmp_path / "lasr" / "log.jsonl"}
    png = plot_training_curves(logs, tmp_path / "curves.png")
    assert png is not None and png.stat().st_size > 5000
    assert plot_training_curves({"LaSR": tmp_path / "none.jsonl"}, tmp_path / "x.png") is None

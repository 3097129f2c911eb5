"""LaSR's stream banks say what they compute before step 1 (issue 52.5: LaSR was silent for
~50 s before its first progress bar)."""

from __future__ import annotations

import dataclasses

from lasr.banks import pair_bank
from lasr.model import LiRAModel
from lira.data.types import PairData
from pipeline.runconfig import RunConfig


def test_building_a_bank_shows_a_bar(tmp_path, models_config, capsys):
    models = dataclasses.replace(models_config, backbone="demo:minilm", backbone_pooling="mean")
    model = LiRAModel.from_config(RunConfig(output_dir=str(tmp_path), models=models), None)
    words = ["ein Hund", "eine Katze", "ein Haus", "der Baum", "die Stadt", "das Meer"]
    pairs = PairData(words[:3], words[3:], [1.0, 2.0, 3.0], ["de"] * 3, ["de"] * 3)
    bank = pair_bank(model, pairs, batch_size=2)
    assert len(bank.keys) == 6
    err = capsys.readouterr().err
    # the bar names what it computes and its batches (leave=False clears it: the last frame
    # drawn depends on timing)
    assert "lasr: query bank (h, g, Arca)" in err and "/3 [" in err

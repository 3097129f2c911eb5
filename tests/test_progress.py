"""Progress with an ETA for long phases (issue 40 item 7): every trainer's loop (Arca, LaSR,
the baselines share it) and the demo Marian build."""

from __future__ import annotations

import re
from dataclasses import dataclass

from accelerate import Accelerator

from lira.training import Trainer


@dataclass
class _Cfg:
    steps: int = 3
    save_every: int = 0
    max_grad_norm: float = 1.0


class _Counting(Trainer):
    section = "arca"

    def train_step(self) -> dict[str, float]:
        self.step += 1
        return {"loss": 1.0 / self.step}


def test_the_training_loop_shows_a_bar_with_an_eta(tmp_path, capsys):
    trainer = _Counting(_Cfg(), Accelerator(cpu=True), tmp_path, "Toy", fingerprint={"x": 1})
    trainer.train()
    err = capsys.readouterr().err
    assert "Toy" in err and "3/3" in err, err  # the trainer's name, steps done / total
    assert "<" in err and ("step/s" in err or "s/step" in err)  # elapsed<remaining, rate


def test_the_demo_marian_build_shows_a_bar(monkeypatch, capsys):
    import torch

    from lira.demo import marian as demo

    class _Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1))

        def forward(self, input_ids, attention_mask, labels):
            return type("Out", (), {"loss": (self.w * input_ids.float()).mean()})()

    def tok(texts, text_target, **kw):
        n = len(texts)
        return {"input_ids": torch.ones(n, 2, dtype=torch.long),
                "attention_mask": torch.ones(n, 2, dtype=torch.long),
                "labels": torch.ones(n, 2, dtype=torch.long)}  # fmt: skip

    tok.pad_token_id = 0
    demo._train_seq2seq(_Tiny(), tok, [("a", "b")] * 60, steps=4)
    err = capsys.readouterr().err
    assert "build demo:marian" in err and "4/4" in err, err


def test_the_fixed_fusion_fit_shows_a_bar_with_an_eta(models_config, tmp_path, capsys):
    """Issue 58, item 3: LaSR's fixed-fusion fit logged one line, then ran 12.5 min without
    output (19 validation pools, 2 cores); a bar now counts the pools scored, with an ETA."""
    from lasr.config import LaSRConfig
    from lasr.model import LiRAModel
    from lasr.trainable import fit_validation_fusion
    from lira.data.types import Record, RetrievalData
    from pipeline.runconfig import RunConfig

    model = LiRAModel.from_config(RunConfig(output_dir=str(tmp_path), models=models_config), None)
    en = ["Who led the team?", "Where is Fresno?", "When did the stadium open?"]
    de = ["Wer führte das Team an?", "Wo liegt Fresno?", "Wann öffnete das Stadion?"]
    docs = ["The coach led the team.", "Fresno is in California.", "It opened in 1990."]
    corpus = [Record(f"d{i}", t, "en") for i, t in enumerate(docs)]
    queries = [Record(f"en{i}", t, "en") for i, t in enumerate(en)]
    queries += [Record(f"de{i}", t, "de") for i, t in enumerate(de)]
    pool = RetrievalData(queries, corpus, {q.id: {f"d{q.id[2:]}": 1} for q in queries})
    pools = {"en-en": pool, "lang-en:de": pool, "multi": pool}
    fit_validation_fusion(model, pools, LaSRConfig(fusion_grid=[0.0, 1.0]))
    err = capsys.readouterr().err
    # pools scored / all [elapsed<remaining, rate]
    assert re.search(r"fixed fusions: 100%.*3/3 \[\d+:\d+<\d+:\d+, .*(pool/s|s/pool)\]", err), err

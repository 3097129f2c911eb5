"""Progress with an ETA for long phases (issue 40 item 7): every trainer's loop (Arca, LaSR,
the baselines share it) and the demo Marian build."""

from __future__ import annotations

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

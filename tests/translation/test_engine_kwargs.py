"""vLLM parallel settings pass from the translator config to ``vllm.LLM`` (a stand-in module)."""

from __future__ import annotations

import pytest

from lira.config import ConfigError, from_dict
from lira.translation import translators
from lira.translation.config import TranslatorConfig


def test_tensor_parallel_and_engine_kwargs_reach_vllm(fake_vllm, monkeypatch):
    monkeypatch.setenv("LIRA_VLLM_MAX_MODEL_LEN", "2048")
    cfg = from_dict(TranslatorConfig, {
        "name": "big", "kind": "vllm", "model": "org/big", "tensor_parallel_size": 4,
        "engine_kwargs": {"pipeline_parallel_size": 2, "max_model_len": 8192,
                          "compilation_config": {"level": 3}},
    })  # fmt: skip
    translators.VLLMTranslator(cfg)
    translators.VLLMTranslator(cfg)  # the engine is cached (a dict option is hashable in the key)
    assert len(fake_vllm) == 1
    kw = fake_vllm[0]
    assert kw["model"] == "org/big" and kw["tensor_parallel_size"] == 4
    assert kw["pipeline_parallel_size"] == 2 and kw["compilation_config"] == {"level": 3}
    assert kw["max_model_len"] == 8192  # engine_kwargs override the LIRA_VLLM_* defaults
    assert kw["max_num_seqs"] == 64
    # a translator without engine_kwargs shares the critic's engine (same model, same size)
    plain = TranslatorConfig(name="p", kind="vllm", model="org/big", tensor_parallel_size=4)
    assert translators.VLLMTranslator(plain).llm is translators.vllm_engine("org/big", 4)
    assert len(fake_vllm) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"data_parallel_size": 2}, "run one `lira translate --shard I/N` per GPU group"),
        ({"tensor_parallel_size": 2}, "set \\['tensor_parallel_size'\\] as the translator's own"),
        ({"model": "x"}, "set \\['model'\\]"),
    ],
)
def test_engine_kwargs_that_cannot_work_are_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=rf"engine_kwargs.*{message}"):
        TranslatorConfig(name="t", kind="vllm", model="m", engine_kwargs=kwargs)


def test_dtype_helper_is_private_and_not_models_torch_dtype():
    assert not hasattr(translators, "torch_dtype")  # lira.models.torch_dtype means another thing
    assert translators._default_dtype_for("cuda") == "auto"
    import torch

    assert translators._default_dtype_for("cpu") is torch.float32


def test_vllm_max_num_seqs_follows_max_concurrency(fake_vllm):
    """The offline engine runs ``max_concurrency`` sequences at once (at least the default
    64); the runner hands it chunks of that many texts (``vllm_max_num_seqs``)."""
    big = TranslatorConfig(name="b", kind="vllm", model="org/m", max_concurrency=256)
    translators.VLLMTranslator(big)
    assert fake_vllm[-1]["max_num_seqs"] == 256
    assert translators.vllm_max_num_seqs(big) == 256
    small = TranslatorConfig(name="s", kind="vllm", model="org/m", max_concurrency=8)
    assert translators.vllm_max_num_seqs(small) == 64  # LIRA_VLLM_MAX_NUM_SEQS default
    own = TranslatorConfig(name="o", kind="vllm", model="org/m", max_concurrency=256,
                           engine_kwargs={"max_num_seqs": 32})  # fmt: skip
    assert translators.vllm_max_num_seqs(own) == 32

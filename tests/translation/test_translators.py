"""transformers MT backend: language codes (M2M100-style) and batching on tiny real models."""

from __future__ import annotations

import json

import pytest

from lira.translation.config import TranslatorConfig
from lira.translation.translators import TransformersTranslator


@pytest.fixture(scope="module")
def m2m_path(tmp_path_factory) -> str:
    """A tiny M2M100 (real architecture + real SentencePiece tokenizer, random weights)."""
    import sentencepiece as spm
    import torch
    from transformers import M2M100Config, M2M100ForConditionalGeneration, M2M100Tokenizer

    d = tmp_path_factory.mktemp("m2m")
    corpus = d / "corpus.txt"
    corpus.write_text("\n".join(["Der Hund schläft im Garten.", "The dog sleeps."] * 50))
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(d / "spm"), vocab_size=40,
                                   model_type="bpe", minloglevel=2)  # fmt: skip
    sp = spm.SentencePieceProcessor(model_file=str(d / "spm.model"))
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    (d / "vocab.json").write_text(json.dumps(vocab))
    tok = M2M100Tokenizer(str(d / "vocab.json"), str(d / "spm.model"), language_codes="m2m100")
    n = max(tok.get_lang_id(c) for c in ("de", "en", "zu")) + 1
    torch.manual_seed(0)
    cfg = M2M100Config(vocab_size=n, d_model=16, encoder_layers=1, decoder_layers=1,
                       encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                       decoder_ffn_dim=32, max_position_embeddings=64, pad_token_id=1,
                       bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)  # fmt: skip
    out = d / "model"
    M2M100ForConditionalGeneration(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)


def test_m2m_codes_and_forced_bos(m2m_path):
    cfg = TranslatorConfig(name="m2m", kind="transformers", role="mt", model=m2m_path,
                           lang_codes={"de": "de", "en": "en"}, max_new_tokens=4)  # fmt: skip
    t = TransformersTranslator(cfg)
    assert t.seq2seq
    src, bos = t.seq2seq_codes("de")
    assert src == "de" and bos == t.tokenizer.get_lang_id("en")
    out = t.translate(["Der Hund schläft.", "Im Garten."], "de")
    assert all(o.ok for o in out), out
    # the encoder input starts with the source-language token
    assert t.tokenizer("Hallo")["input_ids"][0] == t.tokenizer.get_lang_id("de")
    with pytest.raises(ValueError, match=r"no language code for 'ru'"):
        t.translate(["Привет"], "ru")


def test_no_codes_means_plain_xx_en(m2m_path):
    t = TransformersTranslator(TranslatorConfig(name="m", kind="transformers", role="mt",
                                                model=m2m_path, max_new_tokens=4))  # fmt: skip
    assert t.seq2seq_codes("de") == (None, None)


def test_batched_equals_one_by_one(mt_path):
    texts = ["Der Hund schläft im Garten.", "Ja.", "Wo ist der Bahnhof, bitte?", "Danke schön."]
    cfg = TranslatorConfig(name="mt", kind="transformers", role="mt", model=mt_path,
                           max_new_tokens=8, batch_size=4)  # fmt: skip
    t = TransformersTranslator(cfg)
    batched = [o.raw for o in t.translate(texts, "de")]
    t.cfg = TranslatorConfig(name="mt", kind="transformers", role="mt", model=mt_path,
                             max_new_tokens=8, batch_size=1)  # fmt: skip
    single = [o.raw for o in t.translate(texts, "de")]
    assert batched == single  # greedy: padding must not change outputs, order is kept


def test_a_completion_prompt_gives_one_line_and_stops_at_a_line_break(lm_path):
    """fewshot-v1 on a causal LM: no chat template, generation stops on a token holding a line
    break (the ids are the tokenizer's: byte-level BPE marks it 'Ċ'), one line comes out."""
    cfg = TranslatorConfig(name="base", kind="transformers", model=lm_path,
                           prompt_version="fewshot-v1", max_new_tokens=24, batch_size=4)  # fmt: skip
    tr = TransformersTranslator(cfg)
    ends = tr.line_end_ids()
    tok = tr.tokenizer
    newline = tok("\n", add_special_tokens=False)["input_ids"]
    assert newline and set(newline) <= set(ends) and tok.eos_token_id in ends
    assert all(
        "\n" in tok.decode([i])
        for i in ends
        if i != tok.eos_token_id and i not in tok.all_special_ids
    )
    out = tr.translate(["Der Hund schläft.", "Wo ist der Bahnhof?"], "de")
    assert all(t.ok and "\n" not in t.raw for t in out)

"""Soft tokens reach the frozen LM; translation-only equals the plain-text path."""

from __future__ import annotations

import pytest
import torch

from lira.reasoning.soft_prompt import SoftPromptBuilder, user_message


@pytest.fixture(scope="module")
def lm(demo_cache):
    from lira.models import load_causal_lm

    model, tok = load_causal_lm("demo:qwen3-lm", str(demo_cache))
    return model.eval(), tok


def _last_logits(model, batch):
    with torch.no_grad():
        out = model(inputs_embeds=batch.inputs_embeds, attention_mask=batch.attention_mask)
    return out.logits[:, -1]


def test_translation_only_equals_plain_text_path(lm):
    model, tok = lm
    msg = user_message("translate-en", "Wie viele?", "How many points?", "Answer with a number.")
    assert "<source>" not in msg
    builder = SoftPromptBuilder(model, tok)
    batch = builder.build([msg])
    text = tok.apply_chat_template([{"role": "user", "content": msg}], tokenize=False,
                                   add_generation_prompt=True)  # fmt: skip
    ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        plain = model(input_ids=ids).logits[:, -1]
    torch.testing.assert_close(_last_logits(model, batch), plain, rtol=1e-4, atol=1e-4)


def test_soft_tokens_change_the_logits(lm):
    model, tok = lm
    d = model.get_input_embeddings().embedding_dim
    msg = user_message("both", "Wie viele?", "How many?", "Answer.")
    builder = SoftPromptBuilder(model, tok)
    g = torch.Generator().manual_seed(0)
    soft_a = torch.randn(1, 4, d, generator=g)
    soft_b = torch.randn(1, 4, d, generator=g)
    a1 = _last_logits(model, builder.build([msg], soft_a))
    a2 = _last_logits(model, builder.build([msg], soft_a.clone()))
    b = _last_logits(model, builder.build([msg], soft_b))
    torch.testing.assert_close(a1, a2)
    assert (a1 - b).abs().max() > 1e-3
    n_plain = builder.build(
        [msg.replace("<source>\u2063SOFT\u2063</source>", "")]
    ).inputs_embeds.shape[1]
    assert builder.build([msg], soft_a).inputs_embeds.shape[1] > n_plain
    with pytest.raises(ValueError, match="soft-token slot"):
        builder.build([msg])


def test_left_padding_keeps_each_row_unchanged(lm):
    model, tok = lm
    builder = SoftPromptBuilder(model, tok)
    short = user_message("direct", "Wie?", "", "Answer.")
    long = user_message(
        "direct", "Wie viele Punkte gab die Verteidigung der Panthers ab?", "", "Answer."
    )
    both = _last_logits(model, builder.build([short, long]))
    alone = torch.cat([_last_logits(model, builder.build([m])) for m in (short, long)])
    torch.testing.assert_close(both, alone, rtol=1e-3, atol=1e-3)
    gens = builder.generate([short, long], max_new_tokens=4)
    assert len(gens) == 2 and all(isinstance(g, str) for g in gens)


def test_unknown_mode_is_rejected():
    with pytest.raises(ValueError, match="unknown reasoning mode"):
        user_message("telepathy", "q", "y", "i")

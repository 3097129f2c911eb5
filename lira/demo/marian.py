"""The demo translator: a tiny Marian xx->en model trained on the demo's parallel questions.

Training is deterministic (fixed seed, fixed step count :data:`MARIAN_STEPS`) and sees only the
questions outside :func:`lira.demo.text.demo_heldout_ids` (build 5: those are the front of the
splits' drawn order, not the smallest ids, and no training question repeats a held one's text).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from lira.demo.builders import SEED, bpe_tokenizer, seed_everything
from lira.demo.text import LANGS, demo_corpus, demo_parallel_questions

if TYPE_CHECKING:  # torch and transformers load only when the model is built
    from transformers import MarianMTModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

MARIAN_STEPS = 400
"""Fixed training budget of the demo MT model (about 60 s on 2 threads, 100 s on 1)."""


def build_marian(out: Path, steps: int = MARIAN_STEPS) -> None:
    """Tiny ``MarianMTModel`` xx->en, trained ``steps`` steps on the demo parallel questions."""
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    specials = ["<pad>", "</s>", "<unk>"]
    tok = bpe_tokenizer(
        demo_corpus(LANGS),
        4000,
        specials,
        append="</s>",
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
    )
    tok.model_max_length = 128
    pad, eos = tok.pad_token_id, tok.eos_token_id
    cfg = MarianConfig(
        vocab_size=len(tok),
        d_model=128,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=256,
        decoder_ffn_dim=256,
        max_position_embeddings=128,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        pad_token_id=pad,
        eos_token_id=eos,
        decoder_start_token_id=pad,
        forced_eos_token_id=eos,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
    )
    seed_everything()
    model = MarianMTModel(cfg)
    pairs = demo_parallel_questions()
    _train_seq2seq(model, tok, pairs, steps)
    model.generation_config = GenerationConfig(
        pad_token_id=pad,
        eos_token_id=eos,
        decoder_start_token_id=pad,
        forced_eos_token_id=eos,
        bad_words_ids=[[pad]],
        num_beams=1,
        do_sample=False,
        max_new_tokens=48,
    )
    model.save_pretrained(out)
    tok.save_pretrained(out)
    with torch.no_grad():
        logger.info("demo marian: %r", _translate(model, tok, [pairs[0][0]])[0])


def _train_seq2seq(
    model: MarianMTModel, tok: PreTrainedTokenizerBase, pairs: list[tuple[str, str]], steps: int
) -> None:
    """Deterministic teacher-forced training (AdamW, seeded batch order) for ``steps`` steps."""
    import torch

    gen = torch.Generator().manual_seed(SEED)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 30) * max(0.1, 1 - s / steps)
    )
    from tqdm.auto import tqdm

    model.train()
    batch, order, pos = 48, torch.randperm(len(pairs), generator=gen), 0
    bar = tqdm(range(steps), desc="build demo:marian", unit="step")  # minutes on a busy CPU
    for step in bar:
        if pos + batch > len(order):
            order, pos = torch.randperm(len(pairs), generator=gen), 0
        idx = order[pos : pos + batch].tolist()
        pos += batch
        enc = tok(
            [pairs[i][0] for i in idx],
            text_target=[pairs[i][1] for i in idx],
            padding=True,
            truncation=True,
            max_length=64,
            return_tensors="pt",
        )
        labels = enc["labels"].masked_fill(enc["labels"] == tok.pad_token_id, -100)  # [B, T]
        loss = model(
            input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels
        ).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step % 100 == 0 or step == steps - 1:
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
            logger.debug("demo marian step %d/%d loss %.3f", step + 1, steps, loss.item())
    bar.close()
    model.eval()


def _translate(model: MarianMTModel, tok: PreTrainedTokenizerBase, texts: list[str]) -> list[str]:
    enc = tok(texts, return_tensors="pt", padding=True)
    out = model.generate(**enc)
    return tok.batch_decode(out, skip_special_tokens=True)

"""Feed [g(x); h(y)] to a frozen causal LM: soft tokens spliced into the chat prompt.

Paper 004 §3.1 / §5.1: the LLM sees z = [g(x); h(y)], where h(y) is the LLM's own input
embedding of the Arca-selected English translation y (``get_input_embeddings()``, App. C) and
g(x) is the multilingual path mapped by the Arca Adaptor into the LLM's input-embedding space
(App. D.1): S vectors, inserted as ``inputs_embeds`` between two plain-text marker strings.

Prompt layout (one user turn, the model's chat template applied around it):

    <source> [S soft tokens] </source>        (modes soft_only, both)
    English translation: {y}                  (modes translate-en, both)
    Question: {x}                              (mode direct)
    {task instruction}

In ``translate-en`` and ``direct`` no soft token is inserted and the embeddings are exactly
the LM's embeddings of the templated text, so the logits equal the plain-text path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from lira.translation.translators import vllm_engine

Mode = Literal["direct", "translate-en", "soft_only", "both"]
MODES: tuple[str, ...] = ("direct", "translate-en", "soft_only", "both")
SOFT_OPEN, SOFT_CLOSE = "<source>", "</source>"
_SENTINEL = "\u2063SOFT\u2063"  # never produced by a tokenizer's normal text


def user_message(mode: Mode, question: str, translation: str, instruction: str) -> str:
    """The user turn for one item, with a sentinel where the soft tokens go."""
    if mode not in MODES:
        raise ValueError(f"unknown reasoning mode {mode!r}; choose from {list(MODES)}")
    parts = []
    if mode in ("soft_only", "both"):
        parts.append(f"{SOFT_OPEN}{_SENTINEL}{SOFT_CLOSE}")
    if mode in ("translate-en", "both"):
        parts.append(f"English translation: {translation}")
    if mode == "direct":
        parts.append(f"Question: {question}")
    parts.append(instruction)
    return "\n".join(parts)


def _template(tokenizer: PreTrainedTokenizerBase, message: str) -> str:
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
        )
    return message + "\n"


@dataclass
class PromptBatch:
    """Left-padded ``inputs_embeds`` and ``attention_mask`` ready for ``generate``."""

    inputs_embeds: torch.Tensor  # [B, T, d]
    attention_mask: torch.Tensor  # [B, T]


class SoftPromptBuilder:
    """Builds ``inputs_embeds`` for a frozen causal LM, splicing soft tokens into the prompt."""

    def __init__(self, model: nn.Module, tokenizer: PreTrainedTokenizerBase) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.embed = model.get_input_embeddings()

    def _ids(self, text: str, first: bool) -> list[int]:
        # A chat template writes its own special tokens into the text; without one, the
        # tokenizer's usual specials (BOS) are added to the first piece only.
        plain = not getattr(self.tokenizer, "chat_template", None)
        return self.tokenizer(text, add_special_tokens=plain and first)["input_ids"]

    def token_ids(self, message: str) -> tuple[list[int], list[int] | None]:
        """Token ids before and after the soft-token slot (after = None: no slot)."""
        text = _template(self.tokenizer, message)
        if _SENTINEL not in text:
            return self._ids(text, first=True), None
        before, after = text.split(_SENTINEL, 1)
        return self._ids(before, first=True), self._ids(after, first=False)

    @torch.no_grad()
    def rows(self, messages: list[str], soft: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Embed each templated message ([T_i, d]); ``soft`` [B, S, d] fills the slots."""
        device = self.embed.weight.device
        dtype = self.embed.weight.dtype
        rows = []
        for i, message in enumerate(messages):
            before, after = self.token_ids(message)
            pieces = [self.embed(torch.tensor(before, device=device))]
            if after is not None:
                if soft is None:
                    raise ValueError("a message has a soft-token slot but no soft tokens given")
                pieces.append(soft[i].to(device=device, dtype=dtype))
                pieces.append(self.embed(torch.tensor(after, device=device)))
            rows.append(torch.cat(pieces, dim=0))
        return rows

    @torch.no_grad()
    def build(self, messages: list[str], soft: torch.Tensor | None = None) -> PromptBatch:
        """The rows of :meth:`rows`, left-padded into one batch (as ``generate`` needs)."""
        rows = self.rows(messages, soft)
        width = max(r.shape[0] for r in rows)
        first = rows[0]
        embeds = first.new_zeros(len(rows), width, first.shape[1])
        mask = torch.zeros(len(rows), width, dtype=torch.long, device=first.device)
        for i, r in enumerate(rows):
            embeds[i, width - r.shape[0] :] = r
            mask[i, width - r.shape[0] :] = 1
        return PromptBatch(embeds, mask)

    @torch.no_grad()
    def generate(
        self, messages: list[str], soft: torch.Tensor | None = None, max_new_tokens: int = 64
    ) -> list[str]:
        """Greedy generation from the spliced prompts; returns the decoded new text."""
        batch = self.build(messages, soft)
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id
        out = self.model.generate(
            inputs_embeds=batch.inputs_embeds,
            attention_mask=batch.attention_mask,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=pad,
        )
        return self.tokenizer.batch_decode(out, skip_special_tokens=True)


class VLLMSoftPromptGenerator:
    """Greedy generation through vLLM's ``prompt_embeds`` input (``enable_prompt_embeds``).

    The transformers model given to the builder only embeds the prompt tokens; vLLM runs the
    LLM itself. Same prompts, same soft-token splice as :meth:`SoftPromptBuilder.generate`.
    """

    def __init__(
        self,
        builder: SoftPromptBuilder,
        model: str,
        tensor_parallel_size: int = 1,
        cache_dir: str = "",
    ) -> None:
        self.builder = builder
        self.llm = vllm_engine(
            model, tensor_parallel_size, cache_dir=cache_dir, enable_prompt_embeds=True
        )

    def generate(
        self, messages: list[str], soft: torch.Tensor | None = None, max_new_tokens: int = 64
    ) -> list[str]:
        """Greedy generation of each message; returns the decoded new text."""
        from vllm import SamplingParams

        prompts = [{"prompt_embeds": r.cpu()} for r in self.builder.rows(messages, soft)]
        params = SamplingParams(temperature=0.0, max_tokens=max_new_tokens)
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        return [o.outputs[0].text for o in outs]

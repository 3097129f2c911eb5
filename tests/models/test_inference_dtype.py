"""Frozen encoders run in the configured dtype on CUDA, TF32 is on (issue 38, finding 8).

Checked on a CPU: the decision (autocast or not) is made on the device's type, so a g that
*reports* CUDA gets bf16 autocast when frozen, and the CPU keeps fp32 (its numerics unchanged).
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from lira.config import ModelsConfig
from lira.models import devices
from lira.models.encoders import TokenEncoder, load_encoder


@pytest.fixture(scope="module")
def fp32_g_under_bf16() -> TokenEncoder:
    """A tiny random mT5 g kept in fp32 (``encoder_dtype``) in a bf16 run (``dtype``)."""
    cfg = ModelsConfig(encoder="random:tiny-mt5-encoder", encoder_max_length=16,
                       dtype="bfloat16", encoder_dtype="float32")  # fmt: skip
    return load_encoder(cfg)


@pytest.mark.filterwarnings("ignore:User provided device_type")
def test_a_frozen_fp32_g_autocasts_to_the_run_dtype_on_cuda(fp32_g_under_bf16, monkeypatch):
    g = fp32_g_under_bf16
    assert g.inference_dtype == torch.bfloat16
    assert next(g.parameters()).dtype == torch.float32
    # on the CPU nothing changes: fp32 states, as before
    assert isinstance(g.frozen_autocast(), contextlib.nullcontext)
    tokens, _ = g(["ein kurzer Satz"])
    assert tokens.dtype == torch.float32
    monkeypatch.setattr(TokenEncoder, "device", property(lambda self: torch.device("cuda")))
    with torch.no_grad():  # inference: bf16 autocast
        ctx = g.frozen_autocast()
        assert isinstance(ctx, torch.autocast) and ctx.fast_dtype == torch.bfloat16
    for p in g.parameters():  # g being fine-tuned: the trainer's mixed precision applies
        p.requires_grad_(True)
    try:
        assert isinstance(g.frozen_autocast(), contextlib.nullcontext)
    finally:
        for p in g.parameters():
            p.requires_grad_(False)


def test_a_g_in_the_run_dtype_needs_no_autocast():
    cfg = ModelsConfig(encoder="random:tiny-mt5-encoder", encoder_max_length=16)
    assert load_encoder(cfg).inference_dtype is None  # fp32 run, fp32 g


def test_tf32_is_enabled_on_cuda(monkeypatch):
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    torch.backends.cuda.matmul.allow_tf32 = False
    devices.enable_tf32()
    assert torch.backends.cuda.matmul.allow_tf32 is False  # no CUDA: untouched
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    try:
        devices.enable_tf32()
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags

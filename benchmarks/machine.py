"""The machine a benchmark ran on, printed beside its figures: CPU model, SIMD flags, cores."""

from __future__ import annotations

import os
from pathlib import Path


def cpu() -> str:
    """The CPU model, its SIMD flags that matter here, and the cores this process may use."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines()
                  if ln.startswith("model name")), "unknown CPU")  # fmt: skip
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines()
                  if ln.startswith("flags")), [])  # fmt: skip
    simd = sorted(f for f in set(flags) if f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16"))
    return f"{model}, {len(os.sched_getaffinity(0))} cores, flags {' '.join(simd) or 'none'}"

"""The Python, NumPy and torch random states of a process, saved with a checkpoint to resume."""

from __future__ import annotations

import random
from typing import Any

import numpy as np


def rng_state() -> dict[str, object]:
    """The Python, NumPy and torch RNG states (to restore on resume)."""
    import torch

    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the states captured by :func:`rng_state` (also after save/load_state)."""
    import torch

    py, ns = state["python"], state["numpy"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    np.random.set_state(tuple(ns) if isinstance(ns, list) else ns)
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])

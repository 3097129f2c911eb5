"""The accelerate setup of a training process: the Accelerator and its tracker, the process group.

Every trainer builds its ``accelerate.Accelerator`` with :func:`make_accelerator` (mixed
precision, gradient accumulation, the ``report_to`` tracker: tensorboard or wandb); work shared
across the processes of a launch is split by :func:`live_world`; on a multi-process launch
without CUDA accelerate runs on the CPU with gloo (:func:`distributed_cpu`).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from lira.config import ConfigError

if TYPE_CHECKING:
    from accelerate import Accelerator, PartialState
    from accelerate.utils import KwargsHandler

TRACKER_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb"}
"""The package each ``report_to`` value needs."""


def distributed_cpu() -> bool:
    """True under a multi-process launch without CUDA: accelerate then needs cpu=True (gloo)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available()


def process_state() -> PartialState:
    """accelerate's process state (the launch's process group; gloo on CPU), shared with every
    Accelerator of the process: ``num_processes`` 1 outside a launcher."""
    from accelerate import PartialState

    return PartialState(cpu=distributed_cpu())


def live_world() -> tuple[int, int]:
    """(processes, this process's rank) of the launch's live process group: work shared across
    processes is split by it. (1, 0) outside a launcher or once the group is shut down
    (``Accelerator.end_training``): each process then does all of that work itself."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return 1, 0
    return dist.get_world_size(), dist.get_rank()


def make_accelerator(
    section: str,
    report_to: str,
    output_dir: str | Path,
    mixed_precision: str = "no",
    grad_accum: int = 1,
    kwargs_handlers: list[KwargsHandler] | None = None,
    run_name: str | None = None,
) -> Accelerator:
    """An ``accelerate.Accelerator`` for trainer ``section`` with its tracker started (as run
    ``run_name``, default ``section``)."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    if report_to != "none":
        package = TRACKER_PACKAGES[report_to]
        if importlib.util.find_spec(package) is None:
            raise ConfigError(
                f"{section}.report_to",
                f"{report_to} needs the {package} package: pip install {package}, or set "
                f"{section}.report_to=none",
            )
    state = AcceleratorState._shared_state
    if state and state.get("_mixed_precision") != mixed_precision:
        # one process runs several stages (`lira run`, benchmarks): each stage's precision is its
        # own; the process group (PartialState) is kept
        AcceleratorState._reset_state()
    acc = Accelerator(
        mixed_precision=mixed_precision,
        gradient_accumulation_steps=grad_accum,
        cpu=distributed_cpu(),
        log_with=None if report_to == "none" else report_to,
        project_dir=str(Path(output_dir) / "runs"),
        kwargs_handlers=kwargs_handlers or [],
    )
    if report_to != "none":
        acc.init_trackers(run_name or section)
    return acc


def finish_trackers(acc: Accelerator) -> None:
    """End the accelerator's trackers but keep the process group (for a process that goes on to
    train again, as ``lira baseline`` does once per method; ``end_training`` destroys it)."""
    for tracker in getattr(acc, "trackers", None) or []:
        tracker.finish()
    acc.trackers = []


def adamw_kwargs(device: torch.device | str) -> dict[str, bool]:
    """``fused=True`` where torch has a fused Adam(W) kernel for the CPU and ``device``, else
    ``foreach=True``: one kernel over every parameter instead of torch's per-tensor loop (its
    default off CUDA); the update equals the loop's up to float rounding."""
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

        fused = {"cpu", torch.device(device).type} <= set(_get_fused_kernels_supported_devices())
    except (ImportError, AttributeError):  # a private helper: absent in some torch versions
        fused = False
    return {"fused": True} if fused else {"foreach": True}


def end_process_group() -> None:
    """Destroy the launcher's process group, if any: once, when a ``lira`` command is done (the
    stages of ``lira run`` share it, so no trainer ends it)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def log_metrics(acc: Accelerator, terms: Mapping[str, object], step: int) -> None:
    """Send the numeric ``terms`` of ``step`` to the accelerator's trackers (if any)."""
    if getattr(acc, "trackers", None):
        acc.log({k: float(v) for k, v in terms.items() if isinstance(v, (int, float))}, step=step)

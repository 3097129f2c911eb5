"""What the Arca, LaSR and baseline trainers share: one accelerate setup and its trackers.

Every trainer follows one contract: ``XTrainer(cfg, model, ..., output_dir)``;
``train(resume=False)`` runs to ``cfg.steps`` (continuing from the latest intact checkpoint
when ``resume``; a checkpoint written under another config is refused, see
:func:`lira.checkpoint.check_fingerprint`); ``finalize()`` writes the final loadable folder and
returns its path. Gradients are clipped at ``cfg.max_grad_norm``; a step whose loss or gradient
norm is not finite is skipped and counted. ``cfg.report_to`` sends the logged terms to an
accelerate tracker (tensorboard or wandb) as well as to the log.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import torch

from lira.config import ConfigError

TRACKER_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb"}
"""The package each ``report_to`` value needs."""


def distributed_cpu() -> bool:
    """True under a multi-process launch without CUDA: accelerate then needs cpu=True (gloo)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available()


def make_accelerator(
    section: str,
    report_to: str,
    output_dir: str | Path,
    mixed_precision: str = "no",
    grad_accum: int = 1,
    kwargs_handlers: list[Any] | None = None,
    run_name: str | None = None,
) -> Any:
    """An ``accelerate.Accelerator`` for trainer ``section`` with its tracker started (as run
    ``run_name``, default ``section``)."""
    from accelerate import Accelerator

    if report_to != "none":
        package = TRACKER_PACKAGES[report_to]
        if importlib.util.find_spec(package) is None:
            raise ConfigError(
                f"{section}.report_to",
                f"{report_to} needs the {package} package: pip install {package}, or set "
                f"{section}.report_to=none",
            )
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


def finish_trackers(acc: Any) -> None:
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


def log_metrics(acc: Any, terms: dict[str, Any], step: int) -> None:
    """Send the numeric ``terms`` of ``step`` to the accelerator's trackers (if any)."""
    if getattr(acc, "trackers", None):
        acc.log({k: float(v) for k, v in terms.items() if isinstance(v, (int, float))}, step=step)

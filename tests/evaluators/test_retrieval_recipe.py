"""The GPU recipe of the paper's retrieval setting: it parses, builds its stages, and, without
the weights (this machine), stops at once naming every missing model, without a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.runconfig import load_config
from pipeline.stages import ORDER

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "retrieval_qwen3_8b.yaml"
SCRIPT = REPO / "scripts" / "retrieval_qwen3_8b.sh"
TABLE_15 = {  # paper 004 Table 15, as sets (slot order aside)
    0: {"opus-mt", "m2m100", "nllb-600m", "nllb-3.3b"},
    1: {"llama", "opus-mt", "m2m100", "nllb-3.3b"},
    2: {"llama", "gemma", "m2m100", "nllb-3.3b"},
    3: {"llama", "gemma", "qwen", "nllb-3.3b"},
    4: {"llama", "gemma", "qwen", "ds-r1"},
}


def _env(tmp_path, **extra):
    """This venv's python, no hub access and an empty hub cache (no weights anywhere)."""
    env = {k: v for k, v in os.environ.items() if k != "DRY_RUN"}
    env.update(PY=sys.executable, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "hub"))
    return {**env, **extra}


def test_config_parses_with_the_paper_setting():
    cfg = load_config(CONFIG, [])
    assert [s for s in ORDER if s in cfg.stages] == ["translate", "arca", "lasr", "compare"]
    m = cfg.models
    assert (m.backbone, m.backbone_pooling, m.encoder) == (
        "Qwen/Qwen3-Embedding-8B", "last", "google/mt5-xl")  # fmt: skip
    assert (cfg.arca.pool_size, cfg.arca.batch_size, cfg.arca.steps) == (4, 1, 120)  # Table 9
    assert cfg.data.format == "lazretrieval" and cfg.translation.critic.model == "Qwen/Qwen3-32B"
    for k, names in TABLE_15.items():
        c = load_config(CONFIG, [f"translation.pass_at_k={k}"])
        assert {t.name for t in c.translation.active_translators()} == names


def test_dry_run_lists_the_stages(tmp_path):
    res = subprocess.run(["bash", str(SCRIPT)], env=_env(tmp_path, DRY_RUN="1"), cwd=REPO,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr
    cmds = [x[2:] for x in res.stdout.splitlines() if x.startswith("+ ")]
    kinds = [
        "check_recipe.py", "vllm serve meta-llama/Llama-3.3-70B-Instruct",
        "vllm serve google/gemma-2-27b-it", "vllm serve Qwen/Qwen3-32B",
        "vllm serve deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "lira translate", "lira translate",
        "-m lira arca", "-m lira lasr", "lira compare", "lira compare",
    ]  # fmt: skip
    assert len(cmds) == len(kinds) and all(k in c for k, c in zip(kinds, cmds)), cmds
    assert "--mteb" in cmds[6] and "--mteb" in cmds[10] and "--paper-tables" in cmds[10]
    spec = cmds[10].split("--mteb ")[1].split()[0]
    assert spec == cmds[6].split("--mteb ")[1].split()[0]
    mteb = pytest.importorskip("mteb", reason="the mteb extra is not installed")
    from evaluators.mteb_tasks import parse_tasks

    for name, subsets in parse_tasks(spec):  # real tasks and subsets of the pinned mteb
        assert set(subsets or []) <= set(mteb.get_task(name).hf_subsets), name


def test_run_without_weights_names_them_and_stops(tmp_path):
    res = subprocess.run(["bash", str(SCRIPT)], env=_env(tmp_path), cwd=REPO,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 1
    err = res.stderr
    assert "Traceback" not in err and "Traceback" not in res.stdout
    assert err.startswith("recipe: missing model weights: Qwen/Qwen3-Embedding-8B (models.backbone")
    for ref in ("google/mt5-xl (models.encoder", "meta-llama/Llama-3.3-70B-Instruct",
                "Qwen/Qwen3-32B (translation.critic", "hf download"):  # fmt: skip
        assert ref in err
    assert "missing data: data/lazretrieval (data.path)" in err
    assert [x for x in res.stdout.splitlines() if x.startswith("+ ")] == [
        f"+ {sys.executable} scripts/check_recipe.py configs/retrieval_qwen3_8b.yaml"
    ]  # nothing else started

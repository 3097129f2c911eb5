"""Two CPU processes (gloo) under ``accelerate launch`` end with identical weights."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lira.config import to_dict

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_two_processes_end_with_identical_weights(models_config, xquad_pairs, tmp_path):
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    if accelerate is None:
        pytest.skip("the accelerate command is not installed next to this Python")
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps({"models": to_dict(models_config), "pairs": [list(p) for p in xquad_pairs[:32]]})
    )
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    cmd = [
        accelerate, "launch", "--config_file", str(ROOT / "scripts" / "accelerate_cpu_2proc.yaml"),
        "--main_process_port", "29541", str(ROOT / "tests" / "arca" / "ddp_worker.py"),
        str(spec), str(tmp_path),
    ]  # fmt: skip
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-4000:]
    w0 = torch.load(tmp_path / "w0.pt", weights_only=False)
    w1 = torch.load(tmp_path / "w1.pt", weights_only=False)
    assert w0["world"] == w1["world"] == 2
    for k, v in w0["state"].items():
        torch.testing.assert_close(v, w1["state"][k], rtol=0, atol=0)
    moved = [k for k, v in w0["state"].items() if not torch.equal(v, w0["init"][k])]
    assert any(k.startswith("adaptor.") for k in moved) and any(
        k.startswith("actor.") for k in moved
    )
    assert any(k.startswith("encoder.") for k in moved)
    assert [h["loss"] for h in w0["history"]] == [h["loss"] for h in w1["history"]]

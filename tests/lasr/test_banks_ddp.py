"""Under ``accelerate launch`` (2 gloo processes) a bank encodes each text once across ranks."""

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
from tests.launch import failure, free_port

ROOT = Path(__file__).resolve().parents[2]


def launch_two(script: Path, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``accelerate launch`` ``script`` on 2 CPU processes (gloo) on a free port."""
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    if accelerate is None:
        pytest.skip("the accelerate command is not installed next to this Python")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    cmd = [accelerate, "launch", "--config_file",
           str(ROOT / "scripts" / "accelerate_cpu_2proc.yaml"),
           "--main_process_port", str(free_port()), str(script), *args]  # fmt: skip
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=cwd)


GERMAN = ["Wer hat das Spiel gewonnen?", "Wie viele Menschen leben in der Stadt?",
          "Wann wurde die Brücke gebaut?", "Was ist die Hauptstadt von Kenia?",
          "Welche Farbe hat der Himmel bei Nacht?", "Warum fiel das Reich?", "Wo liegt Rom?",
          "Wie heißt der längste Fluss Europas und wie lang ist er insgesamt?",
          "Wer schrieb das Buch?"]  # fmt: skip
ENGLISH = ["Who won the game?", "Where is Rome?", "Why did the empire fall?",
           "What is the capital of Kenya and how many people live there?"]  # fmt: skip


@pytest.mark.slow
def test_two_processes_encode_each_bank_text_once(models_config, tmp_path):
    texts = GERMAN + ENGLISH
    texts += texts[:3]  # duplicates are computed once too
    langs = ["de"] * 9 + ["en"] * 4 + ["de"] * 3
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"models": to_dict(models_config), "texts": texts,
                                "langs": langs}))  # fmt: skip
    res = launch_two(ROOT / "tests" / "lasr" / "bank_worker.py", str(spec), str(tmp_path))
    assert res.returncode == 0, failure(res.stderr)
    r0, r1 = (torch.load(tmp_path / f"bank{r}.pt", weights_only=False) for r in (0, 1))
    assert r0["world"] == r1["world"] == 2
    distinct = set(texts)
    # h saw each distinct text once across the two ranks, and each rank did part of the work
    assert sorted(r0["encoded"] + r1["encoded"]) == sorted(distinct)
    assert r0["encoded"] and r1["encoded"]
    for r in (r0, r1):  # every rank holds the whole bank, as one process computes it
        for got, want in zip(r["bank"], r["ref"]):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
        assert r["lookups"] == 9  # the distinct German texts looked up, as one process counts
        # one writer: the main process stored every text's g rows, nothing is left pending
        assert r["cache_rows"] == len(distinct) and r["pending"] == 0
    # the validation fusion fit: each rank scores half the grid, every rank gets the fit alone
    for r in (r0, r1):
        assert r["fits"][0] == r["fits"][1]
        assert r["fit_calls"][0] < r["fit_calls"][1]
    # each direction λ / max λ of the 26 grid points is scored once: the 3**3 - 2**3 with a 1
    directions = 3**3 - 2**3
    assert r0["fit_calls"][0] + r1["fit_calls"][0] == directions == r0["fit_calls"][1]
    # Arca's held-out evaluation: each source through Arca once across the ranks, and every
    # rank gets the result one process computes alone
    (s0, seen0), (a0, alone0) = r0["arca_eval"]
    (s1, seen1), _ = r1["arca_eval"]
    assert sorted(seen0 + seen1) == sorted(GERMAN) == sorted(alone0) and seen0 and seen1
    assert s0 == s1 and s0["n"] == a0["n"] == len(GERMAN) and s0["selection"] == a0["selection"]
    for key in ("l_anchor", "cos", "cos_shuffled", "eps1", "eps2"):
        assert abs(s0[key] - a0[key]) < 1e-5, key

"""The `lira` command bounds OpenMP spin-waiting (pipeline/__init__.py) unless the user chose."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PRINT = "import os, pipeline; print(os.environ.get('GOMP_SPINCOUNT'), os.environ.get('OMP_WAIT_POLICY'))"


@pytest.mark.parametrize(
    ("exported", "want"),
    [
        ({}, "30000 None"),
        ({"GOMP_SPINCOUNT": "7"}, "7 None"),
        ({"OMP_WAIT_POLICY": "PASSIVE"}, "None PASSIVE"),
    ],
)
def test_the_command_sets_a_short_spin_unless_exported(exported, want):
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    out = subprocess.run([sys.executable, "-c", PRINT], env={**env, **exported},
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == want

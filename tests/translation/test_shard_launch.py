"""``lira translate`` under ``accelerate launch`` with 2 processes: each process translates its
own shard (the launcher's RANK/WORLD_SIZE), and ``--merge`` gives the store one process makes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lira.translation.shards import Shard, shard_of, shard_store_path
from tests.launch import failure, free_port

from .fake_openai import FakeServer
from .test_shard import _config, _lira, _rows

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server():
    s = FakeServer().start()
    yield s
    s.stop()


@pytest.mark.slow
def test_two_launched_processes_translate_disjoint_shards_that_merge_into_one_run(
    tmp_path, server, monkeypatch
):
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    if accelerate is None:
        pytest.skip("the accelerate command is not installed next to this Python")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    _lira("translate", str(_config(tmp_path, server.url, "single")))
    expected = _rows(tmp_path / "single" / "translations.sqlite")

    launched = _config(tmp_path, server.url, "launched")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    cmd = [accelerate, "launch", "--config_file", str(ROOT / "scripts" / "accelerate_cpu_2proc.yaml"),
           "--main_process_port", str(free_port()), "-m", "lira", "translate", str(launched)]  # fmt: skip
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert res.returncode == 0, failure(res.stderr)

    main_store = tmp_path / "launched" / "translations.sqlite"
    assert not main_store.exists()  # each process wrote its own shard store
    shards = [_rows(shard_store_path(main_store, Shard(i, 2))) for i in range(2)]
    for i, rows in enumerate(shards):
        assert rows and all(shard_of(r[1], r[2], 2) == i for r in rows)  # no source twice
    assert sorted(r for rows in shards for r in rows) == expected

    _lira("translate", str(launched), "--merge")
    assert _rows(main_store) == expected

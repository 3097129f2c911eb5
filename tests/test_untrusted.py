"""Untrusted folders and configs (issue 42): no check skipped, one run per output folder, and
every bad input a user can give is one line naming the file or key and the fix.

Each test replays one case of the issue's probe; the LiRA model folder's translators (case 1)
are in ``tests/lasr/test_model.py``, next to the other model-folder tests.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from lira.checkpoint.folders import atomic_dir, latest_checkpoint, step_dir
from lira.checkpoint.manifest import MANIFEST, write_manifest
from lira.checkpoint.state import load_state, save_state
from lira.errors import CheckpointError
from pipeline.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _one_line(capsys, code: int, rc: int = 2) -> str:
    """The single ``lira: …`` line a failed command printed (and its exit code was ``rc``)."""
    err = capsys.readouterr().err.strip().splitlines()
    assert code == rc, err
    assert len(err) == 1 and err[0].startswith("lira: ") and "Traceback" not in err[0], err
    return err[0]


# --------------------------------------------------------------------- 4, 6: config loading
LAUGHS = "".join(
    f"{a}: &{a} [{', '.join([f'*{b}'] * 10 if b else ['lol'] * 10)}]\n"
    for a, b in zip("abcdefghi", ["", *"abcdefgh"])
)  # 9 levels of 10 aliases: 10**9 values from a few hundred bytes


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (LAUGHS, r"expands to more than 100000 values .*anchors/aliases"),
        ("translation:\n  llm_translators:\n  - {name: q, prompt_version: 2026-11-25}\n",
         r"'translation.llm_translators\[0\].prompt_version': .*a date .*quote it"),
        ("output_dir: !!binary aGVsbG8=\n", r"'output_dir': .*!!binary bytes.*plain string"),
        ("data:\n  train_languages: !!set {de, es}\n",
         r"'data.train_languages': .*a !!set.*write a list"),
        ("a: " + "[" * 100_000 + "]" * 100_000 + "\n", r"nests deeper than 64 levels"),
        ('translation:\n  mt_translators:\n  - {name: "x\\ud800", kind: reference, role: mt}\n',
         r"'translation.mt_translators\[0\].name': holds a lone surrogate"),
    ],
    ids=["billion-laughs", "date", "binary", "set", "100k-deep", "surrogate-name"],
)  # fmt: skip
def test_a_hostile_config_is_one_line_naming_the_key(tmp_path, capsys, text, pattern):
    import re

    cfg = tmp_path / "c.yaml"
    cfg.write_text(text, encoding="utf-8")
    line = _one_line(capsys, main(["eval", str(cfg)]))
    assert re.search(pattern, line), line


def test_anchors_and_aliases_of_a_normal_config_still_load(tmp_path):
    from pipeline.runconfig import load_config

    cfg = tmp_path / "c.yaml"
    cfg.write_text("data:\n  train_languages: &l [de, es]\n  eval_languages: *l\n")
    assert load_config(cfg).data.eval_languages == ["de", "es"]
    with pytest.raises(Exception, match="a date"):
        load_config(cfg, ["translation.critic.prompt_version=2026-11-25"])


@pytest.mark.parametrize("size", [100_000, 10_000_000])
def test_a_huge_store_path_is_one_short_line(tmp_path, capsys, size):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"translation:\n  store: {'a' * size}\n", encoding="utf-8")
    line = _one_line(capsys, main(["translate", str(cfg), "--output-dir", str(tmp_path / "o")]))
    if size > 1 << 20:  # the file is larger than any config: refused before it is parsed
        assert f"c.yaml has {size + 23} bytes, more than a config holds" in line
    else:
        assert "'translation.store'" in line and f"is {size} characters long" in line
    assert len(line) < 400


# ------------------------------------------------------------- 2: no manifest = damaged
def _save(root: Path, step: int) -> Path:
    with atomic_dir(step_dir(root, step)) as tmp:
        save_state(tmp, {"step": step, "w": torch.full((64,), float(step))})
    return step_dir(root, step)


def _flip(f: Path) -> None:
    data = bytearray(f.read_bytes())
    data[-1] ^= 0x01
    f.write_bytes(bytes(data))


def _drop_manifest(d: Path) -> None:
    (d / MANIFEST).unlink()


def _drop_sha256(d: Path) -> None:
    doc = json.loads((d / MANIFEST).read_text())
    del doc["sha256"]
    (d / MANIFEST).write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("strip", "why"),
    [(_drop_manifest, "lira_manifest.json is missing"),
     (_drop_sha256, "lira_manifest.json is damaged")],
    ids=["manifest-deleted", "sha256-removed"],
)  # fmt: skip
def test_a_step_folder_without_its_checksums_is_never_resumed(tmp_path, strip, why, caplog):
    _save(tmp_path, 1)
    bad = _save(tmp_path, 2)
    _flip(bad / "trainer_state.safetensors")  # finite, same size: only the sha256 tells
    strip(bad)
    assert latest_checkpoint(tmp_path) == step_dir(tmp_path, 1)
    assert why in caplog.text
    assert load_state(latest_checkpoint(tmp_path))["step"] == 1


# ---------------------------------------------------------- 3: baseline folders are verified
@pytest.fixture(scope="module")
def baseline_folder(tmp_path_factory, models_config):
    from lira.baselines.export import save_baseline
    from lira.models import load_backbone

    folder = tmp_path_factory.mktemp("baseline") / "clear"
    save_baseline(load_backbone(models_config), folder, models_config, {"method": "clear"})
    return folder


def _nan_weights(d: Path) -> None:
    from safetensors.torch import load_file, save_file

    f = d / "model.safetensors"
    state = {k: torch.full_like(v, float("nan")) for k, v in load_file(str(f)).items()}
    save_file(state, str(f), metadata={"format": "pt"})
    write_manifest(d)  # the probe regenerated the manifest: only the finiteness check tells


def _flip_weights(d: Path) -> None:
    _flip(d / "model.safetensors")


def _unlist_weights(d: Path) -> None:
    """Issue 51, item 3: a flipped byte, and the file's entry taken out of the manifest."""
    _flip(d / "model.safetensors")
    doc = json.loads((d / MANIFEST).read_text())
    del doc["files"]["model.safetensors"], doc["sha256"]["model.safetensors"]
    (d / MANIFEST).write_text(json.dumps(doc))


def _truncate_meta(d: Path) -> None:
    f = d / "lira_baseline.json"
    f.write_bytes(f.read_bytes()[:20])
    write_manifest(d)


@pytest.mark.parametrize(
    ("damage", "pattern"),
    [
        (_nan_weights, r"model.safetensors: tensor .* holds NaN or inf"),
        (_flip_weights, r"model.safetensors does not match its sha256"),
        (_unlist_weights, r"model.safetensors is not listed in lira_manifest.json"),
        (_truncate_meta, r"lira_baseline.json is not valid JSON"),
        (_drop_manifest, r"lira_manifest.json is missing"),
    ],
    ids=["all-nan", "flipped-byte", "unlisted-weights", "truncated-meta", "no-manifest"],
)
def test_a_damaged_baseline_folder_is_one_line(baseline_folder, tmp_path, damage, pattern):
    import re
    import shutil

    from lira.baselines.export import load_baseline

    folder = tmp_path / "clear"
    shutil.copytree(baseline_folder, folder)
    load_baseline(folder)  # intact: loads
    damage(folder)
    with pytest.raises(CheckpointError) as e:
        load_baseline(folder)
    msg = str(e.value)
    assert msg.startswith(f"baseline folder {folder} is damaged (") and "\n" not in msg
    assert re.search(pattern, msg) and "lira baseline" in msg


def test_baseline_merge_refuses_to_overwrite_an_input(baseline_folder, tmp_path, capsys):
    before = (baseline_folder / "model.safetensors").read_bytes()
    argv = ["baseline-merge", str(baseline_folder), str(baseline_folder), "--out"]
    line = _one_line(capsys, main([*argv, str(baseline_folder)]), rc=1)
    assert "is one of the checkpoints being merged" in line and "another --out" in line
    assert (baseline_folder / "model.safetensors").read_bytes() == before


# ----------------------------------------------------------- 5: one run per output folder
HOLD = textwrap.dedent(
    """
    import sys, time
    from lira.checkpoint.lock import run_lock
    with run_lock(sys.argv[1], "lira arca"):
        print("held", flush=True)
        time.sleep(60)
    """
)


@pytest.mark.parametrize("command", ["arca", "run"])
def test_a_second_run_into_one_output_folder_stops_naming_the_holder(tmp_path, capsys, command):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE,
                              text=True, env=env)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        cfg = tmp_path / "c.yaml"
        cfg.write_text("{}\n")
        line = _one_line(capsys, main([command, str(cfg), "--output-dir", str(out)]), rc=1)
        assert f"{out} is in use by another LiRA run, pid {holder.pid} (`lira arca`)" in line
        assert "another --output-dir" in line
    finally:
        holder.kill()
        holder.wait()
    # killed: the kernel released the lock, the next run takes it
    from lira.checkpoint.lock import run_lock

    with run_lock(out, "lira arca"), run_lock(out, "lira lasr"):  # re-entrant in one process
        pass


# --------------------------------------------- 6: paths where a file stands, symlinked outputs
@pytest.mark.parametrize("where", ["file", "under-file"])
def test_an_output_dir_that_is_or_is_under_a_file_is_one_line(tmp_path, capsys, where):
    (tmp_path / "f").write_text("x")
    out = tmp_path / "f" if where == "file" else tmp_path / "f" / "out"
    cfg = tmp_path / "c.yaml"
    cfg.write_text("{}\n")
    line = _one_line(capsys, main(["arca", str(cfg), "--output-dir", str(out)]), rc=1)
    assert f"output folder {out}" in line and "another --output-dir" in line


@pytest.mark.parametrize("err", [errno.EEXIST, errno.ENOTDIR])
def test_a_file_where_a_folder_goes_is_a_user_error(tmp_path, err):
    from pipeline.cli import user_error

    e = OSError(err, os.strerror(err), str(tmp_path / "out" / "arca"))
    msg, code = user_error(e)
    assert code == 1 and str(tmp_path / "out" / "arca") in msg and "move it away" in msg


def test_a_store_whose_parent_is_a_file_is_one_line(tmp_path):
    from lira.translation.schema import StoreError
    from lira.translation.store import TranslationStore

    (tmp_path / "out").write_text("x")
    with pytest.raises(StoreError, match=r"out is a file, not a folder; move it away"):
        TranslationStore(tmp_path / "out" / "translations.sqlite")


def test_a_symlinked_final_folder_is_replaced_not_removed(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    (tmp_path / "arca").mkdir()
    (tmp_path / "arca" / "final").symlink_to(target)
    with atomic_dir(tmp_path / "arca" / "final") as tmp:
        (tmp / "w.bin").write_bytes(b"new")
    final = tmp_path / "arca" / "final"
    assert not final.is_symlink() and (final / "w.bin").read_bytes() == b"new"
    assert (target / "keep.txt").read_text() == "mine"  # what the link pointed to is untouched
    assert sorted(p.name for p in (tmp_path / "arca").iterdir()) == ["final"]


def test_disk_full_messages_never_say_zero_mib(tmp_path):
    from lira.checkpoint.folders import disk_full

    msg = str(disk_full(tmp_path / "step-00000001"))
    assert "0.0 MiB" not in msg and "before its first file was written" in msg
    assert "needs about 1.5 KiB" in str(disk_full(tmp_path / "step-00000001", 1536))


# ------------------------------------------------------------------------ 6: the frozen-g cache
def test_a_damaged_g_cache_row_is_computed_again(tmp_path, caplog):
    from arca.g_cache import GEmbeddingCache, cache_key

    cache = GEmbeddingCache(tmp_path / "g.sqlite")
    enc = "sentence|g|v1|d=4|len=8|kind=query"
    calls = []

    def compute(todo):
        calls.append(list(todo))
        return torch.ones(len(todo), 1, 4)

    cache.pooled(["a", "b", "c"], enc, None, compute)
    with sqlite3.connect(tmp_path / "g.sqlite") as db:  # the probe's damage: NaN, short blobs
        nan = np.full((1, 4), np.nan, dtype=np.float32).tobytes()
        db.execute("UPDATE g_embeddings SET vec=? WHERE key=?", (nan, cache_key(enc, "a")))
        db.execute("UPDATE g_embeddings SET vec=? WHERE key=?", (b"\0" * 6, cache_key(enc, "b")))
        db.execute("UPDATE g_embeddings SET rows=2 WHERE key=?", (cache_key(enc, "c"),))
    out = cache.pooled(["a", "b", "c"], enc, None, compute)
    assert calls[-3:] == [["a"], ["b"], ["c"]] and torch.equal(out, torch.ones(3, 1, 4))
    assert cache.damaged == 3 and "3 damaged row(s)" in caplog.text
    calls.clear()
    cache.pooled(["a", "b", "c"], enc, None, compute)  # replaced: read from the cache again
    assert calls == []


def test_a_full_disk_while_writing_the_g_cache_is_one_line(tmp_path):
    from arca.g_cache import GEmbeddingCache
    from arca.g_cache_file import GCacheError

    cache = GEmbeddingCache(tmp_path / "cache" / "g.sqlite")

    class Full:
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def executemany(self, *a):
            raise sqlite3.OperationalError("database or disk is full")

    cache._conn = Full()
    with pytest.raises(GCacheError) as e:
        cache.put({"k": np.ones((1, 4), dtype=np.float32)}, "enc")
    msg = str(e.value)
    assert msg.startswith(f"frozen-g cache {tmp_path / 'cache' / 'g.sqlite'}: database or disk")
    assert "models.encoder_cache: false" in msg and "\n" not in msg
    (tmp_path / "out").write_text("x")  # the cache folder's place is a file
    with pytest.raises(GCacheError, match=r"a file stands where the folder .* goes"):
        GEmbeddingCache(tmp_path / "out" / "cache" / "g.sqlite")


# ------------------------------------------------------ 6: refused payloads, bad encode input
def _backbone_copy(models_config, tmp_path: Path, name: str) -> Path:
    import shutil

    from lira.models.loading import resolve_path

    src = Path(resolve_path(models_config.backbone, models_config.cache_dir))
    return Path(shutil.copytree(src, tmp_path / name))


def test_a_pickled_or_remote_code_model_is_one_line_and_runs_nothing(models_config, tmp_path):
    import dataclasses
    import pickle

    from lira.errors import UserInputError
    from lira.models import load_backbone
    from tests.pickles import _Payload

    marker = tmp_path / "pwned"
    pk = _backbone_copy(models_config, tmp_path, "pickled")
    (pk / "model.safetensors").unlink()
    (pk / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(marker)))
    rc = _backbone_copy(models_config, tmp_path, "remote")
    conf = json.loads((rc / "config.json").read_text())
    conf.pop("model_type")
    conf["auto_map"] = {"AutoConfig": "evil.Config", "AutoModel": "evil.Model"}
    (rc / "config.json").write_text(json.dumps(conf))
    (rc / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('pwned')\n")
    for folder, pattern in ((pk, "is a pickle holding more than tensors"),
                            (rc, r"needs its own Python code \(config.json: auto_map")):  # fmt: skip
        with pytest.raises(UserInputError, match=pattern):
            load_backbone(dataclasses.replace(models_config, backbone=str(folder)))
    assert not marker.exists()


@pytest.mark.parametrize(
    ("texts", "pattern"),
    [([None], r"text 0 is NoneType \('None'\), not a string"),
     (["ok", "bad \ud800"], r"text 1 holds a lone surrogate '\\ud800' at character 4")],
    ids=["none", "lone-surrogate"],
)  # fmt: skip
def test_encode_of_a_non_text_is_one_line(models_config, texts, pattern):
    from lira.errors import UserInputError
    from lira.models import load_backbone

    with pytest.raises(UserInputError, match=pattern):
        load_backbone(models_config).encode(texts)


# ------------------------------------------------------------------ 7: --import on a full disk
def test_an_import_stopped_by_a_full_disk_says_what_was_committed(tmp_path, monkeypatch):
    from lira.translation.schema import StoreError
    from lira.translation.store import TranslationStore

    rows = [{"source_id": str(i), "source_text": f"Satz {i}", "source_lang": "de",
             "translation": f"Sentence {i}", "translator": "ref"} for i in range(40)]  # fmt: skip
    f = tmp_path / "t.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = TranslationStore(tmp_path / "s.sqlite", commit_every=16)
    real = store._transaction
    calls = []

    def transaction():
        calls.append(1)
        if len(calls) > 2:  # the third commit finds the disk full
            raise sqlite3.OperationalError("database or disk is full")
        return real()

    monkeypatch.setattr(store, "_transaction", transaction)
    with pytest.raises(StoreError) as e:
        store.import_jsonl(f)
    msg = str(e.value)
    assert "database or disk is full" in msg and "free disk space" in msg
    assert f"32 of the 40 rows of {f} were committed before it stopped" in msg

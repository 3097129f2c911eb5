"""Checkpoint helpers: state without pickle, intact-latest selection, leftovers, strict JSON."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from lira.checkpoint.folders import (
    atomic_dir,
    clean_stale,
    latest_checkpoint,
    prune_checkpoints,
    step_dir,
)
from lira.checkpoint.manifest import MANIFEST, checkpoint_problem, read_meta
from lira.checkpoint.rng import rng_state, set_rng_state
from lira.checkpoint.state import (
    load_safetensors,
    load_state,
    load_torch_safe,
    save_state,
    state_mismatch,
)
from lira.errors import CheckpointError, LiRAError, MissingFileError
from lira.jsonio import write_json


def _strict(text: str):
    def no_constants(name):
        raise ValueError(f"bare {name} in JSON")

    return json.loads(text, parse_constant=no_constants)


def _trained():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(5, 4)).pow(2).mean().backward()
        opt.step()
    return model, opt


def _step(model, opt) -> torch.Tensor:
    opt.zero_grad()
    model(torch.randn(5, 4)).pow(2).mean().backward()
    opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_state_round_trip_resumes_bit_identically(tmp_path):
    model, opt = _trained()
    state = {
        "step": 3, "optimizer": opt.state_dict(), "rng": rng_state(), "model": model.state_dict(),
        "history": [{"loss": 0.5, "grad_norm": float("nan")}, {"loss": float("inf")}],
        "pair": (1, "a", None), "ids": {7: "x", (1, 2): "y"}, "raw": b"\x00\xff",
        "np": np.float32(1.25), "arr": np.arange(6, dtype=np.uint32).reshape(2, 3),
        "reserved": {"__tensor__": "not a tensor"},
    }  # fmt: skip
    save_state(tmp_path, state)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "trainer_state.json", "trainer_state.safetensors",
    ]  # fmt: skip
    _strict((tmp_path / "trainer_state.json").read_text())  # strict JSON, no bare NaN
    back = load_state(tmp_path)
    assert back["step"] == 3 and back["pair"] == (1, "a", None) and back["raw"] == b"\x00\xff"
    assert back["ids"] == {7: "x", (1, 2): "y"} and back["reserved"] == {
        "__tensor__": "not a tensor"
    }
    assert np.isnan(back["history"][0]["grad_norm"]) and back["history"][1]["loss"] == float("inf")
    assert back["np"] == np.float32(1.25) and back["np"].dtype == np.float32
    assert back["arr"].dtype == np.uint32 and back["arr"].tolist() == [[0, 1, 2], [3, 4, 5]]
    # continuing from the loaded state equals continuing from the live one
    set_rng_state(state["rng"])
    expected = _step(model, opt)
    model2, opt2 = _trained()
    model2.load_state_dict(back["model"])
    opt2.load_state_dict(back["optimizer"])
    set_rng_state(back["rng"])
    assert torch.equal(_step(model2, opt2), expected)


def test_unsupported_objects_are_refused_at_save(tmp_path):
    with pytest.raises(TypeError, match=r"state\['f'\]: cannot store a function"):
        save_state(tmp_path, {"f": lambda: 0})


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_planted_pickle_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    torch.save({"step": 1, "x": _Payload(marker)}, tmp_path / "trainer_state.pt")
    with pytest.raises(CheckpointError, match=r"trainer_state.pt cannot be loaded safely"):
        load_torch_safe(tmp_path / "trainer_state.pt")
    assert not marker.exists()
    # a plain tensor file still loads
    torch.save({"w": torch.ones(2), "step": 4}, tmp_path / "ok.pt")
    assert load_torch_safe(tmp_path / "ok.pt")["step"] == 4


def _save(root: Path, step: int) -> Path:
    with atomic_dir(step_dir(root, step)) as tmp:
        save_state(tmp, {"step": step, "w": torch.full((64,), float(step))})
        write_json(tmp / "meta.json", {"step": step})
    return step_dir(root, step)


def _truncate_tensors(d: Path) -> None:
    f = d / "trainer_state.safetensors"
    f.write_bytes(f.read_bytes()[:-10])


def _garbage_json(d: Path) -> None:  # same size: only parsing can tell
    f = d / "meta.json"
    f.write_bytes(b"{" + b" " * (f.stat().st_size - 1))


def _delete_file(d: Path) -> None:
    (d / "trainer_state.json").unlink()


def _damage_manifest(d: Path) -> None:
    (d / MANIFEST).write_text("not json", encoding="utf-8")


def _same_size_garbage_header(d: Path) -> None:
    f = d / "trainer_state.safetensors"
    data = bytearray(f.read_bytes())
    data[0:8] = (10**12).to_bytes(8, "little")
    f.write_bytes(bytes(data))


def _unlisted(d: Path) -> None:
    """Issue 51, item 3: same-size damage, and the file's entry taken out of the manifest."""
    f = d / "trainer_state.safetensors"
    data = bytearray(f.read_bytes())
    data[-1] ^= 0x01
    f.write_bytes(bytes(data))
    doc = json.loads((d / MANIFEST).read_text())
    del doc["files"][f.name], doc["sha256"][f.name]
    (d / MANIFEST).write_text(json.dumps(doc))


def _legacy_empty(d: Path) -> None:
    for p in d.iterdir():
        p.unlink()


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (_truncate_tensors, "trainer_state.safetensors has"),
        (_garbage_json, "meta.json is not valid JSON"),
        (_delete_file, "trainer_state.json is missing"),
        (_damage_manifest, "lira_manifest.json is damaged"),
        (_same_size_garbage_header, "damaged header"),
        (_unlisted, "trainer_state.safetensors is not listed in lira_manifest.json"),
        (_legacy_empty, "empty folder"),
    ],
)
def test_latest_skips_a_damaged_checkpoint_and_falls_back(tmp_path, damage, why, caplog):
    _save(tmp_path, 1)
    bad = _save(tmp_path, 2)
    damage(bad)
    assert why in checkpoint_problem(bad)
    assert latest_checkpoint(tmp_path) == step_dir(tmp_path, 1)
    assert "step-00000002 is damaged or incomplete" in caplog.text
    assert load_state(latest_checkpoint(tmp_path))["step"] == 1


def test_load_state_of_a_damaged_folder_names_the_file_and_the_fix(tmp_path):
    d = _save(tmp_path, 1)
    (d / "trainer_state.json").write_text("{", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"trainer_state.json is not valid JSON.*delete it"):
        load_state(d)
    d = _save(tmp_path, 2)
    _truncate_tensors(d)
    with pytest.raises(CheckpointError, match=r"trainer_state.safetensors is not a readable"):
        load_state(d)
    with pytest.raises(MissingFileError, match="does not exist"):
        load_state(tmp_path / "nope")


def test_steps_sort_numerically_beyond_eight_digits(tmp_path):
    _save(tmp_path, 99_999_999)
    _save(tmp_path, 100_000_000)
    assert latest_checkpoint(tmp_path).name == "step-100000000"


def test_stale_leftovers_are_removed_and_live_ones_kept(tmp_path):
    _save(tmp_path, 1)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    leftovers = [
        f".step-00000002.tmp-{dead.pid}@{host}",  # killed during save
        f".step-00000003.tmp-{dead.pid}",  # older naming, no host
        f".meta.json.tmp-{dead.pid}@{host}",  # write_json temp file
    ]
    live = [f".step-00000004.tmp-{os.getppid()}@{host}", f".step-00000005.tmp-{dead.pid}@elsewhere"]
    for name in leftovers[:2] + live:
        (tmp_path / name).mkdir()
        (tmp_path / name / "trainer_state.json").write_text("{", encoding="utf-8")
    (tmp_path / leftovers[2]).write_text("{", encoding="utf-8")
    assert latest_checkpoint(tmp_path) == step_dir(tmp_path, 1)
    names = {p.name for p in tmp_path.iterdir()}
    assert not names & set(leftovers)
    assert set(live) <= names  # a running process's (or another host's) save is left alone


def test_kill_between_the_two_renames_is_recovered(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    tag = f"{dead.pid}@{socket.gethostname()}"
    old = _save(tmp_path, 7)
    old.rename(tmp_path / f".step-00000007.old-{tag}")  # previous version moved aside, then kill
    assert clean_stale(tmp_path) == [f".step-00000007.old-{tag}"]
    assert load_state(latest_checkpoint(tmp_path))["step"] == 7
    # the same, with the complete new version still in its temporary folder: it wins
    new = _save(tmp_path, 8)
    new.rename(tmp_path / f".step-00000008.tmp-{tag}")
    _save(tmp_path, 8).rename(tmp_path / f".step-00000008.old-{tag}")
    clean_stale(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000007", "step-00000008"]


SAVER = textwrap.dedent(
    """
    import sys, torch
    from lira.checkpoint.folders import atomic_dir, prune_checkpoints, step_dir
    from lira.checkpoint.state import save_state
    from lira.jsonio import write_json
    root = sys.argv[1]
    step = 0
    while True:
        step += 1
        with atomic_dir(step_dir(root, step)) as tmp:
            save_state(tmp, {"step": step, "w": torch.full((200_000,), float(step))})
            write_json(tmp / "meta.json", {"step": step})
        prune_checkpoints(root, keep=2)
    """
)


def test_kill_9_during_saves_never_leaves_a_partial_checkpoint_loadable(tmp_path):
    rng = random.Random(0)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for trial in range(3):
        root = tmp_path / f"t{trial}"
        proc = subprocess.Popen([sys.executable, "-c", SAVER, str(root)], env=env)
        deadline = time.time() + 60
        while time.time() < deadline and len(list(root.glob("step-*"))) < 1:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 0.5))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        last = latest_checkpoint(root)
        assert last is not None
        state = load_state(last)
        assert torch.equal(state["w"], torch.full((200_000,), float(state["step"])))
        assert not [p for p in root.iterdir() if p.name.startswith(".")]  # leftovers removed
        assert len(list(root.glob("step-*"))) <= 3


def test_prune_keeps_the_newest_intact(tmp_path):
    for s in (1, 2, 3, 4):
        _save(tmp_path, s)
    _truncate_tensors(step_dir(tmp_path, 4))
    removed = prune_checkpoints(tmp_path, keep=2)
    assert [p.name for p in removed] == ["step-00000001"]
    assert latest_checkpoint(tmp_path) == step_dir(tmp_path, 3)
    prune_checkpoints(tmp_path, keep=1, protect=step_dir(tmp_path, 4))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000003", "step-00000004"]


def test_write_json_is_strict(tmp_path):
    f = tmp_path / "metrics.json"
    write_json(f, {"loss": float("nan"), "x": [float("inf"), 1.5], "n": np.float64(2.0)})
    assert _strict(f.read_text()) == {"loss": None, "x": [None, 1.5], "n": 2.0}


@pytest.mark.parametrize(
    ("make", "error", "pattern"),
    [
        (lambda p: None, MissingFileError, r"model folder .*missing-model does not exist"),
        (lambda p: p.mkdir(), MissingFileError, r"is not a LiRA model"),
        (lambda p: (p.mkdir(), (p / "cfg.json").write_text("{bad")), CheckpointError,
         r"cfg.json is not valid JSON.*save or train it again"),
        (lambda p: (p.mkdir(), (p / "cfg.json").write_bytes(b"\xff\xfe")), CheckpointError,
         r"cfg.json is not UTF-8"),
        (lambda p: (p.mkdir(), (p / "cfg.json").write_text('{"format": "other/1"}')),
         CheckpointError, r"unknown format 'other/1', expected lira/1"),
        (lambda p: (p.mkdir(), (p / "cfg.json").write_text("[1]")), CheckpointError,
         r"unknown format 'list'"),
        (lambda p: (p.mkdir(), (p / "cfg.json").write_text('{"format": "lira/0"}')),
         CheckpointError, r"missing-model is a lira/0 model folder: its head changed; retrain"),
    ],
    ids=["missing-folder", "no-meta", "truncated-json", "not-utf8", "other-format", "not-object",
         "retired-format"],
)  # fmt: skip
def test_read_meta_errors_name_the_file_and_the_fix(tmp_path, make, error, pattern):
    p = tmp_path / "missing-model"
    make(p)
    with pytest.raises(error, match=pattern) as e:
        read_meta(p, "cfg.json", "lira/1", "a LiRA model (train one with `lira lasr`)",
                  {"lira/0": "its head changed; retrain"})  # fmt: skip
    assert isinstance(e.value, LiRAError)


def test_load_safetensors_names_a_damaged_file(tmp_path):
    from safetensors.torch import save_file

    f = tmp_path / "model.safetensors"
    save_file({"w": torch.ones(100)}, str(f))
    assert torch.equal(load_safetensors(f)["w"], torch.ones(100))
    f.write_bytes(f.read_bytes()[:-7])
    with pytest.raises(
        CheckpointError, match=r"model.safetensors is damaged.*train the model again"
    ):
        load_safetensors(f)
    f.write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match=r"model.safetensors is damaged"):
        load_safetensors(f)
    with pytest.raises(MissingFileError, match="does not exist"):
        load_safetensors(tmp_path / "none.safetensors")


def test_state_mismatch_names_the_checkpoint_the_trainer_and_the_fix(tmp_path):
    err = state_mismatch(tmp_path / "step-00000002", "LaSR", KeyError("optimizer"))
    assert isinstance(err, CheckpointError)
    msg = str(err)
    assert "step-00000002" in msg and "LaSR trainer state" in msg and "KeyError" in msg
    assert "delete this checkpoint" in msg and "without --resume" in msg


# ---------------------------------------------------------------- verified before trusted


def _data_start(f: Path) -> int:
    """Offset of the first tensor byte of a .safetensors file (after its JSON header)."""
    return 8 + int.from_bytes(f.read_bytes()[:8], "little")


def _flip_a_tensor_byte(d: Path) -> None:  # same size, valid header, finite: only sha256 tells
    f = d / "trainer_state.safetensors"
    data = bytearray(f.read_bytes())
    data[_data_start(f) + 1] ^= 0x01  # a low mantissa bit of the first float: still finite
    f.write_bytes(bytes(data))


def _nan_bytes(d: Path) -> None:  # the probe: tensor bytes overwritten with NaN
    f = d / "trainer_state.safetensors"
    data = bytearray(f.read_bytes())
    start = _data_start(f)
    nan = np.full((len(data) - start) // 4, np.nan, dtype="<f4").tobytes()
    data[start : start + len(nan)] = nan
    f.write_bytes(bytes(data))


def _inf_in_state_with_a_fresh_manifest(d: Path) -> None:  # checksums match: only isfinite tells
    from safetensors.torch import save_file

    from lira.checkpoint.manifest import write_manifest

    f = d / "trainer_state.safetensors"
    tensors = _unchecked(f)
    tensors["t0"][3] = float("inf")
    save_file(tensors, str(f), metadata={"format": "lira-state/1"})
    write_manifest(d)


def _unchecked(f: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(f))


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (_flip_a_tensor_byte, "trainer_state.safetensors does not match its sha256"),
        (_nan_bytes, "trainer_state.safetensors does not match its sha256"),
        (_inf_in_state_with_a_fresh_manifest, "tensor 't0' holds NaN or inf"),
    ],
)
def test_a_same_size_damage_is_found_and_the_previous_checkpoint_resumed(
    tmp_path, damage, why, caplog
):
    _save(tmp_path, 1)
    bad = _save(tmp_path, 2)
    size = (bad / "trainer_state.safetensors").stat().st_size
    damage(bad)
    assert (bad / "trainer_state.safetensors").stat().st_size == size
    if damage is _flip_a_tensor_byte:
        assert checkpoint_problem(bad) is None  # sizes and headers alone are blind to it
    assert why in checkpoint_problem(bad, verify=True)
    assert latest_checkpoint(tmp_path) == step_dir(tmp_path, 1)
    assert "step-00000002 is damaged or incomplete" in caplog.text
    assert "resuming from step-00000001, the newest intact checkpoint" in caplog.text
    assert load_state(latest_checkpoint(tmp_path))["step"] == 1


def test_no_intact_checkpoint_is_one_line_error(tmp_path):
    _nan_bytes(_save(tmp_path, 1))
    _flip_a_tensor_byte(_save(tmp_path, 2))
    with pytest.raises(CheckpointError) as e:
        latest_checkpoint(tmp_path)
    msg = str(e.value)
    assert "no intact checkpoint to resume" in msg and "step-00000002: trainer_state" in msg
    assert "step-00000001" in msg and "without --resume" in msg and "\n" not in msg
    assert latest_checkpoint(tmp_path / "nothing-here") is None  # no checkpoint at all: fresh


def test_non_finite_tensors_are_refused_at_save_and_at_load(tmp_path):
    from safetensors.torch import save_file

    with pytest.raises(CheckpointError, match=r"NaN or inf in state\['opt'\]\['m'\].*learning"):
        save_state(tmp_path, {"opt": {"m": torch.tensor([1.0, float("inf")])}, "step": 3})
    assert not (tmp_path / "trainer_state.safetensors").exists()
    save_state(tmp_path, {"w": torch.ones(4), "x": float("nan")})  # NaN floats stay allowed
    tensors = _unchecked(tmp_path / "trainer_state.safetensors")
    tensors["t0"][0] = float("nan")
    save_file(tensors, str(tmp_path / "trainer_state.safetensors"))
    with pytest.raises(CheckpointError, match=r"tensor 't0' holds NaN or inf.*delete it"):
        load_state(tmp_path)
    save_file({"w": torch.tensor([0.0, float("-inf")])}, str(tmp_path / "m.safetensors"))
    with pytest.raises(CheckpointError, match=r"m.safetensors is damaged \(tensor 'w' holds NaN"):
        load_safetensors(tmp_path / "m.safetensors")


def test_manifest_records_a_sha256_per_file(tmp_path):
    import hashlib

    d = _save(tmp_path, 1)
    doc = json.loads((d / MANIFEST).read_text())
    assert set(doc["sha256"]) == set(doc["files"]) == {"trainer_state.safetensors",
                                                        "trainer_state.json", "meta.json"}  # fmt: skip
    blob = (d / "meta.json").read_bytes()
    assert doc["sha256"]["meta.json"] == hashlib.sha256(blob).hexdigest()


def test_the_model_card_is_outside_the_manifest(tmp_path):
    """Issue 52: the card (README.md) is documentation no loader reads; sentence-transformers
    rewrites it when it saves a model, so it is never listed nor checked, even by an older
    manifest that lists it. Every other file stays checked."""
    from lira.checkpoint.manifest import write_manifest

    d = tmp_path / "model"
    d.mkdir()
    (d / "README.md").write_text("# card\n")
    (d / "meta.json").write_text("{}")
    write_manifest(d)
    doc = json.loads((d / MANIFEST).read_text())
    assert set(doc["files"]) == set(doc["sha256"]) == {"meta.json"}
    (d / "README.md").write_text("# another card, longer\n")
    assert checkpoint_problem(d, verify=True) is None
    doc["files"]["README.md"], doc["sha256"]["README.md"] = 7, "0" * 64  # an older manifest
    (d / MANIFEST).write_text(json.dumps(doc))
    assert checkpoint_problem(d, verify=True) is None
    (d / "meta.json").write_text("{ }")
    assert checkpoint_problem(d) == "meta.json has 3 bytes, the manifest says 2"


def test_hidden_files_are_no_model_file_and_unlisted_ones_are_damage(tmp_path):
    """Issue 51, item 3: the manifest is the list of what loads. A hub download's hidden files
    (.gitattributes, .cache/) are not model files; any other unlisted file is damage."""
    d = _save(tmp_path, 1)
    (d / ".gitattributes").write_text("*.safetensors filter=lfs\n")
    (d / ".cache" / "huggingface").mkdir(parents=True)
    (d / ".cache" / "huggingface" / "x.metadata").write_text("x")
    assert checkpoint_problem(d, verify=True) is None
    (d / "sub").mkdir()
    (d / "sub" / MANIFEST).write_text("{}")  # a sub-folder's own manifest: checked when it loads
    assert checkpoint_problem(d, verify=True) is None
    (d / "sub" / "added_tokens.json").write_text("{}")
    assert checkpoint_problem(d) == (
        "sub/added_tokens.json is not listed in lira_manifest.json (LiRA did not write it, so "
        "it is never loaded)"
    )


def test_a_step_without_its_manifest_is_never_resumed_the_previous_one_is(tmp_path, caplog):
    """Issue 51, untried case 3: a step checkpoint without its manifest then --resume falls back
    to the previous step (and refuses when there is none), never loading the unchecked one."""
    _save(tmp_path, 1)
    bad = _save(tmp_path, 2)
    (bad / MANIFEST).unlink()
    assert latest_checkpoint(tmp_path) == step_dir(tmp_path, 1)
    assert "step-00000002 is damaged or incomplete (lira_manifest.json is missing)" in caplog.text
    (step_dir(tmp_path, 1) / MANIFEST).unlink()
    with pytest.raises(CheckpointError, match=r"no intact checkpoint to resume .*is missing"):
        latest_checkpoint(tmp_path)


def test_a_file_named_like_the_checkpoint_folder_is_one_line(tmp_path):
    step_dir(tmp_path, 3).write_text("not a folder")
    with pytest.raises(CheckpointError, match=r"step-00000003 is a file, not a folder; move"):
        _save(tmp_path, 3)
    (tmp_path / "parent").write_text("x")
    with pytest.raises(CheckpointError, match=r"parent is a file, not a folder"):
        _save(tmp_path / "parent" / "arca", 1)
    assert latest_checkpoint(tmp_path) is None  # a file is never taken for a checkpoint


@pytest.mark.parametrize(
    "error",
    [
        "safetensors",  # what safetensors raises on a full disk
        "oserror",
    ],
)
def test_disk_full_during_a_save_is_one_line_naming_the_folder_and_the_space(
    tmp_path, monkeypatch, error
):
    import errno

    from safetensors import SafetensorError

    import lira.checkpoint.folders as ck

    _save(tmp_path, 1)
    need = sum(p.stat().st_size for p in step_dir(tmp_path, 1).iterdir())

    def full(*a, **k):
        if error == "safetensors":
            raise SafetensorError(
                "Error while serializing: I/O error: No space left on device (os error 28)"
            )
        raise OSError(errno.ENOSPC, "No space left on device", "x.safetensors")

    monkeypatch.setattr("safetensors.torch.save_file", full)
    with pytest.raises(CheckpointError) as e:
        _save(tmp_path, 2)
    msg = str(e.value)
    assert msg.startswith(f"cannot save {step_dir(tmp_path, 2)}: no space left on device")
    assert f"needs about {ck.human_size(need)}" in msg and "--output-dir" in msg
    assert "0.0 MiB" not in msg  # issue 42: a small checkpoint is a few KiB, not "0.0 MiB"
    assert not list(tmp_path.glob(".step-*")) and not step_dir(tmp_path, 2).exists()
    assert ck.latest_checkpoint(tmp_path) == step_dir(tmp_path, 1)
    # no previous checkpoint: the space needed is the size of the state being written
    with pytest.raises(
        CheckpointError, match=r"fresh/step-00000001: no space.*needs about 3\.8 MiB"
    ):
        with atomic_dir(step_dir(tmp_path / "fresh", 1)) as tmp:
            save_state(tmp, {"w": torch.zeros(1_000_000)})


def test_a_save_removes_what_a_killed_save_left_beside_it(tmp_path):
    """A final folder outside any checkpoint root (``<output_dir>/lira-model``): the next
    :func:`atomic_dir` save removes the temporary folder of a killed earlier save beside it,
    and leaves a running process's alone."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    killed, live = f".lira-model.tmp-{dead.pid}@{host}", f".lira-model.tmp-{os.getppid()}@{host}"
    for name in (killed, live):
        (tmp_path / name).mkdir()
        (tmp_path / name / "head.safetensors").write_bytes(b"partial")
    with atomic_dir(tmp_path / "lira-model") as tmp:
        (tmp / "head.safetensors").write_bytes(b"whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == [live, "lira-model"]
    assert (tmp_path / "lira-model" / "head.safetensors").read_bytes() == b"whole"

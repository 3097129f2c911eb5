"""No code from a model folder runs, whatever stdin answers (issue 51, item 1).

transformers asks "Do you wish to run the custom code? [y/N]" on stdin when a folder names its
own code and no ``trust_remote_code`` was passed; with ``y`` piped in, the folder's Python ran.
Every load LiRA makes passes ``trust_remote_code=False`` and refuses such a folder first, in one
line naming the file and the key. Each test answers ``y`` to any prompt and checks that no
marker file appears.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lira.checkpoint.manifest import write_manifest
from lira.errors import UserInputError
from lira.models.loading import remote_code_key, resolve_path

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def yes(monkeypatch):
    """stdin that answers ``y`` to every question (``yes y | lira ...``)."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n" * 1000))


def _evil(folder: Path, marker: Path, name: str = "evil") -> None:
    """A module beside the weights that writes ``marker`` when imported."""
    (folder / f"{name}.py").write_text(
        f"open({str(marker)!r}, 'w').write('pwned')\nclass Config: pass\nclass Model: pass\n"
    )


def _copy(models_config, tmp_path: Path, which: str = "backbone") -> Path:
    ref = getattr(models_config, which)
    src = Path(resolve_path(ref, models_config.cache_dir))
    return Path(shutil.copytree(src, tmp_path / f"{which}-copy"))


def _auto_map(folder: Path, file: str = "config.json") -> None:
    doc = json.loads((folder / file).read_text())
    doc["auto_map"] = {"AutoConfig": "evil.Config", "AutoModel": "evil.Model",
                       "AutoTokenizer": ["evil.Model", None]}  # fmt: skip
    (folder / file).write_text(json.dumps(doc))


@pytest.mark.parametrize("file", ["config.json", "tokenizer_config.json"])
def test_a_backbone_asking_for_its_code_is_one_line_with_y_on_stdin(
    models_config, tmp_path, yes, file
):
    from lira.models import load_backbone

    marker = tmp_path / "pwned"
    folder = _copy(models_config, tmp_path)
    _auto_map(folder, file)
    _evil(folder, marker)
    with pytest.raises(UserInputError) as e:
        load_backbone(dataclasses.replace(models_config, backbone=str(folder)))
    msg = str(e.value)
    assert f"needs its own Python code ({file}: auto_map" in msg and "\n" not in msg
    assert not marker.exists()


def test_g_and_a_random_weights_folder_asking_for_code_are_refused(models_config, tmp_path, yes):
    from lira.models import load_encoder

    marker = tmp_path / "pwned"
    folder = _copy(models_config, tmp_path, "encoder")
    _auto_map(folder)
    _evil(folder, marker)
    for ref in (str(folder), f"random:{folder}"):
        with pytest.raises(UserInputError, match=r"\(config.json: auto_map"):
            load_encoder(dataclasses.replace(models_config, encoder=ref))
    assert not marker.exists()


def test_a_sentence_transformers_module_class_of_the_folder_is_refused(
    models_config, tmp_path, yes
):
    from lira.models import load_backbone

    marker = tmp_path / "pwned"
    folder = _copy(models_config, tmp_path)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "evil_module.Model"}]
    (folder / "modules.json").write_text(json.dumps(modules))
    _evil(folder, marker, "evil_module")
    with pytest.raises(UserInputError, match=r"\(modules.json: module class 'evil_module.Model'"):
        load_backbone(dataclasses.replace(models_config, backbone=f"st:{folder}"))
    assert not marker.exists()


def test_a_baseline_folder_asking_for_code_is_refused(models_config, tmp_path, yes):
    from lira.baselines.export import load_baseline, save_baseline
    from lira.models import load_backbone

    marker = tmp_path / "pwned"
    folder = tmp_path / "clear"
    save_baseline(load_backbone(models_config), folder, models_config, {"method": "clear"})
    _auto_map(folder)
    _evil(folder, marker)
    write_manifest(folder)  # the probe rewrote the manifest: the folder looks whole
    with pytest.raises(UserInputError, match=r"\(config.json: auto_map"):
        load_baseline(folder)
    assert not marker.exists()


def test_remote_code_key_ignores_plain_folders(models_config, tmp_path):
    assert remote_code_key(_copy(models_config, tmp_path)) is None
    assert remote_code_key(tmp_path / "absent") is None


@pytest.mark.slow
def test_yes_piped_into_lira_eval_runs_no_code_of_the_folder(models_config, tmp_path):
    """The probe's own command: ``yes y | lira eval cfg.yaml eval.model=FOLDER``."""
    from lira.config import DataConfig, save_config
    from pipeline.runconfig import RunConfig

    marker = tmp_path / "pwned"
    folder = _copy(models_config, tmp_path)
    _auto_map(folder)
    _evil(folder, marker)
    cfg = RunConfig(output_dir=str(tmp_path / "out"), models=models_config,
                    data=DataConfig(eval_languages=["de"], max_eval_queries=4))  # fmt: skip
    save_config(cfg, tmp_path / "run.yaml")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "lira", "eval", str(tmp_path / "run.yaml"),
         f"models.backbone={folder}"],
        input="y\n" * 1000, capture_output=True, text=True, cwd=REPO, env=env, timeout=600,
    )  # fmt: skip
    err = [line for line in run.stderr.splitlines() if line.startswith("lira: ")]
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert len(err) == 1 and "needs its own Python code (config.json: auto_map" in err[0]
    assert "Do you wish to run the custom code" not in run.stdout + run.stderr
    assert not marker.exists()

"""Model references a user can get wrong end in one ``lira: ...`` line, never a traceback.

A misspelled ``demo:<name>`` is a config error (exit 2) naming the key; a hub id or folder
that will not load is a :class:`~lira.errors.LiRAError` naming the reference and the fix.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from lira.config import ConfigError, ModelsConfig
from lira.demo import references
from lira.errors import MissingFileError, UserInputError
from lira.reasoning.config import ReasonConfig
from pipeline.cli import main

DEMO_YAML = str(Path(__file__).resolve().parents[1] / "configs" / "demo.yaml")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("models.backbone", "demo:nope"),
        ("models.backbone", "st:demo:nope"),
        ("models.encoder", "demo:nope"),
        ("translation.critic.model", "demo:nope"),
        ("translation.critic.encoder", "demo:nope"),
        ("reason.llm", "demo:nope"),
    ],
)
def test_a_misspelled_demo_alias_is_a_config_error(key, value, tmp_path, capsys):
    code = main(["eval", DEMO_YAML, "--output-dir", str(tmp_path / "o"), f"{key}={value}"])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"lira: config key '{key}': unknown demo model 'demo:nope'; choose")
    assert "demo:minilm" in last and "demo:smollm2" in last


def test_demo_aliases_are_checked_at_construction():
    with pytest.raises(ConfigError, match=r"'encoder': unknown demo model 'demo:mt6'"):
        ModelsConfig(encoder="demo:mt6")
    with pytest.raises(ConfigError, match=r"'llm': unknown demo model 'demo:smollm'"):
        ReasonConfig(llm="demo:smollm")
    for name in references.NAMES:  # every real demo model still passes
        assert ModelsConfig(backbone=f"demo:{name}", encoder=f"st:demo:{name}")


def test_the_demo_resolver_raises_a_user_error():
    with pytest.raises(UserInputError, match="unknown demo model 'demo:bert'; choose from"):
        references.resolve_model("demo:bert")


def test_an_invalid_hub_id_names_the_reference_and_the_fix():
    from lira.models import load_backbone

    with pytest.raises(MissingFileError, match=r"could not load model 'my model'.*check the name"):
        load_backbone(ModelsConfig(backbone="my model"))


@pytest.mark.parametrize("config", ["{bad", "{}"])
def test_a_damaged_model_folder_is_a_user_error(config, tmp_path):
    from lira.models import load_backbone

    (tmp_path / "config.json").write_text(config, encoding="utf-8")
    with pytest.raises(UserInputError, match=rf"could not load model '{tmp_path}' from .*config"):
        load_backbone(ModelsConfig(backbone=str(tmp_path)))


def test_sentence_transformers_references_that_do_not_load(tmp_path):
    from lira.models import load_backbone
    from lira.models.encoders import load_sentence_transformer

    with pytest.raises(MissingFileError, match=r"'my model'.*check the name"):
        load_sentence_transformer(ModelsConfig(encoder="st:my model"))
    with pytest.raises(MissingFileError, match=r"'st:my model'.*check the name"):
        load_backbone(ModelsConfig(backbone="st:my model"))
    (tmp_path / "modules.json").write_text("[{bad", encoding="utf-8")
    with pytest.raises(UserInputError, match=r"could not load model .* from "):
        load_backbone(ModelsConfig(backbone=f"st:{tmp_path}"))


def test_a_disk_error_keeps_its_errno():
    """An OSError with an errno (permissions, full disk) is the CLI's to name, not rewritten."""
    from lira.models.loading import load_checked

    def refuse() -> None:
        raise PermissionError(errno.EACCES, "Permission denied", "/m/config.json")

    with pytest.raises(PermissionError) as exc:
        load_checked(refuse, "/m", "/m", "minilm")
    assert exc.value.errno == errno.EACCES and not isinstance(exc.value, MissingFileError)

"""The baseline registry (issue 14): a baseline is one method file plus one registry line."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lira.baselines import registry
from lira.baselines.config import BaselinesConfig, RecipeConfig
from lira.baselines.data import recipe
from lira.baselines.engine import run_baselines
from lira.baselines.export import baseline_fingerprint
from lira.baselines.method import DEFAULT_RECIPE, BaselineMethod
from lira.checkpoint.fingerprint import FINGERPRINT_FILE, read_fingerprint
from lira.config import ConfigError, DataConfig, check, from_dict, to_dict
from lira.config_yaml import apply_overrides
from pipeline.runconfig import RunConfig


class DummyMethod(BaselineMethod):
    """A baseline without paper hyper-parameters: in-batch InfoNCE, target query -> gold."""

    name = "dummy"

    def loss(self, trainer, batch):
        ex = [trainer.examples[i] for i in batch["rows"]]
        q = trainer.encode([e.q_tgt for e in ex], "query")
        p = trainer.encode([e.pos_text for e in ex], "document")
        return F.cross_entropy(q @ p.T / trainer.recipe.tau, torch.arange(len(ex)))


@dataclass
class DummyRecipe(RecipeConfig):
    """The dummy's paper recipe: its own defaults and one field of its own."""

    lr: float = 3e-4
    """AdamW learning rate of the dummy."""
    margin: float = 0.2
    """A field only this method has."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check(0 <= self.margin < 1, "margin", "must be in [0, 1)")


class DummyWithRecipe(DummyMethod):
    """The same loss, trained with its own recipe section ``baselines.dummy_recipe.*``."""

    name = "dummy_recipe"
    config_class = DummyRecipe


@pytest.fixture
def dummy(monkeypatch):
    """``dummy`` registered for this test only (what its one registry line would do)."""
    monkeypatch.setitem(registry.METHODS, "dummy", DummyMethod())
    return registry.METHODS["dummy"]


def test_every_registered_method_resolves_to_its_object():
    table = registry.all_methods()
    assert list(table) == ["infonce", "clear", "lancer", "jsd", "merging", "gist"]
    for name, method in table.items():
        assert isinstance(method, BaselineMethod) and method.name == name
    assert BaselinesConfig().methods == registry.method_names()  # the default is every method
    with pytest.raises(ValueError, match="unknown baseline method 'gist'"):
        registry.get_method("gist")  # a part of merging, not selectable on its own
    assert registry.get_method("gist", parts=True).recipe == "merging"


def _imports(module) -> list[str]:
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    modules = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    modules += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    return [m for m in modules if m and m.split(".")[0] in ("lira", "arca", "lasr")]


def test_the_method_table_imports_nothing_of_the_project():
    """lira.config imports the table: it must stay import-light (no cycle through config), and
    the registry's table is that one (config sees every registered method)."""
    from lira.baselines import names as baseline_names

    assert _imports(baseline_names) == []
    assert _imports(registry) == ["lira.baselines.names"]
    assert registry.METHODS is baseline_names.METHODS


def test_each_method_recipe_is_its_recipes_entry_in_a_module_without_torch():
    """Issue 60.7: a config's recipe sections come from lira.baselines.recipes, which imports no
    torch (loading a config imports no method); a method's ``config_class`` must be that entry,
    or its YAML section would not be the recipe it trains with."""
    from lira.baselines import recipes

    for name, method in registry.all_methods().items():
        assert getattr(method, "config_class", None) is recipes.RECIPES.get(name), name
    tree = ast.parse(Path(recipes.__file__).read_text(encoding="utf-8"))
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert [m for m in imported if m and m.split(".")[0] in ("torch", "lira")] == ["lira.config"]


def test_config_validates_methods_against_the_registry(dummy):
    with pytest.raises(ConfigError, match="methods"):
        BaselinesConfig(methods=["nope"])
    assert BaselinesConfig(methods=["dummy"]).methods == ["dummy"]


def test_a_method_without_paper_values_uses_the_defaults_and_the_shared_budget(dummy):
    own = recipe(BaselinesConfig(methods=["dummy"]), "dummy", 100)
    assert (own.lr, own.batch_size, own.scheduler) == (
        DEFAULT_RECIPE["lr"], DEFAULT_RECIPE["batch_size"], DEFAULT_RECIPE["scheduler"],
    )  # fmt: skip
    shared = recipe(BaselinesConfig(steps=3, batch_size=4, lr=1e-3), "dummy", 100)
    assert (shared.steps, shared.batch_size, shared.lr) == (3, 4, 1e-3)
    # its fingerprint holds no paper's recipe fields
    cfg = RunConfig(baselines=BaselinesConfig(methods=["dummy"]))
    keys = baseline_fingerprint(cfg, "dummy")["config"]
    assert not [k for k in keys if k.startswith(("baselines.clear_", "baselines.jsd_"))]
    assert "baselines.steps" in keys


@pytest.mark.slow
def test_a_registered_dummy_baseline_trains_through_run_baselines(dummy, models_config, tmp_path):
    cfg = RunConfig(
        output_dir=str(tmp_path),
        models=models_config,
        data=DataConfig(train_languages=["de", "es"], max_train_queries=8),
        baselines=BaselinesConfig(methods=["dummy"], steps=2, batch_size=4, lr=1e-3),
    )
    summary = run_baselines(cfg, methods=None, resume=False)
    stats = summary["dummy"]
    assert stats["steps"] == 2 and stats["nonfinite_steps"] == 0
    assert np.isfinite(stats["loss_before"]) and np.isfinite(stats["loss_after"])
    assert list(stats["recipe"]["shared"]) == ["steps", "batch_size", "lr"]
    assert stats["recipe"]["scheduler"] == DEFAULT_RECIPE["scheduler"]
    folder = tmp_path / "baselines" / "dummy"
    assert json.loads((folder / "lira_baseline.json").read_text())["method"] == "dummy"
    assert (folder / FINGERPRINT_FILE).is_file()
    assert read_fingerprint(folder)["hash"] == baseline_fingerprint(cfg, "dummy")["hash"]
    again = run_baselines(cfg, methods=["dummy"], resume=True)  # done: skipped
    assert (
        again["dummy"] == json.loads((tmp_path / "baselines" / "summary.json").read_text())["dummy"]
    )


def test_a_new_baseline_with_its_own_recipe_is_its_file_plus_one_registry_line(monkeypatch):
    """Issue 32: the recipe dataclass sits in the method's file (here: this test) and its
    registry line is all the config needs: ``baselines.dummy_recipe.*`` loads, takes dotted
    overrides, is checked, round-trips and shapes the recipe and the run fingerprint, with no
    edit to lira/config.py or lira/baselines/config.py."""
    monkeypatch.setitem(registry.METHODS, "dummy_recipe", DummyWithRecipe())  # the registry line
    data = {"baselines": {"methods": ["dummy_recipe"], "dummy_recipe": {"margin": 0.5}}}
    data = apply_overrides(data, ["baselines.dummy_recipe.lr=1e-3", "baselines.clear.tau=0.1"])
    cfg = from_dict(RunConfig, data)
    own = cfg.baselines.recipe_of("dummy_recipe", DummyRecipe)
    assert (own.lr, own.margin, own.batch_size) == (1e-3, 0.5, RecipeConfig().batch_size)
    assert cfg.baselines.recipes["clear"].tau == 0.1  # the other recipes stay beside it
    assert to_dict(cfg)["baselines"]["dummy_recipe"] == {**to_dict(RecipeConfig()), "lr": 1e-3,
                                                         "margin": 0.5}  # fmt: skip
    assert from_dict(RunConfig, to_dict(cfg)) == cfg
    assert recipe(cfg.baselines, "dummy_recipe", 100).lr == 1e-3
    keys = baseline_fingerprint(cfg, "dummy_recipe")["config"]
    assert keys["baselines.dummy_recipe_margin"] == 0.5
    assert not [k for k in keys if k.startswith("baselines.clear_")]
    with pytest.raises(ConfigError, match=r"'baselines\.dummy_recipe\.margin'.*\[0, 1\)"):
        from_dict(RunConfig, apply_overrides(data, ["baselines.dummy_recipe.margin=2"]))
    with pytest.raises(ConfigError, match=r"is now baselines\.dummy_recipe\.margin"):
        from_dict(RunConfig, {"baselines": {"dummy_recipe_margin": 0.3}})
    for module in ("lira/config.py", "lira/baselines/config.py"):
        assert "dummy" not in (Path(__file__).parents[2] / module).read_text(encoding="utf-8")

"""The baselines' configuration: the shared budget (``baselines.*``) and each method's recipe.

A method's paper recipe is a :class:`RecipeConfig` subclass declared in
:mod:`lira.baselines.recipes` (``ClearConfig``, ...; it imports no torch, so loading a config
imports no method) and named by the method's ``config_class``; it is the YAML section
``baselines.<method>`` (e.g. ``baselines.clear.lr``). :class:`BaselinesConfig` finds those
sections in :data:`~lira.baselines.recipes.RECIPES` and the registered method objects. A flat
key (``baselines.clear_lr``) is refused with the section's key (:func:`lira.compat.flat_key`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar, Literal, Protocol

from lira.baselines.names import METHODS, method_names
from lira.baselines.recipes import RECIPES, R, RecipeConfig
from lira.baselines.registry import PARTS
from lira.config import (
    DataConfig,
    LoRAArguments,
    ModelsConfig,
    TrainingArguments,
    check,
    check_lr,
)


def recipe_classes() -> dict[str, type[RecipeConfig]]:
    """``{method: its recipe dataclass}`` of every registered method that declares one,
    without importing a method module (they import torch): a method registered by name has
    its recipe in :data:`~lira.baselines.recipes.RECIPES`, a registered object its
    ``config_class``."""
    out: dict[str, type[RecipeConfig]] = {}
    for name, entry in {**METHODS, **PARTS}.items():
        cls = RECIPES.get(name) if isinstance(entry, str) else getattr(entry, "config_class", None)
        if cls is not None:
            out[name] = cls
    return out


@dataclass
class BaselinesConfig(TrainingArguments, LoRAArguments):
    """Baselines trained on the same data (papers 000-003).

    Each method's recipe ``baselines.<method>.*`` defaults to that paper's values (CLEAR App. A
    / §4.1; LANCER §4.1; language composition + merging App. B.2-B.3; English inclination
    App. C). The shared budget ``steps`` / ``batch_size`` / ``lr`` is 0 = every paper's own
    value; set it (> 0) in a config to train every method with identical steps, batch size and
    rate.
    """

    methods: list[str] = field(default_factory=method_names)
    """Baselines trained by ``lira baseline``: names in :mod:`lira.baselines.registry` (default: all)."""
    steps: int = 0
    """Shared step budget for every method; 0 = each paper's ``<method>.epochs`` over its rows."""
    batch_size: int = 0
    """Shared (global) batch size for every method; 0 = each paper's ``<method>.batch_size``."""
    lr: float = 0.0
    """Shared AdamW learning rate for every method; 0 = each paper's ``<method>.lr``."""
    lora: bool = False
    """Train the baselines through peft LoRA adapters instead of all weights."""
    lora_r: int = 8
    """LoRA rank (lora: true)."""
    gradient_checkpointing: bool = False
    """Recompute h's layer activations in the backward pass (transformers' gradient
    checkpointing): about a third more compute for activation memory of one layer; an 8B h
    with CLEAR's 5 negatives needs it on an 80 GB GPU."""
    seed: int = 0
    """Seed of the baselines' initialisation, negatives and batches."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip over all trainable parameters (every method)."""
    report_to: Literal["none", "tensorboard", "wandb"] = "none"
    """Also log the training loss to this accelerate tracker (under <output_dir>/baselines/runs)."""
    save_every: int = 0
    """Write a resumable checkpoint every N steps (<method>-checkpoints/); 0 = none."""
    recipes: dict[str, RecipeConfig] = field(default_factory=dict)
    """Each method's paper recipe, written ``baselines.<method>.*`` (missing ones: defaults)."""

    open_sections: ClassVar[str] = "recipes"
    """The field whose entries are YAML sections of their own (:func:`lira.config.from_dict`)."""

    @classmethod
    def section_types(cls) -> dict[str, type[RecipeConfig]]:
        """The sections ``recipes`` may hold: every registered method's recipe dataclass."""
        return recipe_classes()

    def __post_init__(self) -> None:
        known = method_names()
        bad = [m for m in self.methods if m not in known]
        check(not bad, "methods", f"unknown {bad}; choose from {known}")
        check(self.steps >= 0, "steps", "must be >= 0 (0 = each paper's epochs)")
        check(
            self.batch_size == 0 or self.batch_size >= 2,
            "batch_size",
            "contrastive losses need >= 2 (0 = each paper's batch size)",
        )
        check_lr(self.lr, "lr", zero_ok=True)  # 0 = each paper's learning rate
        TrainingArguments.__post_init__(self)  # seed, max_grad_norm
        LoRAArguments.__post_init__(self)  # lora_r
        check(self.save_every >= 0, "save_every", "must be >= 0 (0 = no checkpoints)")
        types = recipe_classes()
        unknown = sorted(set(self.recipes) - set(types))
        check(not unknown, "recipes", f"no method declares {unknown}; choose from {list(types)}")
        for name, tp in types.items():
            given = self.recipes.get(name)
            check(given is None or isinstance(given, tp), name, f"needs a {tp.__name__}")
        self.recipes = {name: self.recipes.get(name) or tp() for name, tp in types.items()}

    def recipe_of(self, name: str, cls: type[R]) -> R:
        """The recipe ``baselines.<name>``, a ``cls``."""
        rc = self.recipes[name]
        if not isinstance(rc, cls):
            raise TypeError(f"baselines.{name} is a {type(rc).__name__}, not a {cls.__name__}")
        return rc


def flat_recipe(bc: BaselinesConfig, name: str, keys: tuple[str, ...] = ()) -> dict[str, object]:
    """``baselines.<name>``'s fields (only ``keys`` when given) under their flat names,
    ``<name>_<field>``: the names run fingerprints use (so a checkpoint's stays valid)."""
    rc = bc.recipes[name]
    old = {new: o for o, new in rc.old_names.items()}
    return {
        f"{name}_{old.get(f.name, f.name)}": getattr(rc, f.name)
        for f in fields(rc)
        if not keys or f.name in keys
    }


def flat_baselines(bc: BaselinesConfig) -> dict[str, object]:
    """The ``baselines`` section as one flat mapping (shared fields, then every recipe under
    ``<method>_<field>``): what stage fingerprints hash."""
    out: dict[str, object] = {
        f.name: getattr(bc, f.name) for f in fields(bc) if f.name != "recipes"
    }
    for name in bc.recipes:
        out.update(flat_recipe(bc, name))
    return out


MEMORY_ONLY = ("gradient_checkpointing",)
"""``baselines`` fields that trade memory for compute and change no trained weight: neither a
baseline's fingerprint nor ``lira run``'s stage markers hash them, so setting one re-runs
nothing (and markers written before a field existed stay valid)."""


class BaselinesRun(Protocol):
    """The parts of a run config ``lira baseline`` reads (a ``RunConfig`` is one)."""

    output_dir: str
    models: ModelsConfig
    data: DataConfig
    baselines: BaselinesConfig

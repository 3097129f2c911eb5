"""Each baseline paper's optimisation recipe: the YAML sections ``baselines.<method>.*``.

:class:`RecipeConfig` holds the fields every paper states; a method's recipe subclasses it with
its paper's defaults and fields of its own. They live here, apart from the methods' losses,
because loading a config reads them: this module imports no torch (nor any method module), so
``lira --help`` and a config error take well under a second (issue 60, item 7). A method's
``config_class`` names its recipe; :data:`RECIPES` is the same table for
:mod:`lira.baselines.config`, which must not import the methods to find it.
"""

from __future__ import annotations

import inspect
import math
import typing
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import ClassVar, Literal, TypeVar

from lira.config import check, check_lr

R = TypeVar("R", bound="RecipeConfig")


@dataclass
class RecipeConfig:
    """The optimisation recipe every baseline paper states; a method's recipe subclasses it
    with its paper's defaults and its own fields (``baselines.<method>.*``)."""

    lr: float = 2e-5
    """AdamW learning rate."""
    batch_size: int = 32
    """Global batch size (split evenly over the processes of a multi-GPU launch)."""
    epochs: float = 1.0
    """Epochs over the method's training rows."""
    scheduler: Literal["constant", "linear", "cosine"] = "linear"
    """Learning-rate schedule."""
    warmup: float = 0.1
    """Warm-up ratio of the schedule."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    beta2: float = 0.999
    """AdamW β2."""
    tau: float = 0.05
    """Temperature of the contrastive loss."""

    old_names: ClassVar[dict[str, str]] = {}
    """Flat-key suffixes of earlier versions that are not the field's name (``lancer_lambda``:
    ``{"lambda": "weight"}``); they name the fields in the run fingerprint."""

    def __post_init__(self) -> None:
        check_lr(self.lr, "lr")
        check(self.batch_size >= 2, "batch_size", "must be >= 2")
        check(self.epochs > 0, "epochs", "must be > 0")
        check(0 <= self.warmup < 1, "warmup", "must be in [0, 1)")
        check(self.tau > 0, "tau", "must be > 0")
        check(0 < self.beta2 < 1, "beta2", "must be in (0, 1)")


def paper_recipe(**defaults: object) -> Callable[[type[R]], type[R]]:
    """Class decorator (under ``@dataclass``): a recipe subclass's paper defaults of the common
    fields, which keep :class:`RecipeConfig`'s type and docstring (a field whose paper value
    needs its own ``--help`` line is redeclared in the class body instead)."""
    hints = typing.get_type_hints(RecipeConfig)
    unknown = sorted(set(defaults) - {f.name for f in fields(RecipeConfig)})
    if unknown:
        raise TypeError(f"paper_recipe: {unknown} are not RecipeConfig fields")

    def apply(cls: type[R]) -> type[R]:
        own = inspect.get_annotations(cls)
        both = sorted(set(own) & set(defaults))
        if both:
            raise TypeError(f"{cls.__name__}: {both} given both in paper_recipe and the class")
        cls.__annotations__ = {**{name: hints[name] for name in defaults}, **own}
        for name, value in defaults.items():
            setattr(cls, name, value)
        return cls

    return apply


def check_negatives(negatives: int, ranks: list[int]) -> None:
    """Mined hard negatives: a count >= 0 and a 1-based ``[first, last]`` rank window."""
    check(
        len(ranks) == 2 and 1 <= ranks[0] <= ranks[1],
        "negative_ranks",
        f"needs [first, last] 1-based ranks with first <= last, got {ranks}",
    )
    check(negatives >= 0, "negatives", "must be >= 0")


@dataclass
@paper_recipe(lr=5e-5, batch_size=64, epochs=1.0, scheduler="cosine", warmup=0.05, beta2=0.999)
class ClearConfig(RecipeConfig):
    """CLEAR's recipe, ``baselines.clear.*`` (paper 000 §4.1, App. A); InfoNCE, CLEAR's own
    baseline, trains with it too (same recipe, same negatives)."""

    weight_decay: float = 0.0
    """AdamW weight decay (sentence-transformers' trainer default; the paper sets none)."""
    tau: float = 0.05
    """1 / scale of MultipleNegativesRankingLoss (scale 20), the loss CLEAR trained with."""
    negatives: int = 5
    """Hard negatives per example: passages, and target-language queries for L_CL (§4.1)."""
    negative_ranks: list[int] = field(default_factory=lambda: [30, 100])
    """1-based rank window of the initial model's retrieval the negatives are sampled from."""
    lambdas: list[float] = field(default_factory=lambda: [0.4, 0.4, 0.2])
    """(λ1, λ2, λ3) of Eq. 2."""
    reverse: bool = True
    """English passage as L_CL's anchor (paper); false = the "w/o Reverse" ablation."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_negatives(self.negatives, self.negative_ranks)
        check(len(self.lambdas) == 3, "lambdas", "needs three weights")


@dataclass
@paper_recipe(lr=2e-5, epochs=4.0, scheduler="linear", warmup=0.0, weight_decay=0.0, beta2=0.999)
class LancerConfig(RecipeConfig):
    """LANCER's recipe, ``baselines.lancer.*`` (paper 002 §3, §4.1)."""

    batch_size: int = 64
    """English retrieval examples per step (L_R)."""
    tau: float = 0.05
    """L_R temperature (the paper scores unnormalised dot products; our embeddings are unit)."""
    per_language: int = 16
    """Non-parallel texts per language in each step's multilingual batch (L_C)."""
    weight: float = 1.0
    """Weight λ of L_C (the paper adds L_R + L_C)."""

    old_names: ClassVar[dict[str, str]] = {"lambda": "weight"}

    def __post_init__(self) -> None:
        super().__post_init__()
        check(self.per_language >= 1, "per_language", "must be >= 1")


@dataclass
@paper_recipe(
    batch_size=32, epochs=1.0, scheduler="linear", warmup=0.15, weight_decay=0.01, beta2=0.99
)
class JSDConfig(RecipeConfig):
    """English inclination's recipe, ``baselines.jsd.*`` (paper 003 §4, App. C)."""

    lr: float = 2e-5
    """App. C sets 4e-6 (bge-m3), 2e-5 (mE5-large), 1e-5 (gte), 3e-5 (jina) per model."""
    tau: float = 0.05
    """Eq. 7 prints no temperature; MultipleNegativesRankingLoss's default 1/20 is used."""
    weight: float = 1.0
    """Weight of L_JSD (Eq. 2 adds the two terms)."""
    eps: float = 1e-8
    """ε inside the square root of Eq. 6."""


@dataclass
@paper_recipe(
    lr=2e-5,
    batch_size=512,
    epochs=1.0,
    scheduler="linear",
    warmup=0.1,
    weight_decay=0.01,
    beta2=0.99,
)
class MergingConfig(RecipeConfig):
    """Language composition + merging's recipe, ``baselines.merging.*`` (paper 001 §4.3,
    App. B.2-B.3)."""

    tau: float = 0.01
    """GISTEmbedLoss temperature (sentence-transformers' default; the paper sets none)."""
    mini_batch: int = 32
    """CachedGISTEmbedLoss mini-batch (memory only: the loss value does not depend on it)."""
    negatives: int = 5
    """Mined English hard negatives per query (App. B.2; its sixth is a generated one)."""
    negative_ranks: list[int] = field(default_factory=lambda: [50, 300])
    """1-based rank window the negatives are mined from (App. B.2)."""
    max_sim: float = 0.8
    """A negative's cosine with the query must not exceed this (App. B.2)."""
    relative_margin: float = 0.95
    """...and must be below this times the positive's cosine with the query (App. B.2)."""
    partner: Literal["base", "mono"] = "base"
    """The model merged with the D(l en en) fine-tune: the base model (the paper's best
    mono-lingual model for 3 of its 4 backbones, Table 2) or a D(en en en) fine-tune."""
    weights: list[float] = field(default_factory=lambda: [0.5, 0.5])
    """Weights of (cross-lingual fine-tune, partner) in the average."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_negatives(self.negatives, self.negative_ranks)
        check(self.mini_batch >= 1, "mini_batch", "must be >= 1")
        check(len(self.weights) == 2, "weights", "needs two weights")
        check(
            all(math.isfinite(w) and w >= 0 for w in self.weights)
            and abs(sum(self.weights) - 1) < 1e-6,
            "weights",
            "must be finite, >= 0 and sum to 1",
        )


RECIPES: dict[str, type[RecipeConfig]] = {
    "clear": ClearConfig,  # infonce trains with it too (its ``recipe`` is "clear")
    "lancer": LancerConfig,
    "jsd": JSDConfig,
    "merging": MergingConfig,
}
"""Method name -> its recipe (the method's ``config_class``): the recipe sections of the
methods registered by name in :data:`lira.baselines.names.METHODS`."""

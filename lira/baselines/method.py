"""What one baseline method is: its recipe, the data it needs, its batches and its loss.

A method is an object (a :class:`BaselineMethod` subclass instance, one per method file) that
:class:`~lira.baselines.trainer.ContrastiveTrainer` calls through hooks; the trainer owns the
model, the optimizer, the schedule, the skipping of non-finite steps and the checkpoints.
The hooks receive the trainer, whose attributes a method reads: ``examples`` (the
:class:`~lira.baselines.trainer.TrainExample` rows), ``corpus``, ``doc_index`` /
``corpus_key`` (document ids -> the indices that in-batch masking compares), ``cfg`` (the
``baselines`` config), ``recipe``, ``objective`` (what :meth:`BaselineMethod.setup` returned),
``data`` (what :meth:`BaselineMethod.prepare` returned beyond the trainer's own arguments),
``accelerator`` and :meth:`~lira.baselines.trainer.ContrastiveTrainer.encode`.

This module imports no trainer module (and the config only for its types), so a method file
can import it freely.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

if TYPE_CHECKING:
    from lira.baselines.config import RecipeConfig

DEFAULT_RECIPE: Mapping[str, Any] = MappingProxyType({
    "lr": 2e-5, "batch_size": 32, "epochs": 1.0, "scheduler": "linear", "warmup": 0.1,
    "weight_decay": 0.01, "beta2": 0.999, "tau": 0.05,
})  # fmt: skip
"""The recipe of a method without paper hyper-parameters of its own (``recipe = None``); the
shared budget (``baselines.steps`` / ``batch_size`` / ``lr`` > 0) overrides it as for every
method."""


class BaselineMethod:
    """One baseline method; override the hooks its paper needs (the defaults do nothing)."""

    name: str = ""
    config_class: type[RecipeConfig] | None = None
    """The dataclass of its paper recipe (a :class:`~lira.baselines.config.RecipeConfig`,
    declared in the method's file): the YAML section ``baselines.<name>.*``; None = none."""
    recipe: str | None = None
    """The method whose recipe section it trains with when that is another's (InfoNCE:
    ``"clear"``); None = its own (:attr:`config_class`), or :attr:`defaults` without one."""
    defaults: Mapping[str, Any] = DEFAULT_RECIPE
    """The recipe without a recipe section (same keys as :data:`DEFAULT_RECIPE`)."""
    negatives: tuple[str, ...] = ()
    """Hard negatives mined with the initial model before training: ``"clear"`` (fills each
    example's ``p_hn`` and ``q_hn``, CLEAR §4.1) and / or ``"composition"`` (``gist_hn``,
    paper 001 App. B.2). Their config fields are part of the method's run fingerprint."""
    own_loop: bool = False
    """True: :meth:`train` replaces the shared training loop (it is then not usable as a
    :class:`~lira.baselines.trainer.ContrastiveTrainer` objective)."""

    def recipe_section(self) -> str | None:
        """The name of the ``baselines.<name>`` recipe it trains with (None = :attr:`defaults`)."""
        return self.recipe or (self.name if self.config_class is not None else None)

    def prepare(self, cfg: Any, examples: list[Any], corpus: list[Any], dataset: Any) -> dict:
        """Extra data the trainer gets as keyword arguments (``cfg`` is the whole RunConfig);
        called after the seed is set, before the backbone is loaded."""
        return {}

    def check(self, trainer: Any) -> None:
        """Raise ``ValueError`` when the trainer lacks data this method needs."""

    def rows(self, trainer: Any) -> list[int] | None:
        """Example indices the batches are drawn from; None = every example."""
        return None

    def n_rows(self, trainer: Any) -> int:
        """How many rows batches are drawn from (the recipe's epochs count these)."""
        return len(trainer.rows) if trainer.rows is not None else len(trainer.examples)

    def setup(self, trainer: Any) -> Any:
        """The loss module(s) of one trainer (stored as ``trainer.objective``); called once
        the model is prepared."""
        return None

    def draw(self, trainer: Any, batch: dict[str, Any], rng: random.Random) -> None:
        """Add what the loss needs beyond ``batch["rows"]`` (drawn from ``rng``)."""

    def loss(self, trainer: Any, batch: dict[str, Any]) -> Tensor:
        """The method's loss on one batch."""
        raise NotImplementedError(f"baseline method {self.name!r} defines no loss")

    def train(
        self, cfg: Any, examples: list[Any], corpus: list[Any], dataset: Any, out: Path
    ) -> dict[str, Any]:
        """With :attr:`own_loop`: train, save under ``out`` and return the summary stats."""
        raise NotImplementedError(f"baseline method {self.name!r} has no own training loop")

    def __repr__(self) -> str:
        return f"<baseline method {self.name!r}>"


# ------------------------------------------------------------------------- shared helpers
def english_rows(examples: list[Any]) -> list[int]:
    """The first example of each question: one row per English (q_en, p_en) pair."""
    first = {e.qid: i for i, e in reversed(list(enumerate(examples)))}
    return sorted(first.values())


def batch_examples(trainer: Any, batch: dict[str, Any]) -> tuple[list[Any], Tensor]:
    """The batch's examples and the document index of each gold passage (on the device)."""
    ex = [trainer.examples[i] for i in batch["rows"]]
    dev = trainer.accelerator.device
    return ex, torch.tensor([trainer.doc_index[e.pos_id] for e in ex], device=dev)


def passages_with_negatives(trainer: Any, ex: list[Any]) -> tuple[Tensor, Tensor, Tensor]:
    """(p_pos [B, d], p_hn [B, K, d], p_hn_ids [B, K]): the English gold passages and CLEAR's
    mined passage negatives (K = the fewest any example has), encoded in one pass."""
    b, dev = len(ex), trainer.accelerator.device
    k = min(len(e.p_hn) for e in ex)
    p_hn_ids = torch.tensor(
        [[trainer.corpus_key[j] for j in e.p_hn[:k]] for e in ex], device=dev
    ).view(b, k)
    docs = [e.pos_text for e in ex] + [trainer.corpus[j].text for e in ex for j in e.p_hn[:k]]
    p_all = trainer.encode(docs, "document")  # [B(1+K), d]
    return p_all[:b], p_all[b:].view(b, k, p_all.shape[-1]), p_hn_ids

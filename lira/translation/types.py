"""What a translator backend returns and what the translation store hands to training and
inference."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)

NEUTRAL_SCORE = 5.5
"""Mid-scale critic score used where a candidate has none (critic failed or off, no translation)."""


@dataclass(frozen=True)
class Candidate:
    """One English candidate of a source text, with its critic scores."""

    translator: str
    """Name of the translator (TranslatorConfig.name) that produced it."""
    text: str
    """The cleaned translation (meta-text removed)."""
    scores: tuple[int, int, int] | None
    """Critic (semantic, emotional, pragmatic), each 1-10; None when the critic failed or is off."""


@dataclass
class Translation:
    """One translator output: the raw text, or the error that prevented it."""

    raw: str | None
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when a text was produced."""
        return self.error is None and self.raw is not None


class TranslatorBackend(Protocol):
    """What every backend does: texts of one language -> one :class:`Translation` each."""

    def translate(self, texts: Sequence[str], lang: str) -> list[Translation]:
        """Translate ``texts`` (language ``lang``) to English; failures are recorded, not raised."""
        ...


def chat_messages(prompt: str) -> list[dict[str, str]]:
    """A single-turn chat with the user message ``prompt``."""
    return [{"role": "user", "content": prompt}]


def per_item(fn: Callable[[list[str]], list[str]], texts: list[str]) -> list[Translation]:
    """Run ``fn`` on the batch; if it raises, retry text by text so one bad text fails alone."""
    t0 = time.perf_counter()
    try:
        outs = fn(texts)
        dt = (time.perf_counter() - t0) / max(len(texts), 1)
        return [Translation(o, None, dt) for o in outs]
    except Exception as e:  # one failure must not sink the batch
        if len(texts) == 1:
            return [Translation(None, f"{type(e).__name__}: {e}", time.perf_counter() - t0)]
        log.warning("batch of %d failed (%s); retrying one by one", len(texts), e)
        return [r for t in texts for r in per_item(fn, [t])]

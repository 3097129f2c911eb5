"""What the translation store hands to training and inference."""

from __future__ import annotations

from dataclasses import dataclass

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

"""The in-memory representations every loader produces and every stage consumes."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Record:
    """One text with its id and language (ISO 639-1 code, e.g. 'de')."""

    id: str
    text: str
    lang: str


@dataclass
class RetrievalData:
    """Queries, a corpus and binary/graded relevance judgements (qrels)."""

    queries: list[Record]
    corpus: list[Record]
    qrels: dict[str, dict[str, int]]
    """query id -> {doc id: relevance > 0}."""
    name: str = ""
    dropped: int = 0
    """Malformed records skipped (only when the loader was asked to drop them)."""


@dataclass
class PairData:
    """Sentence pairs with gold similarity scores (STS, rank task)."""

    sentence1: list[str]
    sentence2: list[str]
    scores: list[float]
    lang1: list[str] = field(default_factory=list)
    lang2: list[str] = field(default_factory=list)
    name: str = ""
    dropped: int = 0


@dataclass
class ParallelData:
    """Texts aligned across languages: ``texts[lang][i]`` translates ``texts[other][i]``."""

    ids: list[str]
    texts: dict[str, list[str]]
    name: str = ""

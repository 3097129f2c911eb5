"""Is a candidate a translation at all? The echo check (critic) and the format check (tuning).

LiRA translates into English. :func:`echo_reason` names why a candidate is not a translation of
its source: ``empty``; ``copy`` (the normalised candidate is the source, or a fragment of it at
least COPY_MIN_SHARE of its length, e.g. a copy cut off by ``max_new_tokens``); ``untranslated``
(>= MIN_WORDS words, more than SOURCE_WORD_SHARE of them words of the source: a paraphrase in
the source language); ``script`` (more than NON_LATIN_SHARE of the candidate's letters outside
the Latin script: not English, e.g. a Russian source answered in Russian); ``quoted`` (a run
of consecutive source words, at least COPY_MIN_SHARE of them and not just a name, quoted inside
other text: 'The question is: "Wer verlor gegen die Broncos?"'). An embedding of meaning finds
such echoes "similar" (a copy has cosine 1), so the embedding critic scores them 1 and a tuned
translator's reward gives them nothing (a quoted source there keeps the soft ECHO_PENALTY: a
completion may echo the source beside its translation).

:func:`format_check` adds the softer form penalties of a completion (cleaned like a pool
candidate by :func:`lira.translation.cleanup.clean_translation`): meta-text that the cleanup
removed adds META_PENALTY, a source echoed inside the translation adds ECHO_PENALTY, and a length
ratio len(y) / len(x) (characters) outside [min_ratio, max_ratio] adds
min(1, |log2(ratio / nearest bound)|).
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass

from lira.translation.cleanup import clean_translation

META_PENALTY = 0.5
"""Penalty of a completion from which the cleanup removed meta-text (words, not just quotes)."""
ECHO_PENALTY = 0.5
"""Penalty of a completion that contains the whole source (besides a translation)."""
COPY_MIN_SHARE = 0.5
"""A completion found inside the source and at least this share of its length is a copy (the
first tuning run on xquad_minilm learned such truncated copies when only exact ones counted)."""
SOURCE_WORD_SHARE = 0.75
"""A completion of at least MIN_WORDS words, more than this share of them words of the source,
was not translated (a paraphrase in the source language; numbers do not count as words)."""
MIN_WORDS = 3
"""Completions with fewer words are not checked for source words (a name may be all there is)."""
MIN_ECHO_CHARS = 8
"""Sources shorter than this (normalised) are not checked for an echo (too many false hits)."""
NON_LATIN_SHARE = 0.5
"""A candidate with more than this share of its letters outside the Latin script is not English
(a name in its own script inside an English sentence stays below it)."""
QUOTED_LOWER_WORDS = 2
"""A quoted run of source words needs this many words lower-case in the source to count."""
HARD = frozenset({"empty", "copy", "untranslated", "script", "quoted"})
"""The reasons that make a candidate no translation at all (:func:`echo_reason`)."""


def normalize(text: str) -> str:
    """Case-folded text without punctuation and with single spaces (for copy detection)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(" " if unicodedata.category(c)[0] in "PSZ" else c for c in text)
    return re.sub(r"\s+", " ", text).strip()


def words(normalized: str) -> list[str]:
    """The words of a :func:`normalize`-d text, numbers left out (for the source-word check)."""
    return [w for w in normalized.split() if not w.isdigit()]


def non_latin_share(text: str) -> float:
    """Share of ``text``'s letters outside the Latin script (0 for a text without letters)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return 0.0
    return sum(not unicodedata.name(c, "").startswith("LATIN") for c in letters) / len(letters)


def quoted_run(source: str, candidate: str) -> list[str]:
    """The longest run of consecutive :func:`normalize`-d source words found in ``candidate``."""
    a, b = normalize(source).split(), normalize(candidate).split()
    best, end, prev = 0, 0, [0] * (len(b) + 1)
    for i in range(1, len(a) + 1):
        cur = [0] * (len(b) + 1)
        for j in range(1, len(b) + 1):
            if a[i - 1] == b[j - 1]:
                cur[j] = prev[j - 1] + 1
                if cur[j] > best:
                    best, end = cur[j], i
        prev = cur
    return a[end - best : end]


def quotes_source(source: str, candidate: str) -> bool:
    """True when ``candidate`` quotes a run of at least max(MIN_WORDS, COPY_MIN_SHARE of the
    source's words) consecutive source words, QUOTED_LOWER_WORDS of them lower-case in the source
    (words of the sentence, not a multi-word name such as "San Diego-Carlsbad-San Marcos")."""
    run = quoted_run(source, candidate)
    n_src = len(normalize(source).split())
    if len(run) < max(MIN_WORDS, math.ceil(COPY_MIN_SHARE * n_src)):
        return False
    lower = {w.casefold() for w in re.findall(r"\w+", unicodedata.normalize("NFKC", source))
             if w[:1].islower()}  # fmt: skip
    return sum(w in lower for w in run) >= QUOTED_LOWER_WORDS


def echo_reason(source: str, candidate: str, quoted: bool = True) -> str | None:
    """Why ``candidate`` is no English translation of ``source`` (a :data:`HARD` reason: empty,
    copy, untranslated, script, quoted), or None when it may be one. ``quoted=False`` leaves a
    source quoted inside other text to the caller (:func:`format_check` penalises it softly)."""
    src, out = normalize(source), normalize(candidate)
    if not out:
        return "empty"
    if out == src or (len(out) >= COPY_MIN_SHARE * len(src) and out in src):
        return "copy"
    out_words, src_words = words(out), set(words(src))
    shared = sum(w in src_words for w in out_words)
    if len(out_words) >= MIN_WORDS and shared > SOURCE_WORD_SHARE * len(out_words):
        return "untranslated"
    if non_latin_share(candidate) > NON_LATIN_SHARE:
        return "script"
    if quoted and quotes_source(source, candidate):
        return "quoted"
    return None


@dataclass
class FormatCheck:
    """The cleaned completion and its format penalty; ``hard``: no translation at all."""

    text: str
    penalty: float
    reasons: tuple[str, ...] = ()

    @property
    def hard(self) -> bool:
        """True when the completion earns no composite reward (a :data:`HARD` reason)."""
        return bool(HARD & set(self.reasons))


def format_check(
    source: str, completion: str, min_ratio: float = 0.3, max_ratio: float = 4.0
) -> FormatCheck:
    """Clean ``completion`` like a pool candidate and rate its form (see the module docstring)."""
    cleaned, removed = clean_translation(completion or "")
    reason = echo_reason(source, cleaned, quoted=False)
    if reason is not None:
        return FormatCheck("" if reason == "empty" else cleaned, 1.0, (reason,))
    src = normalize(source)
    penalty, reasons = 0.0, []
    if any(ch.isalnum() for ch in removed):  # quotes alone are harmless
        penalty += META_PENALTY
        reasons.append("meta")
    if len(src) >= MIN_ECHO_CHARS and src in normalize(cleaned):
        penalty += ECHO_PENALTY
        reasons.append("echo")
    ratio = len(cleaned) / max(len(source.strip()), 1)
    bound = min(max(ratio, min_ratio), max_ratio)
    if ratio != bound:
        penalty += min(1.0, abs(math.log2(ratio / bound)))
        reasons.append("short" if ratio < bound else "long")
    return FormatCheck(cleaned, min(penalty, 1.0), tuple(reasons))

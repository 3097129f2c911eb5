"""Meta-text cleanup of LLM translations (paper 004, App. C.3, "Bad Case Analysis").

LLM translators leak assistant-style text around the translation: preambles ("Sure, here is
the translation:"), wrapping quotes (the paper's prompt quotes the source, so models echo
the quotes), trailing offers of help ("If you need any other help, I'm glad to help you."),
trailing notes, and ``<think>…</think>`` reasoning blocks. :func:`clean_translation` strips
them and returns what it removed, so the store keeps both.

Decisions: rules are conservative (a preamble must end with ``:`` or a line break and mention
the translation, a quote pair is stripped only if the quotes inside stay balanced), and they
are applied repeatedly until nothing changes, so "Sure! Here is…: “…”" loses both layers.
"""

from __future__ import annotations

import re

_THINK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN = re.compile(r"<think>.*\Z", re.IGNORECASE | re.DOTALL)  # never closed
_THINK_CLOSE = re.compile(r"\A.*?</think>", re.IGNORECASE | re.DOTALL)  # opened in the prompt

_ACK = r"(?:sure|certainly|of course|okay|ok|absolutely|alright|no problem|great)"
_PREAMBLE = re.compile(
    rf"""\A\s*
    (?:{_ACK}\b[^\n:]*?[.!,]?\s*)?          # optional acknowledgement
    (?:
        (?:here(?:'s|’s|\s+is|\s+are)\b[^\n:]*?)   # "Here is the (English) translation"
        (?:translat\w*|english|version|rendering)[^\n:]*?
        (?::|\n)
      |
        (?:the\s+)?(?:english\s+)?translat\w*(?:\s+(?:in|into|to)\s+english)?
        (?:\s+(?:is|reads))?\s*:          # "Translation:" / "English translation:"
      |
        (?:in\s+)?english\s*:                # "English:" / "In English:"
      |
        [^\n]{{0,200}}?\btranslat(?:es?|ed)\s+(?:in(?:to)?\s+english\s+)?(?:to|as)\s*:?\s*(?=["“‘«'])
                                          # 'The German phrase "…" translates to "…"'
      |
        [^\n]{{0,200}}?\btranslation\s+of\b[^\n]{{0,200}}?\b(?:is|reads)\s*:?\s*(?=["“‘«'])
                                          # 'The translation of "…" is: "…"'
      |
        (?:the\s+)?answer\s+is\s*:\s*(?=["“‘«'])   # 'The answer is: "…"' (small models)
    )\s*""",
    re.IGNORECASE | re.VERBOSE,
)
_ACK_LINE = re.compile(rf"\A\s*{_ACK}[!.,]?\s*\n\s*", re.IGNORECASE)

_OFFER = (
    r"(?:if you (?:need|have|want|would like|require) (?:any )?(?:other |further |more |additional )?"
    r"(?:help|assistance|questions?|translations?|clarification)"
    r"|i(?:'m|’m| am) (?:glad|happy|here) to help"
    r"|(?:please )?let me know if"
    r"|(?:i )?hope (?:this|that|it) helps"
    r"|feel free to (?:ask|reach|let)"
    r"|is there anything else"
    r"|\(?note\s*:)"
)
_TRAILER = re.compile(
    rf"(?:(?<=[.!?。！？\"”’»])|(?<=\n))[ \t]*\n*[ \t]*{_OFFER}[^\n]*(?:\n.*)?\Z",
    re.IGNORECASE | re.DOTALL,
)

# (open, close) pairs, longest first so ‘‘…’’ is tried before ‘…’
_QUOTES: list[tuple[str, str]] = [
    ("‘‘", "’’"),
    ("``", "''"),
    ("''", "''"),
    ('"', '"'),
    ("“", "”"),
    ("„", "“"),
    ("«", "»"),
    ("»", "«"),
    ("「", "」"),
    ("『", "』"),
    ("‘", "’"),
    ("'", "'"),
]


def _balanced(inner: str, open_q: str, close_q: str) -> bool:
    """True when the quotes inside ``inner`` do not close the outer pair early."""
    if open_q == close_q:
        if open_q == "'":  # apostrophes ("it's") are common; reject only 'a' and 'b'
            return "' " not in inner and " '" not in inner
        return open_q not in inner  # "a," he said, "b." is two quotes, not one pair
    depth = 0
    i = 0
    while i < len(inner):
        if inner.startswith(open_q, i):
            depth += 1
            i += len(open_q)
        elif inner.startswith(close_q, i):
            depth -= 1
            if depth < 0:
                return False
            i += len(close_q)
        else:
            i += 1
    return depth == 0


def _strip_quotes(text: str) -> tuple[str, str]:
    """Remove one wrapping quote pair (a final ``.`` outside the quotes is kept), or an opening
    quote that is never closed."""
    for open_q, close_q in _QUOTES:
        if not text.startswith(open_q):
            continue
        for tail in ("", ".", "。"):
            end = close_q + tail
            if len(text) >= len(open_q) + len(end) + 1 and text.endswith(end):
                inner = text[len(open_q) : len(text) - len(end)]
                if inner.strip() and _balanced(inner, open_q, close_q):
                    return inner.strip() + tail, open_q + close_q
        unclosed = text.count(open_q) == 1 if open_q == close_q else close_q not in text
        if unclosed and open_q != "'" and len(text) > len(open_q):  # cut off: '"The dog sl'
            return text[len(open_q) :].strip(), open_q
    return text, ""


def clean_translation(text: str) -> tuple[str, str]:
    """Strip meta-text from an LLM translation; returns ``(cleaned, removed_text)``.

    ``removed_text`` joins the removed pieces with newlines ("" when nothing was removed).
    """
    removed: list[str] = []

    def cut(pattern: re.Pattern[str], s: str) -> str:
        m = pattern.search(s)
        if m is None or not m.group(0).strip():
            return s
        removed.append(m.group(0).strip())
        return (s[: m.start()] + s[m.end() :]).strip()

    out = text.strip()
    for _ in range(8):
        before = out
        out = cut(_THINK, out)
        out = cut(_THINK_CLOSE, out)
        out = cut(_THINK_OPEN, out)
        out = cut(_PREAMBLE, out)
        out = cut(_ACK_LINE, out)
        out = cut(_TRAILER, out)
        out, quotes = _strip_quotes(out)
        if quotes:
            removed.append(quotes)
        if out == before:
            break
    return out, "\n".join(removed)

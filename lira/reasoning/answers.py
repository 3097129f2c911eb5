"""Answer extraction for MGSM (last number) and X-CSQA (choice letter), kept with the raw text."""

from __future__ import annotations

import re

# A number with optional sign, thousands separators (1,250 / 1 250 / 1.250.000) and decimals.
_NUMBER = re.compile(r"-?\d{1,3}(?:[,\u00a0 ]\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?")
_CUES = re.compile(
    r"(?:the answer is|answer\s*[:：]|answer is|final answer|correct answer is|"
    r"the correct option is|option|choice)\s*",
    re.IGNORECASE,
)
# After a cue: "(c)" / "c)" anywhere, a capital standalone letter, or a lone letter right away.
_LETTER_AFTER_CUE = re.compile(r"^\(?([A-Ea-e])(?=[).:,]|\s*$)|\(([A-Ea-e])\)|\b([A-E])\b")


def normalize_number(text: str) -> float | None:
    """Parse one number string: drop thousands separators, spaces and a trailing period."""
    t = text.strip().rstrip(".")
    t = re.sub(r"(?<=\d)[,\u00a0 ](?=\d{3}\b)", "", t)
    try:
        return float(t)
    except ValueError:
        return None


def extract_number(generation: str) -> float | None:
    """The last number in a generation (MGSM convention); None when there is none."""
    matches = _NUMBER.findall(generation.replace("$", " ").replace("%", " "))
    for m in reversed(matches):
        value = normalize_number(m)
        if value is not None:
            return value
    return None


def extract_choice(generation: str, choices: str = "ABCDE") -> str | None:
    """The choice letter: the first valid letter after the last answer cue, else a lone letter."""
    valid = set(choices.upper())
    cues = list(_CUES.finditer(generation))
    if cues:
        tail = generation[cues[-1].end() :].lstrip(" *:\"'")
        m = _LETTER_AFTER_CUE.search(tail)
        if cues[-1].group(0).strip().lower() in ("option", "choice"):  # "option e is right"
            m = re.match(r"\(?([A-Ea-e])\b", tail) or m
        if m:
            letter = next(g for g in m.groups() if g).upper()
            if letter in valid:
                return letter
    stripped = generation.strip().strip("().:*\"' ")
    if len(stripped) == 1 and stripped.upper() in valid:
        return stripped.upper()
    m = re.match(r"^\(?([A-Ea-e])[).:]", generation.strip())
    if m and m.group(1).upper() in valid:
        return m.group(1).upper()
    return None


def numbers_equal(pred: float | None, gold: float, tol: float = 1e-6) -> bool:
    """MGSM correctness: the extracted number equals the gold answer."""
    return pred is not None and abs(pred - gold) <= tol * max(1.0, abs(gold))

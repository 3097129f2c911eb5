"""Loaders for MGSM (TSV: question, numeric answer) and X-CSQA (JSONL: stem, choices A-E, key).

Both read local files only (or a local ``datasets`` folder saved with ``save_to_disk``); a
malformed row raises ``ValueError`` naming the file, the line and the field.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from lira.reasoning.answers import normalize_number


@dataclass(frozen=True)
class MathItem:
    """One MGSM problem."""

    id: str
    question: str
    answer: float
    lang: str


@dataclass(frozen=True)
class ChoiceItem:
    """One X-CSQA problem: a stem, labelled choices and the gold label."""

    id: str
    stem: str
    choices: tuple[tuple[str, str], ...]
    answer: str
    lang: str


def _bad(path: Path, line: int, field: str, why: str) -> ValueError:
    return ValueError(f"{path}: line {line}: field '{field}': {why}")


def load_mgsm(path: str | Path, lang: str) -> list[MathItem]:
    """Read an MGSM TSV (``question<TAB>answer``, no header) or a local datasets folder."""
    path = Path(path)
    if path.is_dir():
        from datasets import load_from_disk

        ds = load_from_disk(str(path))
        rows = [
            (r["question"], str(r["answer_number"] if "answer_number" in r else r["answer"]))
            for r in ds
        ]
    else:
        with path.open(encoding="utf-8", newline="") as f:
            rows = [tuple(r) for r in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
    items = []
    for i, row in enumerate(rows, start=1):
        if len(row) < 2:
            raise _bad(path, i, "answer", "expected 'question<TAB>answer'")
        question, raw = row[0].strip(), row[1].strip()
        if not question:
            raise _bad(path, i, "question", "empty question")
        value = normalize_number(raw)
        if value is None:
            raise _bad(path, i, "answer", f"not a number: {raw!r}")
        items.append(MathItem(id=f"mgsm-{lang}-{i}", question=question, answer=value, lang=lang))
    return items


def load_xcsqa(path: str | Path, lang: str) -> list[ChoiceItem]:
    """Read X-CSQA JSON Lines (``question.stem``, ``question.choices[label,text]``, ``answerKey``)."""
    path = Path(path)
    items = []
    with path.open(encoding="utf-8") as f:
        for i, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise _bad(path, i, "<json>", str(e)) from None
            q = rec.get("question")
            if not isinstance(q, dict) or not str(q.get("stem", "")).strip():
                raise _bad(path, i, "question.stem", "missing or empty")
            choices = q.get("choices")
            if not isinstance(choices, list) or len(choices) < 2:
                raise _bad(path, i, "question.choices", "needs at least two {label, text}")
            pairs = tuple((str(c["label"]).upper(), str(c["text"])) for c in choices)
            key = str(rec.get("answerKey", "")).upper()
            if key not in {label for label, _ in pairs}:
                raise _bad(path, i, "answerKey", f"{key!r} is not one of the choice labels")
            items.append(
                ChoiceItem(
                    id=str(rec.get("id", f"xcsqa-{lang}-{i}")),
                    stem=q["stem"].strip(),
                    choices=pairs,
                    answer=key,
                    lang=lang,
                )
            )
    return items


def demo_reasoning_path() -> Path:
    """Folder of the small hand-written MGSM/X-CSQA-format files shipped for tests and the demo."""
    return Path(__file__).parent / "demo"

"""Loaders for MGSM (TSV: question, numeric answer) and X-CSQA (JSONL: stem, choices A-E, key).

Both read local files only (or a local ``datasets`` folder saved with ``save_to_disk``); a
malformed row, invalid UTF-8 or an unreadable folder raises
:class:`~lira.data.errors.DataError` naming the file, the line and the field.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

from lira.data.errors import DataError
from lira.data.io import lone_surrogate, read_text
from lira.reasoning.answers import normalize_number

MGSM_FIX = "fix or remove that line: MGSM files hold 'question<TAB>answer' rows, no header"
"""The fix printed with a malformed MGSM row."""
XCSQA_FIX = (
    "fix or remove that line: each X-CSQA line is a JSON object with question.stem, "
    "question.choices [{label, text}, ...] and answerKey"
)
"""The fix printed with a malformed X-CSQA line."""


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


def _bad(path: Path, line: int | str, field: str, why: str, fix: str = MGSM_FIX) -> DataError:
    where = line if isinstance(line, str) else f"line {line}"
    return DataError(path, where, field, why, fix)


def _mgsm_rows(path: Path) -> list[tuple[str, ...]]:
    """The (question, answer) rows of a local datasets folder (``answer_number`` or
    ``answer``); a folder that is not a readable Dataset with those columns is a DataError."""
    from datasets import Dataset, load_from_disk

    fix = "give an MGSM TSV file or a Dataset.save_to_disk folder with 'question' and "
    fix += "'answer_number' (or 'answer') columns"
    try:
        ds = load_from_disk(str(path))
    except FileNotFoundError:
        raise
    except (ValueError, TypeError, KeyError, OSError) as e:  # a damaged folder
        raise DataError(path, None, "<dataset>", f"unreadable datasets folder ({e})", fix) from None
    if not isinstance(ds, Dataset):
        why = f"a DatasetDict of splits {sorted(ds)}, not one Dataset"
        raise DataError(path, None, "<dataset>", why, f"name one split's folder; {fix}")
    answer = "answer_number" if "answer_number" in ds.column_names else "answer"
    for column in ("question", answer):
        if column not in ds.column_names:
            raise DataError(path, None, column, f"no such column in {ds.column_names}", fix)
    return [(str(r["question"]), str(r[answer])) for r in ds]


def load_mgsm(path: str | Path, lang: str) -> list[MathItem]:
    """Read an MGSM TSV (``question<TAB>answer``, no header) or a local datasets folder."""
    path = Path(path)
    if path.is_dir():
        rows, unit = _mgsm_rows(path), "row"
    else:
        text = read_text(path)  # invalid UTF-8: a DataError naming the line
        lines = io.StringIO(text, newline="")
        rows = [tuple(r) for r in csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)]
        unit = "line"
    items = []
    for i, row in enumerate(rows, start=1):
        if len(row) < 2:
            raise _bad(path, f"{unit} {i}", "answer", "expected 'question<TAB>answer'")
        question, raw = row[0].strip(), row[1].strip()
        if not question:
            raise _bad(path, f"{unit} {i}", "question", "empty question")
        value = normalize_number(raw)
        if value is None or not math.isfinite(value):
            raise _bad(path, f"{unit} {i}", "answer", f"not a finite number: {raw!r}")
        items.append(MathItem(id=f"mgsm-{lang}-{i}", question=question, answer=value, lang=lang))
    return items


def _choices(path: Path, line: int, choices: object) -> tuple[tuple[str, str], ...]:
    """The (LABEL, text) pairs of ``question.choices``; a DataError unless each is an object
    with a non-empty ``label`` and a ``text``, the labels distinct."""
    if not isinstance(choices, list) or len(choices) < 2:
        raise _bad(path, line, "question.choices", "needs at least two {label, text}", XCSQA_FIX)
    pairs = []
    for n, c in enumerate(choices):
        field = f"question.choices[{n}]"
        if not isinstance(c, dict):
            raise _bad(path, line, field, "expected a {label, text} object", XCSQA_FIX)
        for name in ("label", "text"):
            if c.get(name) is None or isinstance(c[name], (dict, list)):
                raise _bad(path, line, f"{field}.{name}", "missing or not a string", XCSQA_FIX)
        label = str(c["label"]).strip().upper()
        if not label or label in {lb for lb, _ in pairs}:
            raise _bad(path, line, f"{field}.label", f"empty or repeated: {label!r}", XCSQA_FIX)
        pairs.append((label, str(c["text"])))
    return tuple(pairs)


def load_xcsqa(path: str | Path, lang: str) -> list[ChoiceItem]:
    """Read X-CSQA JSON Lines (``question.stem``, ``question.choices[label,text]``, ``answerKey``)."""
    path = Path(path)
    items = []
    for i, line in enumerate(read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError) as e:  # JSONDecodeError, a 5000-digit number, ...
            raise _bad(path, i, "<json>", str(e), XCSQA_FIX) from None
        if not isinstance(rec, dict):
            raise _bad(path, i, "<record>", "expected a JSON object", XCSQA_FIX)
        found = lone_surrogate(rec)
        if found:
            why = f"holds a lone surrogate at character {found[1]} (not valid Unicode)"
            raise _bad(path, i, found[0].lstrip("."), why, XCSQA_FIX)
        q = rec.get("question")
        stem = q.get("stem") if isinstance(q, dict) else None
        if not isinstance(stem, str) or not stem.strip():
            raise _bad(path, i, "question.stem", "missing, empty or not a string", XCSQA_FIX)
        pairs = _choices(path, i, q.get("choices"))  # type: ignore[union-attr]
        key = str(rec.get("answerKey", "")).strip().upper()
        if key not in {label for label, _ in pairs}:
            why = f"{key!r} is not one of the choice labels"
            raise _bad(path, i, "answerKey", why, XCSQA_FIX)
        items.append(
            ChoiceItem(
                id=str(rec.get("id", f"xcsqa-{lang}-{i}")),
                stem=stem.strip(),
                choices=pairs,
                answer=key,
                lang=lang,
            )
        )
    return items


def demo_reasoning_path() -> Path:
    """Folder of the small hand-written MGSM/X-CSQA-format files shipped for tests and the demo."""
    return Path(__file__).parent / "demo"

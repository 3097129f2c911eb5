"""Reading a JSONL file of pre-computed translations (the paper's offline-translation path).

:func:`read_translations` parses and checks the whole file before anything is stored, so a
malformed line imports nothing; :meth:`~lira.translation.store.TranslationStore.import_jsonl`
then stores its rows as candidates of ``reference`` translators.
"""

from __future__ import annotations

import json
from pathlib import Path

from lira.data.io import lone_surrogate
from lira.errors import UserInputError
from lira.languages import language_problem

Reference = tuple[str, str, str, str | None]
"""One pre-computed translation: (source text, source language, translation, source id)."""


def read_translations(
    path: str | Path, translator_name: str | None = None
) -> dict[str, list[Reference]]:
    """{translator: its translations} of a JSONL file, in file order.

    Each line: ``source_id`` (or ``id``), ``source_text`` (or ``source``), ``source_lang``
    (or ``lang``), ``translation`` and ``translator`` (overridden by ``translator_name``):
    strings (``source_id`` may be an integer), the language an ISO 639-1 code. A malformed
    line, or a second translation of a source by one translator, raises naming the file, line
    number and the field; a line repeated as it is counts once.
    """
    by_name: dict[str, list[Reference]] = {}
    first_line: dict[tuple[str, str, str], tuple[int, str]] = {}
    """(translator, source, language) -> (the line that first gave it, its translation)."""
    fix = "fix the line and import again (nothing was imported)"
    with open(path, "rb") as f:
        for n, raw_line in enumerate(f, 1):
            try:
                line = raw_line.decode("utf-8")
            except UnicodeDecodeError as e:
                raise UserInputError(
                    f"{path}:{n}: invalid UTF-8 at byte {e.start} of the line; {fix}"
                ) from None
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except (ValueError, RecursionError) as e:
                raise UserInputError(f"{path}:{n}: not valid JSON ({e}); {fix}") from None
            if not isinstance(d, dict):
                raise UserInputError(
                    f"{path}:{n}: expected a JSON object, got {type(d).__name__}; {fix}"
                )
            bad = lone_surrogate(d)
            if bad:
                raise UserInputError(
                    f"{path}:{n}: field {bad[0].lstrip('.')!r} holds a lone surrogate at "
                    f"character {bad[1]} (a \\ud800-\\udfff escape, not valid Unicode); {fix}"
                )

            def get(*names: str, d: dict[str, object] = d, n: int = n) -> str:
                for name in names:
                    if d.get(name) not in (None, ""):
                        return text_field(d[name], name, f"{path}:{n}", fix)
                raise UserInputError(
                    f"{path}:{n}: missing field {names[0]!r} (or {names[1:]}); {fix}"
                )

            name = translator_name or get("translator", "translator_name")
            sid = d.get("source_id", d.get("id"))
            if sid is not None and (isinstance(sid, bool) or not isinstance(sid, (str, int))):
                raise UserInputError(
                    f"{path}:{n}: field 'source_id' is {json.dumps(sid)[:40]}, not a string or "
                    f"an integer; {fix}"
                )
            source, lang = get("source_text", "source", "text"), get("source_lang", "lang")
            why = language_problem(lang)
            if why is not None:
                raise UserInputError(f"{path}:{n}: field 'source_lang': {why}; {fix}")
            item = (source, lang, get("translation", "target"), None if sid is None else str(sid))
            earlier = first_line.setdefault((name, source, lang), (n, item[2]))
            if earlier[0] != n and earlier[1] != item[2]:
                raise UserInputError(
                    f"{path}:{n}: another translation of the {lang} source of line {earlier[0]} "
                    f"by translator {name!r:.80}; the store keeps one translation per source "
                    "and translator: keep one of the lines (or give the other its own "
                    f"translator), then import again (nothing was imported)"
                )
            if earlier[0] == n:  # the same line twice is the same row: stored (and counted) once
                by_name.setdefault(name, []).append(item)
    return by_name


def text_field(value: object, name: str, where: str, fix: str) -> str:
    """``value`` of field ``name`` when it is a string; a number, list or object is refused (it
    was stored as its Python text: ``5`` as "5", ``["Hi"]`` as "['Hi']")."""
    if not isinstance(value, str):
        raise UserInputError(
            f"{where}: field {name!r} is {json.dumps(value, ensure_ascii=False)[:40]}, not a "
            f"string; write it as a JSON string; {fix}"
        )
    return value

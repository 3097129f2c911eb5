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

Reference = tuple[str, str, str, str | None]
"""One pre-computed translation: (source text, source language, translation, source id)."""


def read_translations(
    path: str | Path, translator_name: str | None = None
) -> dict[str, list[Reference]]:
    """{translator: its translations} of a JSONL file, in file order.

    Each line: ``source_id`` (or ``id``), ``source_text`` (or ``source``), ``source_lang``
    (or ``lang``), ``translation`` and ``translator`` (overridden by ``translator_name``).
    A malformed line raises naming the file, line number and the missing field.
    """
    by_name: dict[str, list[Reference]] = {}
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

            def get(*names: str, d: dict[str, object] = d, n: int = n) -> object:
                for name in names:
                    if d.get(name) not in (None, ""):
                        return d[name]
                raise UserInputError(
                    f"{path}:{n}: missing field {names[0]!r} (or {names[1:]}); {fix}"
                )

            name = str(translator_name or get("translator", "translator_name"))
            sid = d.get("source_id", d.get("id"))
            item = (
                str(get("source_text", "source", "text")),
                str(get("source_lang", "lang")),
                str(get("translation", "target")),
                None if sid is None else str(sid),
            )
            by_name.setdefault(name, []).append(item)
    return by_name

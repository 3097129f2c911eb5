"""The translation prompts: the paper's chat prompt and the few-shot completion prompt for base
models (lira/prompts.py)."""

from __future__ import annotations

import pytest

from lira.errors import UserInputError
from lira.prompts import PROMPTS, first_line, is_completion, translation_prompt


def test_the_fewshot_prompt_names_the_language_and_ends_where_the_model_writes():
    p = translation_prompt("Wie  alt ist\ndie Stadt?", "de", "fewshot-v1")
    assert p.endswith("\nGerman: Wie alt ist die Stadt?\nEnglish:")  # one line per source
    assert p.startswith("Translate each sentence into English.\n\nGerman: ")
    assert p.count("\nEnglish: ") == 4  # the four worked pairs
    assert is_completion("fewshot-v1") and not is_completion("paper-v1")


def test_the_paper_prompt_is_unchanged_by_the_new_version():
    """A prompt version is part of every store key: adding one never edits another."""
    p = translation_prompt("Hallo {lang}", "de", "paper-v1")
    assert p == PROMPTS["paper-v1"]["translate"].replace("{text}", "Hallo {lang}")


def test_first_line_is_the_translation():
    assert first_line(" How old is the city?\n\nGerman: Wie …") == "How old is the city?"
    assert first_line("  One line only  ") == "One line only"
    assert first_line("\n") == ""


def test_unknown_language_and_version_are_refused():
    with pytest.raises(ValueError, match="unknown language code 'xx'"):
        translation_prompt("x", "xx", "fewshot-v1")
    with pytest.raises(UserInputError, match="unknown prompt version 'v0'"):
        translation_prompt("x", "de", "v0")

"""Meta-text cleanup (paper 004 App. C.3): the paper's bad cases and our own."""

from __future__ import annotations

import pytest

from lira.translation.cleanup import clean_translation

PAPER_NOISY = (
    "Sure, here is the translated sentence:\n"
    "‘‘Baku, Azerbaijan, January 1 ... ‘‘2019 will go down in history as a year of\n"
    "significant reforms ...’’ ...’’"
)


def test_paper_bad_case_keeps_inner_quotes():
    cleaned, removed = clean_translation(PAPER_NOISY)
    assert cleaned == (
        "Baku, Azerbaijan, January 1 ... ‘‘2019 will go down in history as a year of\n"
        "significant reforms ...’’ ..."
    )
    assert "Sure, here is the translated sentence:" in removed


@pytest.mark.parametrize(
    ("noisy", "clean", "removed_part"),
    [
        ("Sure, here is the translation: The dog sleeps.", "The dog sleeps.", "Sure, here is"),
        ("Here is the translated sentence: The dog sleeps.", "The dog sleeps.", "Here is"),
        (
            "The dog sleeps. If you need any other help, I'm glad to help you.",
            "The dog sleeps.",
            "If you need any other help",
        ),
        ("The dog sleeps.\nI hope this helps!", "The dog sleeps.", "hope this helps"),
        ("<think>The user wants English.</think>\nThe dog sleeps.", "The dog sleeps.", "<think>"),
        ("<think>unfinished reasoning", "", "<think>"),
        ("'The dog sleeps.'", "The dog sleeps.", "''"),
        ("“The dog sleeps.”", "The dog sleeps.", "“”"),
        ("‘The dog sleeps.’", "The dog sleeps.", "‘’"),
        ("«The dog sleeps.»", "The dog sleeps.", "«»"),
        ("''The dog sleeps.''", "The dog sleeps.", "''''"),
        ('"The dog sleeps".', "The dog sleeps.", '""'),
        ("Translation: The dog sleeps.", "The dog sleeps.", "Translation:"),
        ("Certainly!\nThe dog sleeps.", "The dog sleeps.", "Certainly!"),
        ("The dog sleeps.\n\nNote: 'schlafen' means sleep.", "The dog sleeps.", "Note:"),
        (
            'The German phrase "Der Hund schläft" translates to "The dog sleeps."',
            "The dog sleeps.",
            "translates to",
        ),
        (
            "Sure! Here's the English translation:\n\"It's raining.\"\n\nLet me know if you need more.",
            "It's raining.",
            "Let me know",
        ),
        # SmolLM2-135M's habits, seen in the demo translation store
        ('The answer is: "Who led the Panthers?"', "Who led the Panthers?", "The answer is:"),
        (
            'The translation of "Wer führte die Panthers an?" is: "Who led the Panthers?"',
            "Who led the Panthers?",
            "The translation of",
        ),
        (
            'The question is in German, translated into English as "Who led the Panthers?"',
            "Who led the Panthers?",
            "translated into English as",
        ),
        ("In English: The dog sleeps.", "The dog sleeps.", "In English:"),
        ('"The dog sl', "The dog sl", '"'),  # cut off by max_new_tokens: no closing quote
        ("„Der Hund", "Der Hund", "„"),
    ],
)
def test_meta_text_is_removed(noisy, clean, removed_part):
    cleaned, removed = clean_translation(noisy)
    assert cleaned == clean
    assert removed_part in removed


@pytest.mark.parametrize(
    "text",
    [
        "The dog sleeps in the garden.",
        "“Hello” and “bye” are greetings.",
        "'a' and 'b' are letters",
        "If you need help, call the police.",
        "The meeting starts at 10:30.",
        "He said: here is the key.",
        "It's fine.",
        "The answer is: 42.",
        "'s-Hertogenbosch is a city.",
        '"Yes," she said, "it is."',
    ],
)
def test_clean_translations_are_untouched(text):
    assert clean_translation(text) == (text, "")

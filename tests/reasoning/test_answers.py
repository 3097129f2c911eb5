"""Answer extraction on hand-written generations, tricky ones included."""

from __future__ import annotations

import pytest

from lira.reasoning.answers import extract_choice, extract_number, normalize_number, numbers_equal


@pytest.mark.parametrize(
    ("generation", "expected"),
    [
        ("The answer is 1,250.", 1250.0),
        ("She had 18 apples, gave 3 away, so 15 remain. The answer is 15", 15.0),
        ("Answer: 3.5 dollars", 3.5),
        ("It costs $1 250 in total.", 1250.0),
        ("The temperature drops to -4.", -4.0),
        ("12 + 30 = 42\nThe answer is 42 km.", 42.0),
        ("Result: 2,000,000", 2000000.0),
        ("The answer is 50%.", 50.0),
        ("no digits at all", None),
    ],
)
def test_last_number(generation, expected):
    assert extract_number(generation) == expected


@pytest.mark.parametrize(
    ("generation", "expected"),
    [
        ("Answer: (c)", "C"),
        ("The answer is B.", "B"),
        ("(A) because milk spoils", "A"),
        ("D", "D"),
        ("I think option e is right", "E"),
        ("Answer: it is (B)", "B"),
        ("Answer: a dog could do it, so (D)", "D"),
        ("answer: b) the river", "B"),
        ("The answer is (e).", "E"),
        ("Answer: F", None),
        ("I am not sure.", None),
    ],
)
def test_choice_letter(generation, expected):
    assert extract_choice(generation) == expected


def test_number_normalisation_and_comparison():
    assert normalize_number("1,250.") == 1250.0
    assert normalize_number("abc") is None
    assert numbers_equal(1000.0, 1000) and not numbers_equal(None, 3) and not numbers_equal(2.0, 3)

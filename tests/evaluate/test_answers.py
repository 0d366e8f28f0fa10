import pytest

from benchlab.evaluate.answers import (
    extract_choice,
    extract_code,
    extract_math_answer,
    extract_short_answer,
    last_boxed,
    normalize_math,
    normalize_text,
)
from benchlab.evaluate.instructions import check_all, validate_checks


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so \\boxed{3} then \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("nested \\boxed{\\sqrt{x^{2}}}.", "\\sqrt{x^{2}}"),
        ("cut off \\boxed{12", None),
        ("no box here", None),
    ],
)
def test_last_boxed_takes_the_last_balanced_box(text, expected):
    assert last_boxed(text) == expected


def test_math_answer_falls_back_to_the_answer_is():
    assert extract_math_answer("Adding up.\nThe answer is 42.") == "42"
    assert extract_math_answer("The answer is $x+1$") == "x+1"
    assert extract_math_answer("I give up") is None
    assert extract_math_answer("first The answer is 1. then \\boxed{2}") == "2"


def test_normalize_math_removes_cosmetic_differences():
    assert normalize_math(" 3.0 ") == normalize_math("3")
    assert normalize_math("\\dfrac{1}{2}") == normalize_math("\\frac{1}{2}")
    assert normalize_math("1,000") == "1000"
    assert normalize_math("\\left(1, 2\\right)") == "(1,2)"


def test_exact_answer_extraction_and_normalisation():
    assert (
        extract_short_answer("Thinking...\nThe answer is The Pacific Ocean.") == "The Pacific Ocean"
    )
    assert extract_short_answer("Answer: cold") == "cold"
    assert extract_short_answer("first\n\nlast line") == "last line"
    assert normalize_text("The  Pacific, Ocean!") == "pacific ocean"


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("Answer: C", "C"),
        ("the answer is (b)", "B"),
        ("\\boxed{D}", "D"),
        ("A)\n", "A"),
        ("no idea", None),
    ],
)
def test_choice_letter_extraction(text, letter):
    assert extract_choice(text) == letter


def test_code_extraction_prefers_the_last_fenced_block():
    text = "```python\ndef a(): pass\n```\nbetter:\n```python\ndef b(): pass\n```"
    assert extract_code(text) == "def b(): pass\n"
    assert extract_code("def f():\n    return 1") == "def f():\n    return 1"
    assert extract_code("just words") is None


def test_instruction_checks_report_what_failed():
    ok, failed = check_all(
        "hello, World",
        [{"type": "lowercase"}, {"type": "no_commas"}, {"type": "max_words", "value": 5}],
    )
    assert not ok and failed == ["lowercase", "no_commas"]
    assert check_all('```json\n{"a": 1}\n```', [{"type": "json"}]) == (True, [])
    assert check_all("- a\n- b\ntext", [{"type": "num_bullets", "value": 2}])[0]
    assert not check_all("one two three", [{"type": "min_words", "value": 4}])[0]


def test_instruction_check_validation_names_the_known_checks():
    assert validate_checks([{"type": "lowercase"}]) is None
    assert "known:" in validate_checks([{"type": "rhymes"}])
    assert "needs a 'value'" in validate_checks([{"type": "max_words"}])
    assert "takes no 'value'" in validate_checks([{"type": "json", "value": 1}])

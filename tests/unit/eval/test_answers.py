"""How replies are read: VLMEvalKit's matcher, the exported lmms-eval parser, and this
project's reader (letters, multi-select letters, option text)."""

import pytest

from medvqa_build.eval.answers import choice_letters, lmms_choice, vlmeval_choice

OPTIONS = ("polyp", "ulcer", "bleeding", "angiectasia")
NESTED = ("polyp", "polyp with bleeding", "ulcer", "normal")


@pytest.mark.parametrize(
    "reply,letters",
    [
        ("B", {"B"}),
        ("(C)", {"C"}),
        ("C.", {"C"}),
        ("Answer: D", {"D"}),
        ("The answer is B. ulcer", {"B"}),
        (r"\boxed{C}", {"C"}),
        ("ulcer", {"B"}),
        ("It shows an angiectasia.", {"D"}),
        ("A polyp is seen in this image", {"A"}),
        ("A or B", set()),  # two letters: a single-choice item cannot tell
        ("no idea", set()),
        ("", set()),
    ],
)
def test_single_choice_reader(reply, letters):
    assert choice_letters(reply, OPTIONS) == frozenset(letters)


@pytest.mark.parametrize(
    "reply,letters",
    [
        ("A,C", {"A", "C"}),
        ("A, C", {"A", "C"}),
        ("A and C", {"A", "C"}),
        ("(B) and (D)", {"B", "D"}),
        ("AC", {"A", "C"}),
        ("C", {"C"}),
        ("ulcer and angiectasia", {"B", "D"}),
        ("none of them", set()),
    ],
)
def test_multi_select_reader(reply, letters):
    assert choice_letters(reply, OPTIONS, multi=True) == frozenset(letters)


def test_contained_option_text_goes_to_the_longer_option():
    """VLMEvalKit finds two options inside 'polyp with bleeding' and gives up; this reader
    takes the longer option, and an exact option text wins outright."""
    assert vlmeval_choice("polyp with bleeding", NESTED) is None
    assert choice_letters("polyp with bleeding", NESTED) == {"B"}
    assert choice_letters("polyp", NESTED) == {"A"}
    assert choice_letters("I see a polyp with bleeding here", NESTED) == {"B"}


@pytest.mark.parametrize(
    "reply,expected",
    [
        ("B", "B"),
        ("The answer is (C).", "C"),
        ("A and C", None),  # two letters
        ("ulcer", "B"),
        ("Cannot determine the answer", "Z"),
        ("Z", "Z"),
        ("x" * 200, None),  # longer than twice the options: no text match
    ],
)
def test_vlmeval_matcher(reply, expected):
    assert vlmeval_choice(reply, OPTIONS) == expected


@pytest.mark.parametrize(
    "reply,expected",
    [("B", "B"), ("b", "B"), ("(C) ulcer", "C"), ("A and C", "A"), ("ulcer", None)],
)
def test_lmms_parser_is_the_exported_one(reply, expected):
    assert lmms_choice(reply, OPTIONS) == expected

"""The EndoBench generators: 5-8 templates each, and no template gives the answer away."""

import re

import pytest

from medvqa_build.tasks import TASKS
from medvqa_build.tasks.counting import PolypCounting
from medvqa_build.tasks.region_selection import COLOR_NAMES

from .conftest import surgical_samples

# the EndoBench suite (other benchmarks' generators have their own tests)
NAMES = [
    "image_classification",
    "attribute_classification",
    "region_recognition",
    "landmark_identification",
    "organ_identification",
    "lesion_identification",
    "severity_grading",
    "preoperative_assessment",
    "polyp_counting",
    "lesion_counting",
    "instrument_counting",
    "instrument_presence",
    "surgical_phase",
    "surgical_step",
    "surgical_action",
    "tool_tissue_interaction",
    "region_selection",
    "visual_grounding",
]


def _templates(cls):
    return [
        *cls.templates,
        *getattr(cls, "coord_templates", ()),
        *getattr(cls, "frame_templates", ()),
        *(t for level in cls.level_templates.values() for t in level),
    ]


def _vocabulary(cls, samples):
    gen = cls({"count_empty": True})
    words = set(gen.vocabulary(samples)) | {c.truth for c in gen.candidates(samples)}
    return words | set(getattr(cls, "fixed_options", ()))


@pytest.mark.parametrize("name", NAMES)
def test_five_to_eight_templates(name):
    cls = TASKS.get(name)
    assert 5 <= len(cls.templates) <= 8, name
    assert len(set(cls.templates)) == len(cls.templates)


@pytest.mark.parametrize("name", NAMES)
def test_no_template_contains_an_option(name, still_samples):
    cls = TASKS.get(name)
    vocab = _vocabulary(cls, [*still_samples, *surgical_samples(12)])
    assert vocab, f"{name}: no options to check against"
    for template in _templates(cls):
        for option in vocab:
            pattern = r"(?<![\w-])" + re.escape(option.casefold()) + r"(?![\w-])"
            assert not re.search(pattern, template.casefold()), (name, template, option)


def test_region_selection_templates_name_no_colour_even_inside_words():
    from medvqa_build.tasks.region_selection import RegionSelection

    for template in RegionSelection.templates:
        for colour in COLOR_NAMES:
            assert colour not in template.casefold(), (template, colour)


def test_counting_templates_hold_no_digit():
    for name in ("polyp_counting", "lesion_counting", "instrument_counting"):
        for template in TASKS.get(name).templates:
            assert not re.search(r"\d", template), template
    assert PolypCounting.fixed_options == ("0", "1", "2", "3", "4", "More than 4")


@pytest.mark.parametrize(
    "level, word",
    [
        ("box", "box"),
        ("multi", "box"),
        ("contour", "contour"),
        ("mask", "overlay"),
        ("point", "point"),
    ],
)
def test_region_questions_name_the_drawn_prompt(level, word, still_samples):
    """A contour, mask or point is never called a box: each level has its own wording."""
    gen = TASKS.get("region_recognition")()
    cand = next(iter(gen.candidates(still_samples)))
    texts = [gen.question(cand, k, "red", level)[0] for k in range(5)]
    assert word in texts[0]
    if level not in ("box", "multi"):
        assert not any(re.search(r"\b(box|rectangle)\b", t) for t in texts), texts
    assert len(set(texts)) == 5  # five distinct templates rotate
    assert gen.question(cand, 0, "red", level)[1] == (
        "region_recognition/0" if level in ("box", "multi") else f"region_recognition/{level}/0"
    )


def test_recipe_templates_replace_every_level(still_samples):
    gen = TASKS.get("region_recognition")({"templates": ["Name the {color} finding."]})
    cand = next(iter(gen.candidates(still_samples)))
    assert gen.question(cand, 3, "blue", "contour") == (
        "Name the blue finding.",
        "region_recognition/0",
    )

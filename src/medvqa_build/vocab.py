"""The project's shared vocabularies, each defined once: answer letters (and the chance of
guessing one), box coordinate formats, image reference schemes and the lumbar disc levels.
(The prompt levels are the renderers that register as one:
:func:`medvqa_build.render.prompt_levels`.)"""

from __future__ import annotations

import string
from collections.abc import Iterable

# option letters, in order: option k is LETTERS[k]
LETTERS = string.ascii_uppercase

# box coordinate formats of grounding answers and coordinate prompts (geometry.format_box)
COORD_FORMATS = ("abs", "norm1000", "norm1", "qwen")

# image references of items: a source's own file, a rendered file, a file a task synthesised
SOURCE_SCHEME, RENDER_SCHEME, GENERATED_SCHEME = "source://", "render://", "generated://"
IMAGE_SCHEMES = (SOURCE_SCHEME, RENDER_SCHEME, GENERATED_SCHEME)

# lumbar disc levels as SpineBench names them; the sources' spellings (RSNA ``l4_l5`` column
# suffixes, ``L4/L5`` coordinate rows, ``L4-L5``) normalise to these
LUMBAR_LEVELS = ("L1/L2", "L2/L3", "L3/L4", "L4/L5", "L5/S1")
# sample attribute holding the comma-joined disc levels of the sample's lesions
LEVELS_ATTRIBUTE = "lesion_levels"


def answer_letters(answer: str | None) -> list[str]:
    """``"A, C"`` -> ``["A", "C"]``: the letters of a single or multi-select answer."""
    return [a.strip() for a in (answer or "").split(",") if a.strip()]


def option_chance(n_options: int, multi_select: bool = False) -> float:
    """Expected accuracy of a uniform random guess: 1/n for an MCQ (SpineBench SDD: 5 options
    -> 20 %); for multi-select, 1 / (2**n - 1) non-empty subsets (SLL over 5 levels: 1/31)."""
    if n_options < 1:
        raise ValueError("n_options must be positive")
    return 1.0 / (2**n_options - 1) if multi_select else 1.0 / n_options


def normalise_level(raw: str) -> str | None:
    """``"l4_l5"``, ``"L4/L5"``, ``"L4-L5"`` -> ``"L4/L5"``; ``None`` when not a lumbar level."""
    text = raw.strip().upper().replace("_", "/").replace("-", "/").replace(" ", "")
    return text if text in LUMBAR_LEVELS else None


def join_levels(levels: Iterable[str]) -> str:
    """Levels in anatomical order, comma-joined (the attribute's canonical form)."""
    wanted = set(levels)
    return ",".join(lv for lv in LUMBAR_LEVELS if lv in wanted)


def texts_nest(a: str, b: str) -> bool:
    """One option text inside the other, lower-cased (``"cut"`` in ``"cutting between ..."``):
    VLMEvalKit matches a reply to an option by that containment, so such a pair is ambiguous."""
    a, b = a.strip().lower(), b.strip().lower()
    return a != b and bool(a) and bool(b) and (a in b or b in a)


def nested_options(options: Iterable[str]) -> list[tuple[str, str]]:
    """Every pair of options ``(inner, outer)`` where ``inner``'s text lies inside ``outer``'s."""
    opts = list(options)
    return [
        (a, b) if len(a.strip()) <= len(b.strip()) else (b, a)
        for i, a in enumerate(opts)
        for b in opts[i + 1 :]
        if texts_nest(a, b)
    ]


def unnested(fixed: Iterable[str], candidates: Iterable[str]) -> list[str]:
    """``candidates`` (order kept) whose text nests with none of ``fixed`` (e.g. the truth and
    the mandatory options)."""
    fixed = list(fixed)
    return [c for c in candidates if not any(texts_nest(c, f) for f in fixed)]


def first_apart(ordered: Iterable[str], need: int) -> list[str]:
    """The first ``need`` of ``ordered`` (or fewer, when it runs out) skipping any text that
    nests with one already taken: a list with no nested pair is returned unchanged."""
    out: list[str] = []
    for cand in ordered:
        if len(out) == need:
            break
        if not any(texts_nest(cand, o) for o in out):
            out.append(cand)
    return out

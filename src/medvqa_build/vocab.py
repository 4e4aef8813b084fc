"""The project's shared vocabularies, each defined once: answer letters, box
coordinate formats, image reference schemes and the lumbar disc levels. (The prompt levels
are the renderers that register as one: :func:`medvqa_build.render.prompt_levels`.)"""

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


def normalise_level(raw: str) -> str | None:
    """``"l4_l5"``, ``"L4/L5"``, ``"L4-L5"`` -> ``"L4/L5"``; ``None`` when not a lumbar level."""
    text = raw.strip().upper().replace("_", "/").replace("-", "/").replace(" ", "")
    return text if text in LUMBAR_LEVELS else None


def join_levels(levels: Iterable[str]) -> str:
    """Levels in anatomical order, comma-joined (the attribute's canonical form)."""
    wanted = set(levels)
    return ",".join(lv for lv in LUMBAR_LEVELS if lv in wanted)

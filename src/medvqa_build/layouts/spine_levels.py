"""Lumbar disc levels as SpineBench names them (``L1/L2`` .. ``L5/S1``) and the spellings the
sources use (RSNA ``l4_l5`` column suffixes, ``L4/L5`` coordinate rows)."""

from __future__ import annotations

LUMBAR_LEVELS = ("L1/L2", "L2/L3", "L3/L4", "L4/L5", "L5/S1")
# Sample attribute holding the comma-joined disc levels of the sample's lesions.
LEVELS_ATTRIBUTE = "lesion_levels"


def normalise_level(raw: str) -> str | None:
    """``"l4_l5"``, ``"L4/L5"``, ``"L4-L5"`` -> ``"L4/L5"``; ``None`` when not a lumbar level."""
    text = raw.strip().upper().replace("_", "/").replace("-", "/").replace(" ", "")
    return text if text in LUMBAR_LEVELS else None


def join_levels(levels) -> str:
    """Levels in anatomical order, comma-joined (the attribute's canonical form)."""
    wanted = set(levels)
    return ",".join(lv for lv in LUMBAR_LEVELS if lv in wanted)

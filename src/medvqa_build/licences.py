"""Licence ids the Hugging Face Hub knows, and what a mix of sources may be redistributed as.

Each source manifest names its licence as a Hub licence id (``other`` where the owners' terms
are no standard licence) and says whether its pixels may be redistributed. A build mixing
sources is bound by the strictest of them: CC BY + CC BY-NC is non-commercial, and one source
that forbids redistribution makes the whole build not redistributable.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Literal

Redistribution = Literal["allowed", "non-commercial", "not-allowed"]
# from least to most restrictive: the combined terms of a build are the last one any source has
REDISTRIBUTION_ORDER: tuple[str, ...] = ("allowed", "non-commercial", "not-allowed")

# The licence ids the Hub accepts in a card's ``license:`` (huggingface.co/docs/hub/
# repositories-licenses); ``other`` needs ``license_name`` and ``license_link`` beside it.
HUB_LICENCES: frozenset[str] = frozenset(
    [
        "apache-2.0",
        "mit",
        "openrail",
        "bigscience-openrail-m",
        "creativeml-openrail-m",
        "bigscience-bloom-rail-1.0",
        "bigcode-openrail-m",
        "afl-3.0",
        "artistic-2.0",
        "bsl-1.0",
        "bsd",
        "bsd-2-clause",
        "bsd-3-clause",
        "bsd-3-clause-clear",
        "c-uda",
        "cc",
        "cc0-1.0",
        "cc-by-2.0",
        "cc-by-2.5",
        "cc-by-3.0",
        "cc-by-4.0",
        "cc-by-sa-3.0",
        "cc-by-sa-4.0",
        "cc-by-nc-2.0",
        "cc-by-nc-3.0",
        "cc-by-nc-4.0",
        "cc-by-nd-4.0",
        "cc-by-nc-nd-3.0",
        "cc-by-nc-nd-4.0",
        "cc-by-nc-sa-2.0",
        "cc-by-nc-sa-3.0",
        "cc-by-nc-sa-4.0",
        "cdla-sharing-1.0",
        "cdla-permissive-1.0",
        "cdla-permissive-2.0",
        "wtfpl",
        "ecl-2.0",
        "epl-1.0",
        "epl-2.0",
        "etalab-2.0",
        "eupl-1.1",
        "eupl-1.2",
        "agpl-3.0",
        "gfdl",
        "gpl",
        "gpl-2.0",
        "gpl-3.0",
        "lgpl",
        "lgpl-2.1",
        "lgpl-3.0",
        "isc",
        "h-research",
        "intel-research",
        "lppl-1.3c",
        "ms-pl",
        "apple-ascl",
        "apple-amlr",
        "mpl-2.0",
        "odc-by",
        "odbl",
        "openmdw-1.0",
        "openrail++",
        "osl-3.0",
        "postgresql",
        "ofl-1.1",
        "ncsa",
        "unlicense",
        "zlib",
        "pddl",
        "lgpl-lr",
        "deepfloyd-if-license",
        "fair-noncommercial-research-license",
        "llama2",
        "llama3",
        "llama3.1",
        "llama3.2",
        "llama3.3",
        "llama4",
        "gemma",
        "unknown",
        "other",
    ]
)

# The Hub's ``size_categories`` buckets, by item count (upper bound, exclusive).
SIZE_CATEGORIES: tuple[tuple[float, str], ...] = (
    (1e3, "n<1K"),
    (1e4, "1K<n<10K"),
    (1e5, "10K<n<100K"),
    (1e6, "100K<n<1M"),
    (1e7, "1M<n<10M"),
    (1e8, "10M<n<100M"),
    (1e9, "100M<n<1B"),
    (1e10, "1B<n<10B"),
    (1e11, "10B<n<100B"),
    (1e12, "100B<n<1T"),
    (float("inf"), "n>1T"),
)


def combined_redistribution(flags: list[str] | set[str]) -> str:
    """The terms a build of sources with these flags is under: the most restrictive."""
    if not flags:
        return "allowed"
    return max(flags, key=REDISTRIBUTION_ORDER.index)


def size_category(n: int) -> str:
    return next(name for bound, name in SIZE_CATEGORIES if n < bound)


@dataclass(frozen=True)
class SourceTerms:
    """A source's terms as a build recorded them (``build.json``'s ``sources``, written from
    its manifest when the build ran): what push's licence gate judges an export by, so a
    manifest edited or removed since cannot change the verdict on what was built."""

    title: str
    homepage: str
    licence: str
    licence_id: str
    redistribution: Redistribution
    access: str
    access_terms: str
    citation: str

    def to_row(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: dict) -> SourceTerms:
        """The terms a record holds; ValueError naming what is missing or not text."""
        if not isinstance(row, dict):
            raise ValueError("not a JSON object")
        bad = [f.name for f in fields(cls) if not isinstance(row.get(f.name), str)]
        if bad:
            raise ValueError(f"{', '.join(bad)} missing or not text")
        if row["redistribution"] not in REDISTRIBUTION_ORDER:
            raise ValueError(
                f"redistribution {row['redistribution']!r} is not one of "
                f"{', '.join(REDISTRIBUTION_ORDER)}"
            )
        return cls(**{f.name: row[f.name] for f in fields(cls)})

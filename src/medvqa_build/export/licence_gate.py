"""Which sources of an HF export may have their pixels published (``push``'s licence gate).

The sources are read from the export's own Parquet shards (their ``source`` column), so the
gate judges what would be uploaded, not what a recipe asked for; their terms are those the
build recorded when it ran (``build.json``'s ``sources``, :class:`~medvqa_build.licences.
SourceTerms`), handed in by the caller: this module reads no source registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from ..errors import MedvqaError, UsageError
from ..licences import SourceTerms, combined_redistribution


@dataclass
class Gate:
    sources: list[str]  # every source of the export, sorted
    terms_of: dict[str, SourceTerms]  # each source's terms, as the build recorded them
    blocked: list[str] = field(default_factory=list)  # not-allowed, no permission: no pixels
    permitted: list[str] = field(default_factory=list)  # not-allowed, --i-have-permission

    @property
    def terms(self) -> str:
        """The combined terms of the export's sources (``licences.combined_redistribution``)."""
        return combined_redistribution({t.redistribution for t in self.terms_of.values()})


def export_sources(folder: Path) -> list[str]:
    """The source ids of every item of an HF export folder."""
    found: set[str] = set()
    for shard in sorted((folder / "data").rglob("*.parquet")):
        column = pq.read_table(shard, columns=["source"]).column("source")
        found.update(s for s in column.unique().to_pylist() if s)
    return sorted(found)


def check_licences(
    folder: Path,
    known: Mapping[str, SourceTerms],
    permitted=(),
    annotations_only: bool = False,
) -> Gate:
    """The gate of ``push``: a source whose owners do not allow redistribution stops it (one
    line naming the sources and the two ways out) unless the user has their permission or
    publishes annotations only. ``known``: the terms of the build's sources, as recorded."""
    sources = export_sources(folder)
    unknown = [s for s in sources if s not in known]
    if unknown:
        raise MedvqaError(
            f"no manifest for source(s) {', '.join(unknown)}: their terms are unknown; not pushed",
            where=str(folder),
            fix="add their manifests (MEDVQA_MANIFESTS) to check their licences",
        )
    stray = sorted(set(permitted) - set(sources))
    if stray:
        raise UsageError(
            f"--i-have-permission names source(s) not in this build: {', '.join(stray)}",
            fix="sources in this build: " + ", ".join(sources),
        )
    terms_of = {s: known[s] for s in sources}
    closed = [s for s in sources if terms_of[s].redistribution == "not-allowed"]
    gate = Gate(sources, terms_of)
    gate.permitted = [s for s in closed if s in permitted]
    gate.blocked = [s for s in closed if s not in permitted]
    if gate.blocked and not annotations_only:
        raise MedvqaError(
            f"the owners of {', '.join(gate.blocked)} do not allow redistributing their images; "
            "not pushed",
            where=str(folder),
            fix="publish without their pixels (--annotations-only) or, if the owners gave you "
            "permission, --i-have-permission " + " --i-have-permission ".join(gate.blocked),
        )
    return gate

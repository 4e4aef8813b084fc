"""The Stage interface and the context the stages of one build share.

A stage declares its name and version, the keys it runs for (one folder per key: ``items``,
or one per source or export format), the inputs that address each key's output, and how to
build one; :func:`medvqa_build.pipeline.runner.run_stage` reuses a finished output or builds it
atomically. ``finish`` hands what the stage made to the stages after it through the context.
The build is then a loop over the stages (:func:`medvqa_build.pipeline.build`), as datatrove's
executor drains its pipeline steps.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..manifest import SourceManifest
from ..recipe import Recipe
from ..records import QuarantineEntry
from ..store.tables import ItemTable, SampleTable


@dataclass(frozen=True)
class StageResult:
    """One finished stage output: its folder, content fingerprint and stats."""

    name: str
    path: Path
    fingerprint: str
    stats: dict[str, Any]
    reused: bool
    # wall seconds the output took to build, recorded in its marker when it was built (so a
    # rerun that reuses it reports the same time; None for a marker from before timings)
    seconds: float | None = None
    # taken from the shared stage cache (pipeline/shared.py): another build folder built it
    cached: bool = False


@dataclass
class BuildContext:
    """Settings of one build, and what its stages produced so far (filled in stage order)."""

    recipe: Recipe
    recipe_yaml: str  # the recipe as given (before sources missing are left out): the cards'
    out: Path
    executor: Any
    progress: bool = True
    force_export: bool = False
    allow_missing: bool = False
    # the local executor with no worker count given: convert picks its own (every core for a
    # large source, stages/convert.py default_workers)
    default_workers: bool = False
    # sources: materialize
    roots: dict[str, Path] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # one line per missing source
    skipped: dict[str, int] = field(default_factory=dict)  # quota of tasks left without source
    manifests: dict[str, SourceManifest] = field(default_factory=dict)
    # convert
    samples: SampleTable | None = None
    quarantine: list[QuarantineEntry] = field(default_factory=list)
    source_counts: dict[str, dict] = field(default_factory=dict)
    # embed, curate
    embeddings: Mapping[str, np.ndarray] | None = None
    curate_spec: Any = None
    curate_report: dict = field(default_factory=dict)
    # render
    items: ItemTable | None = None
    resolve: Callable[[str], Path] | None = None
    # export
    checksums: dict[str, str] = field(default_factory=dict)
    results: list[StageResult] = field(default_factory=list)

    def last(self, name: str) -> StageResult | None:
        """The latest output of stage ``name`` in this build, if it ran."""
        return next((r for r in reversed(self.results) if r.name == name), None)

    def fingerprints(self, *names: str) -> list[str]:
        return [r.fingerprint for r in self.results if r.name in names]


class Stage(ABC):
    """One stage of a build (see the module docstring)."""

    name: ClassVar[str]
    # bump when the stage's output format changes; its code is in the fingerprint already
    version: ClassVar[int] = 1
    # outputs kept in the shared stage cache too (pipeline/shared.py), reused by any build
    # folder: only for a stage whose fingerprint covers everything its output depends on
    shared_cache: ClassVar[bool] = False

    def prepare(self, ctx: BuildContext) -> None:
        """Work before the stage's keys are known (resolving the sources' roots)."""
        return None

    def enabled(self, ctx: BuildContext) -> bool:
        return True

    def keys(self, ctx: BuildContext) -> list[str]:
        """One output folder per key."""
        return ["items"]

    @abstractmethod
    def inputs(self, ctx: BuildContext, key: str) -> Any:
        """What addresses the key's output (JSON-able): equal inputs, equal output."""

    def plugins(self, ctx: BuildContext, key: str) -> list[str]:
        """The modules of the plug-ins the key runs (its exporter, generators, layouts,
        renderers, embedder; ``Registry.module``): their code, and what it imports, addresses
        the key's output as the stage's own code does. A registry's other plug-ins are not
        part of it, so adding or editing an unused one rebuilds nothing."""
        return []

    @abstractmethod
    def run(self, ctx: BuildContext, key: str, out: Path) -> dict[str, Any]:
        """Write the key's output into ``out``; return its stats."""

    def finish(self, ctx: BuildContext, results: list[StageResult]) -> None:
        """Hand the outputs to later stages through ``ctx``."""
        return None

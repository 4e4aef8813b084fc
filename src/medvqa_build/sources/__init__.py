"""Sources: a manifest plus its configured layout parts, found by id.

Manifests are read from the packaged ``manifests/`` folder and from any folders listed in
``MEDVQA_MANIFESTS`` (``os.pathsep``-separated), so users can add a dataset without code.
Generated sources (``access: generated``) also register a writer here.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from ..errors import RecipeError, SourceError, UsageError
from ..layouts import ScanContext
from ..layouts.base import Layout, make_layout
from ..layouts.discovery import PartSpec, RootResolution, resolve_root
from ..manifest import LayoutPart, SourceManifest
from ..media.image import DEFAULT_MAX_PIXELS
from ..records import QuarantineEntry, Sample
from ..store.paths import (
    LINKED_FOLDER_REASON,
    escaped_name,
    linked_folders_outside,
    undecodable_name,
)
from .synthetic_endo import write_synthetic_endo

log = logging.getLogger(__name__)

# Writers of generated sources: id -> function(root, **options) -> root.
GENERATORS: dict[str, Callable[..., Path]] = {"synthetic-endo": write_synthetic_endo}


def manifest_dirs() -> list[Path]:
    """Packaged manifests (wheel) or the repository's ``manifests/`` (editable), then user dirs."""
    here = Path(__file__).resolve().parent.parent
    dirs = [d for d in (here / "_manifests", here.parents[1] / "manifests") if d.is_dir()][:1]
    extra = os.environ.get("MEDVQA_MANIFESTS", "")
    dirs += [Path(p) for p in extra.split(os.pathsep) if p]
    return dirs


def manifest_capabilities(
    manifest: SourceManifest,
    parts: list[str] | None = None,
    layouts: dict[str, Layout] | None = None,
) -> set[str]:
    """What a source's samples carry (see :mod:`medvqa_build.tasks.requirements`): the
    manifest's ``provides:`` when it has one, else what its layout parts (or only ``parts``)
    provide (:meth:`~medvqa_build.layouts.base.Layout.provides`)."""
    if manifest.provides:
        return set(manifest.provides)
    out: set[str] = set()
    for part in manifest.parts:
        if parts is None or part.name in parts:
            layout = (layouts or {}).get(part.name) or make_layout(
                part.layout, part.options, where=f"{manifest.id}: parts.{part.name}"
            )
            out |= layout.provides()
    return out


@dataclass
class ScanStats:
    """What a scan counts besides its entries: labels a table left empty ("not graded"),
    which drop that label only and keep the sample."""

    labels_missing: Counter = field(default_factory=Counter)  # field -> labels left out
    samples_missing_labels: int = 0  # samples kept with at least one label left out
    notes: Counter = field(default_factory=Counter)  # choices made for the data -> count

    def add(self, other: dict) -> None:
        self.labels_missing.update(other.get("labels_missing", {}))
        self.samples_missing_labels += other.get("samples_missing_labels", 0)
        self.notes.update(other.get("notes", {}))

    def to_dict(self) -> dict:
        out = {
            "labels_missing": dict(sorted(self.labels_missing.items())),
            "samples_missing_labels": self.samples_missing_labels,
        }
        if self.notes:
            out["notes"] = dict(sorted(self.notes.items()))
        return out


@dataclass(frozen=True)
class Source:
    """A dataset as its owners distribute it: manifest + layout parts (+ a writer if generated)."""

    manifest: SourceManifest
    path: Path

    @property
    def id(self) -> str:
        return self.manifest.id

    @property
    def generator(self) -> Callable[..., Path] | None:
        return GENERATORS.get(self.id)

    @cached_property
    def layouts(self) -> list[tuple[LayoutPart, Layout]]:
        """Each manifest part with its configured layout (options validated once)."""
        return [
            (part, make_layout(part.layout, part.options, where=f"{self.path}: parts.{part.name}"))
            for part in self.manifest.parts
        ]

    def capabilities(self, parts: list[str] | None = None) -> set[str]:
        """What the samples of ``parts`` (default: every part) carry."""
        return manifest_capabilities(
            self.manifest, parts, {part.name: layout for part, layout in self.layouts}
        )

    def _fix(self, root: Path) -> str:
        if self.generator is not None:
            return f"write it first with `medvqa-build make-synthetic {root} --source {self.id}`"
        hint = self.manifest.download or self.manifest.homepage
        return (
            f"download and unpack {self.manifest.title} ({hint}) and pass its folder "
            f"(docs/sources/{self.id}.md)"
        )

    def resolve(self, root: str | os.PathLike) -> RootResolution:
        """The source's root for the folder a user passed, and which parts are there (see
        :mod:`medvqa_build.layouts.discovery`); one-line :class:`SourceError` when none is."""
        given = Path(root).expanduser()
        if not given.is_dir():
            raise SourceError(
                f"source root for {self.id!r} does not exist or is not a folder",
                where=str(given),
                fix=self._fix(given),
            )
        specs = [
            PartSpec(part.name, layout.expects(), part.required) for part, layout in self.layouts
        ]
        archives = [a.unpacks_to for a in self.manifest.archives if a.unpacks_to != "."]
        return resolve_root(self.id, given, specs, self._fix(given), archives)

    def check_root(self, root: str | os.PathLike) -> Path:
        return self.resolve(root).root

    def lost_capabilities(self, missing: list[str]) -> set[str]:
        """What the source's samples lack because the ``missing`` parts are absent."""
        found = [p.name for p in self.manifest.parts if p.name not in missing]
        return self.capabilities() - self.capabilities(found) if missing else set()

    def scan(
        self, root: str | os.PathLike, verify: str = "header"
    ) -> Iterator[Sample | QuarantineEntry]:
        """Stream samples and quarantine entries of every layout part, in a stable order."""
        for _, _, entry in self.scan_indexed(root, verify):
            yield entry

    def scan_indexed(
        self,
        root: str | os.PathLike,
        verify: str = "header",
        shard: tuple[int, int] = (0, 1),
        stats: ScanStats | None = None,
        max_pixels: int | None = DEFAULT_MAX_PIXELS,
    ) -> Iterator[tuple[int, int, Sample | QuarantineEntry]]:
        """``(part number, candidate index, entry)`` for the candidates shard ``(k, n)`` owns,
        of the parts found under the root (see :meth:`resolve`).

        Shards together yield exactly what one unsharded scan yields; a layout that is not
        shardable is scanned whole by shard 0. ``stats`` collects the labels left out.
        """
        k, n = shard
        resolution = self.resolve(root)
        for part_no, (part, layout) in enumerate(self.layouts):
            if part.name not in resolution.found:
                continue
            if n > 1 and not getattr(layout, "shardable", False) and k != 0:
                continue
            ctx = self.context(part, layout, resolution.root, verify, shard)
            ctx.max_pixels = max_pixels
            for index, entry in self.scan_part(layout, ctx, stats):
                yield part_no, index, entry
        if k == 0 and resolution.found:  # after every candidate, in the first part found
            first = next(i for i, (p, _) in enumerate(self.layouts) if p.name in resolution.found)
            for i, rel in enumerate(linked_folders_outside(resolution.root)):
                entry = QuarantineEntry(rel, LINKED_FOLDER_REASON, self.id)
                yield first, _AFTER_CANDIDATES + i, entry

    def context(
        self,
        part: LayoutPart,
        layout: Layout,
        root: Path,
        verify: str = "header",
        shard: tuple[int, int] = (0, 1),
        cls: type[ScanContext] = ScanContext,
    ) -> ScanContext:
        """The scan context of one part under an already resolved ``root``."""
        shardable = getattr(layout, "shardable", False)
        return cls(
            source=self.id,
            root=root,
            part=part.name,
            modality=part.modality or self.manifest.modality,
            scene=part.scene if part.scene is not None else self.manifest.scene,
            label_map=self.manifest.label_map,
            verify=verify,
            shard_index=shard[0] if shardable else 0,
            shard_count=shard[1] if shardable else 1,
        )

    def scan_part(
        self, layout: Layout, ctx: ScanContext, stats: ScanStats | None = None
    ) -> Iterator[tuple[int, Sample | QuarantineEntry]]:
        """``(candidate index, entry)`` of one part's scan, scenes filled from the manifest's
        ``scene_map`` and labels left out counted into ``stats``."""
        shardable = getattr(layout, "shardable", False)
        count = 0
        for entry in layout.scan(ctx):
            if entry is None:  # owned by another shard
                continue
            index = ctx.candidates_seen - 1 if shardable else count
            count += 1
            missing = ctx.take_missing_labels()
            entry = printable(entry, self.id)
            if missing and isinstance(entry, Sample) and stats is not None:
                stats.samples_missing_labels += 1
            if isinstance(entry, Sample) and entry.scene is None and entry.labels:
                # the first label the manifest maps to a scene decides it
                scenes = self.manifest.scene_map
                scene = next((scenes[lab] for lab in entry.labels if lab in scenes), None)
                if scene is not None:  # the entry was just built: set, not copy
                    object.__setattr__(entry, "scene", scene)
            yield index, entry
        if stats is not None:
            stats.labels_missing.update(ctx.labels_missing)
            stats.notes.update(ctx.notes)


UNDECODABLE_NAME = (
    "file name is not valid UTF-8 (its bytes are shown escaped); rename the file to UTF-8, "
    "e.g. with convmv"
)


def printable(entry: Sample | QuarantineEntry, source: str) -> Sample | QuarantineEntry:
    """A file name is bytes: a sample whose file name is not UTF-8 (``os.walk`` gives it
    with surrogates, which no Parquet or UTF-8 file holds) becomes a quarantine entry naming
    it with its bytes escaped; a quarantine entry gets the same escaping."""
    if isinstance(entry, Sample):
        shown = undecodable_name(entry.image)
        return entry if shown is None else QuarantineEntry(shown, UNDECODABLE_NAME, source)
    if undecodable_name(entry.file) is None and undecodable_name(entry.reason) is None:
        return entry
    return QuarantineEntry(escaped_name(entry.file), escaped_name(entry.reason), entry.source)


_AFTER_CANDIDATES = 1 << 40  # scan index of the entries that follow a part's candidates


@lru_cache(maxsize=1)
def _load_all(dirs: tuple[Path, ...]) -> dict[str, Source]:
    sources: dict[str, Source] = {}
    for folder in dirs:
        for path in sorted(folder.glob("*.yaml")):
            if not path.is_file():  # a folder or a socket named *.yaml is no manifest
                log.warning("skipping %s: not a regular file", path)
                continue
            manifest = SourceManifest.from_yaml(path)
            if manifest.id in sources:
                raise SourceError(
                    f"source id {manifest.id!r} is defined twice",
                    where=f"{sources[manifest.id].path} and {path}",
                    fix="remove or rename one of the manifests",
                )
            sources[manifest.id] = Source(manifest, path)
    return sources


def all_sources() -> dict[str, Source]:
    return _load_all(tuple(manifest_dirs()))


def check_source_ids(recipe, where: str) -> None:
    """The recipe's ``sources[].id`` are registered sources."""
    known = all_sources()
    for i, s in enumerate(recipe.sources):
        if s.id not in known:
            raise RecipeError(
                f"sources.{i}.id={s.id!r}: unknown source",
                where=where,
                fix="use one of: " + ", ".join(sorted(known)),
            )


def get_source(source_id: str) -> Source:
    sources = all_sources()
    if source_id not in sources:
        raise UsageError(
            f"unknown source {source_id!r}",
            fix="run `medvqa-build sources` to list them; known: " + ", ".join(sorted(sources)),
        )
    return sources[source_id]

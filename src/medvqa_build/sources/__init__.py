"""Sources: a manifest plus its configured layout parts, found by id.

Manifests are read from the packaged ``manifests/`` folder and from any folders listed in
``MEDVQA_MANIFESTS`` (``os.pathsep``-separated), so users can add a dataset without code.
Generated sources (``access: generated``) also register a writer here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import SourceError, UsageError
from ..layouts import ScanContext
from ..layouts.base import make_layout
from ..manifest import SourceManifest
from ..quarantine import QuarantineEntry
from ..records import Sample
from .synthetic_endo import write_synthetic_endo

# Writers of generated sources: id -> function(root, **options) -> root.
GENERATORS: dict[str, Callable[..., Path]] = {"synthetic-endo": write_synthetic_endo}


def manifest_dirs() -> list[Path]:
    """Packaged manifests (wheel) or the repository's ``manifests/`` (editable), then user dirs."""
    here = Path(__file__).resolve().parent.parent
    dirs = [d for d in (here / "_manifests", here.parents[1] / "manifests") if d.is_dir()][:1]
    extra = os.environ.get("MEDVQA_MANIFESTS", "")
    dirs += [Path(p) for p in extra.split(os.pathsep) if p]
    return dirs


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

    def check_root(self, root: str | os.PathLike) -> Path:
        root = Path(root).expanduser()
        if not root.is_dir():
            hint = self.manifest.download or self.manifest.homepage
            fix = f"download and unpack {self.manifest.title} ({hint}) and pass its folder"
            if self.generator is not None:
                fix = f"write it first with `medvqa-build make-synthetic {root} --source {self.id}`"
            raise SourceError(
                f"source root for {self.id!r} does not exist or is not a folder",
                where=str(root),
                fix=fix,
            )
        return root.resolve()

    def scan(
        self, root: str | os.PathLike, verify: str = "header"
    ) -> Iterator[Sample | QuarantineEntry]:
        """Stream samples and quarantine entries of every layout part, in a stable order."""
        for _, _, entry in self.scan_indexed(root, verify):
            yield entry

    def scan_indexed(
        self, root: str | os.PathLike, verify: str = "header", shard: tuple[int, int] = (0, 1)
    ) -> Iterator[tuple[int, int, Sample | QuarantineEntry]]:
        """``(part number, candidate index, entry)`` for the candidates shard ``(k, n)`` owns.

        Shards together yield exactly what one unsharded scan yields; a layout that is not
        shardable is scanned whole by shard 0.
        """
        k, n = shard
        root = self.check_root(root)
        for part_no, part in enumerate(self.manifest.parts):
            layout = make_layout(part.layout, part.options, where=f"{self.path}: parts.{part.name}")
            shardable = getattr(layout, "shardable", False)
            if n > 1 and not shardable and k != 0:
                continue
            ctx = ScanContext(
                source=self.id,
                root=root,
                part=part.name,
                modality=part.modality or self.manifest.modality,
                scene=part.scene if part.scene is not None else self.manifest.scene,
                label_map=self.manifest.label_map,
                verify=verify,
                shard_index=k if shardable else 0,
                shard_count=n if shardable else 1,
            )
            count = 0
            for entry in layout.scan(ctx):
                if entry is None:  # owned by another shard
                    continue
                index = ctx.candidates_seen - 1 if shardable else count
                count += 1
                if isinstance(entry, Sample) and entry.scene is None and entry.labels:
                    # the first label the manifest maps to a scene decides it
                    scenes = self.manifest.scene_map
                    scene = next((scenes[lab] for lab in entry.labels if lab in scenes), None)
                    if scene is not None:  # the entry was just built: set, not copy
                        object.__setattr__(entry, "scene", scene)
                yield part_no, index, entry


@lru_cache(maxsize=1)
def _load_all(dirs: tuple[Path, ...]) -> dict[str, Source]:
    sources: dict[str, Source] = {}
    for folder in dirs:
        for path in sorted(folder.glob("*.yaml")):
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


def get_source(source_id: str) -> Source:
    sources = all_sources()
    if source_id not in sources:
        raise UsageError(
            f"unknown source {source_id!r}",
            fix="run `medvqa-build sources` to list them; known: " + ", ".join(sorted(sources)),
        )
    return sources[source_id]

"""The build folder: the one reader and writer of ``build.json``, the recipe copy, the report
and the stage folders a finished run used.

::

    DIR/build.json        roots, the item table, the stage folders of the last run, the
                          terms of its sources (what push's licence gate reads)
    DIR/recipe.yaml       the recipe as resolved
    DIR/report.json|.md   the last finished run's report
    DIR/stages/<stage>/<key>-<fingerprint>/   content-addressed stage outputs
    DIR/.noop.json        what the CLI's no-op rerun checks and replays (cli/noop.py)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import DamagedFile, ImageProblem, MedvqaError, SourceError, UsageError
from ..licences import SourceTerms
from ..manifest import SourceManifest
from ..media.refs import resolve_image, split_fragment
from ..media.thumbnail import thumbnail_src
from ..recipe import Recipe
from ..schema import ITEM_SCHEMA
from ..sources import get_source
from ..stages.base import BuildContext
from ..store.atomic import write_atomic
from ..store.memory import limit_arenas, use_returning_memory_pool
from ..store.parquet import open_parquet
from ..store.tables import ItemTable, SampleTable
from ..view import register_thumbnailer

META = "build.json"
RECIPE = "recipe.yaml"
REPORT = "report.json"
THUMB_CACHE = 512  # thumbnails a build keeps for a notebook that shows items again


def report_text(report: dict) -> str:
    """``report.json``'s text: the one writer, so a replayed rerun writes what a real one does."""
    return json.dumps(report, indent=2, sort_keys=False) + "\n"


class BuildDir:
    """One build folder. :meth:`open` checks it is a finished build; the constructor alone
    does not (a build being written)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path).resolve()

    @classmethod
    def open(cls, path: str | os.PathLike) -> BuildDir:
        """A finished build (it has ``build.json``), for validate, export, review and clean.

        Like a build, it lets Arrow return freed memory and caps glibc's arenas first: what
        opens a build streams its whole item table."""
        use_returning_memory_pool()
        limit_arenas()
        build = cls(path)
        if not (build.path / META).is_file():
            raise SourceError(
                "not a build directory (no build.json)",
                where=str(build.path),
                fix="pass the -o folder of a `medvqa-build run`",
            )
        build.show_images()
        return build

    def show_images(self) -> None:
        """Let this build's items show their images in a notebook (:mod:`medvqa_build.view`)."""
        register_thumbnailer(str(self.path), self.thumbnailer())

    def thumbnailer(self):
        """``ref -> data URI`` of a small thumbnail, or None for a reference this build cannot
        resolve or decode (a display without that image, not an error)."""
        resolve = None
        cache: dict[str, str | None] = {}

        def thumb(ref: str) -> str | None:
            nonlocal resolve
            if ref in cache:
                return cache[ref]
            if resolve is None:
                resolve = self.resolver()
            try:
                path = resolve(ref)
                src = thumbnail_src(path, split_fragment(ref)[1]) if path.is_file() else None
            except (KeyError, OSError, ValueError, ImageProblem, MedvqaError):
                src = None
            if len(cache) >= THUMB_CACHE:
                cache.pop(next(iter(cache)))
            cache[ref] = src
            return src

        return thumb

    # -- build.json ----------------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        """``build.json``, or a :class:`DamagedFile` error when it is not the JSON object a
        run writes."""
        path = self.path / META
        try:
            meta = json.loads(path.read_bytes())
        except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested without end
            raise self._damaged(f"build.json is not JSON ({type(exc).__name__})") from None
        if not isinstance(meta, dict):
            raise self._damaged("build.json is not a JSON object")
        return meta

    def _damaged(self, what: str) -> DamagedFile:
        return DamagedFile(
            what,
            where=str(self.path / META),
            fix="rerun `medvqa-build run` with the recipe into this folder: it rewrites build.json",
        )

    def inside(self, key: str, value: Any) -> Path:
        """The path ``build.json`` gives under ``key``, refused unless it is a relative path
        that stays in the build folder (links resolved): a build never reads elsewhere."""
        if not isinstance(value, str) or not value:
            raise self._damaged(f"build.json's {key!r} is not a path")
        path = (self.path / value).resolve()
        if os.path.isabs(value) or not path.is_relative_to(self.path):
            raise self._damaged(f"build.json's {key!r} points outside the build folder ({value!r})")
        return path

    def write_meta(self, meta: dict[str, Any]) -> None:
        write_atomic(self.path / META, json.dumps(meta, indent=2) + "\n")

    def rel(self, path: Path) -> str:
        return path.relative_to(self.path).as_posix()

    def record(self, ctx: BuildContext) -> None:
        """``build.json`` of a run that has rendered its items: the roots, the item table, the
        rendered and generated images, and every stage folder it used so far."""
        stages: dict[str, list[str]] = {}
        for result in ctx.results:
            stages.setdefault(result.name, []).append(self.rel(result.path))
        self.write_meta(
            {
                "roots": {k: str(v) for k, v in sorted(ctx.roots.items())},
                "items": self.rel(ctx.last("render").path / "items.parquet"),
                "render_dir": self.rel(ctx.last("render").path),
                "generated_dir": self.rel(ctx.last("generate").path),
                "stages": stages,
                # each source's terms as its manifest gave them when this build ran: push's
                # licence gate judges the export by this record (source_terms)
                "sources": {k: ctx.manifests[k].terms().to_row() for k in sorted(ctx.manifests)},
            }
        )

    def source_terms(self) -> dict[str, SourceTerms]:
        """The terms of the build's sources as the build recorded them. A build made before
        they were recorded is one line telling to rerun (which reuses every finished stage
        and records them); a record that is not the terms a run writes is a damaged file."""
        record = self.meta().get("sources")
        if record is None:
            raise UsageError(
                "this build has no record of its sources' terms (it was built by an older "
                "medvqa-build)",
                where=str(self.path / META),
                fix="rerun `medvqa-build run` with its recipe into this folder: finished "
                "stages are reused and build.json then records the terms",
            )
        if not isinstance(record, dict):
            raise self._damaged("build.json's 'sources' is not a JSON object")
        terms = {}
        for source_id, row in record.items():
            try:
                terms[source_id] = SourceTerms.from_row(row)
            except ValueError as exc:
                raise self._damaged(f"build.json's sources.{source_id}: {exc}") from None
        return terms

    @property
    def roots(self) -> dict[str, Path]:
        return {k: Path(v) for k, v in self.meta()["roots"].items()}

    def resolver(self):
        """``ref -> Path`` for the items' image references (see :func:`resolve_image`)."""
        meta = self.meta()
        roots = {k: Path(v) for k, v in meta["roots"].items()}
        render_dir = self.inside("render_dir", meta.get("render_dir"))
        generated_dir = self.inside("generated_dir", meta.get("generated_dir"))
        return lambda ref: resolve_image(ref, roots, render_dir, generated_dir)

    def items(self) -> ItemTable:
        """The build's items; a :class:`DamagedFile` error when ``build.json`` points out of
        the folder or at a file that is not the item table."""
        path = self.inside("items", self.meta().get("items"))
        if not path.is_file():
            raise self._damaged(f"the item table build.json names is missing ({self.rel(path)})")
        open_parquet(path, ITEM_SCHEMA)
        return ItemTable(path)

    def stage_dirs(self, stage: str) -> list[Path]:
        """The folders of ``stage`` the last run used: those ``build.json`` names, else those
        the report names, else every one on disk (a build from before either recorded them)."""
        meta = self.meta() if (self.path / META).is_file() else {}
        listed = (meta.get("stages") or {}).get(stage, [])
        named = [self.inside(f"stages.{stage}", p) for p in listed]
        if not named:
            named = [self.path / s["path"] for s in self._report_stages() if s["stage"] == stage]
        if named and all(p.is_dir() for p in named):
            return named
        return sorted(p for p in (self.path / "stages" / stage).glob("*") if p.is_dir())

    def sample_paths(self) -> list[Path]:
        """The convert stage's sample files, in stage order."""
        return [
            d / "samples.parquet"
            for d in self.stage_dirs("convert")
            if (d / "samples.parquet").is_file()
        ]

    def samples(self) -> SampleTable:
        """Every converted sample; where two stage folders hold one id, the later wins."""
        return SampleTable(list(reversed(self.sample_paths())))

    def duplicate_groups(self) -> list[list[str]]:
        groups: list[list[str]] = []
        for d in self.stage_dirs("curate"):
            if (d / "curate.json").is_file():
                data = json.loads((d / "curate.json").read_text())
                groups += [
                    g["members"] for g in (data.get("dedup") or {}).get("duplicate_groups", [])
                ]
        return groups

    # -- the recipe and the manifests ----------------------------------------------------

    def recipe(self) -> Recipe:
        return Recipe.from_yaml(self.path / RECIPE)

    def write_recipe(self, text: str) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path / RECIPE, text)

    def manifests(self, recipe: Recipe | None = None) -> dict[str, SourceManifest]:
        """The manifests of the recipe's sources (one removed since the build is left out)."""
        manifests = {}
        for spec in (recipe or self.recipe()).sources:
            try:
                manifests[spec.id] = get_source(spec.id).manifest
            except MedvqaError:
                continue
        return manifests

    # -- the report ----------------------------------------------------------------------

    def report(self) -> dict | None:
        path = self.path / REPORT
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    def write_report(self, report: dict, markdown: str) -> None:
        write_atomic(self.path / REPORT, report_text(report))
        write_atomic(self.path / "report.md", markdown)

    def _report_stages(self) -> list[dict]:
        try:
            return list((self.report() or {}).get("stages", []))
        except (ValueError, TypeError):
            return []

    def kept_stages(self) -> set[Path]:
        """The stage folders the last finished run used (see :mod:`medvqa_build.pipeline.clean`):
        those ``report.json`` lists and those ``build.json`` points into."""
        report = self.report()
        meta = self.meta()
        kept = {(self.path / s["path"]).resolve() for s in report["stages"]}
        refs = [
            meta.get(k) for k in ("items", "items_before_review", "render_dir", "generated_dir")
        ]
        refs += list((meta.get("roots") or {}).values())
        stage_root = (self.path / "stages").resolve()
        for ref in filter(None, refs):
            path = (self.path / ref).resolve()
            if path.is_relative_to(stage_root) and len(path.relative_to(stage_root).parts) >= 2:
                kept.add(stage_root.joinpath(*path.relative_to(stage_root).parts[:2]))
        return kept

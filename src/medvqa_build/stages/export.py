"""The export stage: one folder per format of the recipe, published beside the build's other
outputs (``DIR/<format>/``) by hard links and listed in ``checksums.sha256``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from ..export import EXPORTERS, ExportContext, export
from ..store.atomic import crash_point, file_sha256, write_atomic
from .base import BuildContext, Stage, StageResult


def export_context(
    items, resolve, recipe, recipe_yaml: str, manifests, validation: dict, fmt: str
) -> ExportContext:
    """What an exporter of ``fmt`` reads of a build: the build's export stage and the
    ``export`` command (from a finished build's folder) give it the same way."""
    return ExportContext(
        items,
        resolve,
        recipe.export.name,
        recipe_yaml,
        manifests,
        validation,
        dict(recipe.export.options.get(fmt, {})),
    )


def publish(stage_dir: Path, dest: Path) -> None:
    """Expose a finished export stage at ``dest`` (hard links: no copy of the bytes).

    ``dest`` is never seen half-written or half-deleted: the new tree is built beside it, the
    old one is renamed away, the new one renamed in, and only then the old one deleted.
    """
    tmp = dest.with_name(f".{dest.name}.tmp")
    old = dest.with_name(f".{dest.name}.old")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(
        stage_dir, tmp, copy_function=link, ignore=shutil.ignore_patterns("_SUCCESS.json")
    )
    if dest.exists():
        os.replace(dest, old)
    crash_point("publish")
    os.replace(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)


class Export(Stage):
    """Each format of ``export.formats``: addressed by the rendered items, the validation, the
    export settings and the recipe (its text goes into the cards)."""

    name = "export"

    def keys(self, ctx: BuildContext) -> list[str]:
        return list(ctx.recipe.export.formats)

    def inputs(self, ctx: BuildContext, key: str) -> Any:
        return {
            "render": ctx.last("render").fingerprint,
            "validate": ctx.last("validate").fingerprint,
            "export": ctx.recipe.export.model_dump(),
            "recipe": ctx.recipe_yaml,
            "format": key,
        }

    def plugins(self, ctx: BuildContext, key: str) -> list[str]:
        return [EXPORTERS.module(key)]

    def run(self, ctx: BuildContext, key: str, out: Path) -> dict[str, Any]:
        validation = ctx.last("validate").stats
        exporter_ctx = export_context(
            ctx.items, ctx.resolve, ctx.recipe, ctx.recipe_yaml, ctx.manifests, validation, key
        )
        return export(key, exporter_ctx, out)

    def finish(self, ctx: BuildContext, results: list[StageResult]) -> None:
        for fmt, result in zip(self.keys(ctx), results, strict=True):
            publish(result.path, ctx.out / fmt)
            for path in sorted((ctx.out / fmt).rglob("*")):
                if path.is_file():
                    ctx.checksums[path.relative_to(ctx.out).as_posix()] = file_sha256(path)
        write_atomic(
            ctx.out / "checksums.sha256",
            "".join(f"{h}  {p}\n" for p, h in sorted(ctx.checksums.items())),
        )

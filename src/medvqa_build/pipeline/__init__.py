"""The whole build: a loop over the stages, materialize -> convert -> embed -> curate ->
generate -> render -> validate -> export, each content-addressed (:mod:`.runner`) and reused
when its inputs are unchanged.

The build folder holds the stages, the published exports (``hf/``, ``vlmeval/``, ...), the
combined quarantine, ``report.json``/``.md``, ``build.json`` (:class:`.build_dir.BuildDir`)
and ``checksums.sha256`` of every exported file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..curate import parse_curate_spec
from ..errors import ValidationFailed
from ..executors import make_executor
from ..recipe import Recipe
from ..stages.base import BuildContext, Stage, StageResult
from ..stages.convert import Convert
from ..stages.curate import Curate
from ..stages.embed import Embed, with_item_samples
from ..stages.export import Export
from ..stages.generate import Generate
from ..stages.materialize import Materialize
from ..stages.render import Render
from ..stages.validate import Validate
from ..store.memory import limit_arenas, use_returning_memory_pool
from ..store.tables import ItemTable, SampleTable
from ..view import Gallery, pick_items, summary_html
from .build_dir import BuildDir, report_text
from .clean import CleanError, Stale, stale_stages
from .no_items import stop_if_no_items
from .recipes import check_plugin_names, read_recipe, recipe_from_dict
from .report import BuildSummary, difficulty, report_json, report_markdown
from .runner import run_stage

STAGES: tuple[Stage, ...] = (
    Materialize(),
    Convert(),
    Embed(),
    Curate(),
    Generate(),
    Render(),
    Validate(),
    Export(),
)


@dataclass
class BuildResult:
    """What a build produced. ``items`` and ``samples`` are tables on disk (iterate them, take
    ``len``; each pass reads a batch at a time); ``items_frame()``/``samples_frame()`` give
    pandas."""

    out_dir: Path
    recipe: Recipe
    samples: SampleTable
    items: ItemTable
    report: dict[str, Any]
    stages: list[StageResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        BuildDir(self.out_dir).show_images()

    @classmethod
    def open(cls, out_dir: str | os.PathLike) -> BuildResult:
        """A finished build folder, as :func:`build` returned it (``stages`` left empty)."""
        folder = BuildDir.open(out_dir)
        return cls(
            folder.path, folder.recipe(), folder.samples(), folder.items(), folder.report() or {}
        )

    def show(
        self, task: str | None = None, source: str | None = None, n: int = 12, seed: int = 0
    ) -> Gallery:
        """A grid of ``n`` items of ``task`` and ``source`` (None: any) drawn with ``seed``,
        drawn by a notebook (``.html`` for the markup)."""
        picked = pick_items(self.items, n, seed, task=task, source=source)
        where = ", ".join(f"{k} {v}" for k, v in (("task", task), ("source", source)) if v)
        title = f"{self.recipe.name}: {len(picked)} items" + (f" ({where})" if where else "")
        return Gallery(title, picked, note=f"drawn with seed {seed}")

    def _repr_html_(self) -> str:
        report = self.report or {}
        rows = [
            ("folder", str(self.out_dir)),
            (
                "recipe",
                f"{self.recipe.name} (benchmark {self.recipe.benchmark}, seed {self.recipe.seed})",
            ),
            ("items", len(self.items)),
        ]
        rows += [(f"task: {t}", n) for t, n in sorted((report.get("items_per_task") or {}).items())]
        if self.stages:
            rows.append(
                ("stages reused", f"{sum(s.reused for s in self.stages)}/{len(self.stages)}")
            )
        first = pick_items(self.items, 4, 0)
        return summary_html("BuildResult", rows, first)

    @property
    def reused_all(self) -> bool:
        return all(s.reused for s in self.stages)

    def unused_stage_folders(self) -> list[Stale]:
        """Stage folders of earlier runs this build does not use (a cache ``clean`` deletes);
        none when the folder cannot be read safely (only the hint is lost)."""
        try:
            return stale_stages(self.out_dir, sizes=False)
        except CleanError:
            return []

    def reused_report_text(self) -> str:
        """``report.json`` as a rerun that reuses every stage writes it (what a no-op rerun
        replays, :mod:`medvqa_build.cli.noop`)."""
        report = json.loads(json.dumps(self.report))
        for stage in report.get("stages", []):
            stage["reused"] = True
        return report_text(report)

    def items_frame(self):
        return self.items.to_arrow().to_pandas()

    def samples_frame(self):
        return self.samples.to_arrow().to_pandas()


def build(
    recipe: Recipe,
    out_dir: str | os.PathLike,
    *,
    progress: bool = True,
    force_export: bool = False,
    allow_missing: bool = False,
    workers: int | None = None,
    executor: str = "local",
    executor_options: dict | None = None,
) -> BuildResult:
    """Run every stage of ``recipe`` into ``out_dir``; finished stages are reused.

    With ``allow_missing`` sources whose roots are absent are left out; the report names them
    and the quota shortfall per task. Convert shards, render chunks and embedding run on
    ``executor`` (``local``: ``workers`` processes, default 1; ``ray``: a Ray cluster, default
    every CPU of it, see ``docs/cluster.md``); the outputs are identical whichever runs them.
    """
    check_plugin_names(recipe)  # a Recipe made in Python was not read through read_recipe
    use_returning_memory_pool()
    limit_arenas()
    folder = BuildDir(out_dir)
    folder.write_recipe(recipe.to_yaml())
    with make_executor(executor, workers, **(executor_options or {})) as ex:
        ctx = BuildContext(
            recipe=recipe,
            recipe_yaml=recipe.to_yaml(),
            out=folder.path,
            executor=ex,
            progress=progress,
            force_export=force_export,
            allow_missing=allow_missing,
            default_workers=executor == "local" and workers is None,
            curate_spec=parse_curate_spec(recipe.curate) if recipe.curate else None,
        )
        try:
            for stage in STAGES:
                results = run(stage, ctx)
                if stage.name in ("generate", "render") and results:
                    stop_if_no_items(ctx, results[0])
                if ctx.items is not None:
                    folder.record(ctx)
        except ValidationFailed:
            _report(folder, ctx, with_difficulty=False)
            raise
        report = _report(folder, ctx, with_difficulty=True)
        return BuildResult(folder.path, ctx.recipe, ctx.samples, ctx.items, report, ctx.results)


def run(stage: Stage, ctx: BuildContext) -> list[StageResult]:
    """One stage of a build: every key built or reused, then handed on (``finish``)."""
    stage.prepare(ctx)
    if not stage.enabled(ctx):
        return []
    results = [
        run_stage(
            ctx.out,
            stage,
            key,
            stage.inputs(ctx, key),
            _builder(stage, ctx, key),
            plugins=stage.plugins(ctx, key),
        )
        for key in stage.keys(ctx)
    ]
    ctx.results += results
    stage.finish(ctx, results)
    return results


def _builder(stage: Stage, ctx: BuildContext, key: str):
    return lambda out: stage.run(ctx, key, out)


def _report(folder: BuildDir, ctx: BuildContext, *, with_difficulty: bool) -> dict:
    extra = {}
    if with_difficulty and ctx.embeddings is not None:
        extra = difficulty(ctx.items, ctx.samples, with_item_samples(ctx, ctx.items))
    summary = BuildSummary.of(ctx, extra)
    report = report_json(summary, folder.path)
    folder.write_report(report, report_markdown(report, summary))
    return report


__all__ = [
    "STAGES",
    "BuildDir",
    "BuildResult",
    "build",
    "check_plugin_names",
    "read_recipe",
    "recipe_from_dict",
    "run",
]

"""The curate stage (with a recipe's ``curate`` section only): deduplication and selection
over the converted samples; the later stages read the samples it keeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..curate import curate_report
from ..store.tables import SampleTable
from .base import BuildContext, Stage, StageResult


class Curate(Stage):
    """``curate.json``: what dedup and selection removed and why. Dedup and selection compare
    samples with each other: they read the table once and keep ~100 bytes of facts a sample
    (curate/facts.py), not the samples."""

    name = "curate"

    def enabled(self, ctx: BuildContext) -> bool:
        return ctx.curate_spec is not None

    def keys(self, ctx: BuildContext) -> list[str]:
        return ["samples"]

    def inputs(self, ctx: BuildContext, key: str) -> Any:
        return {
            "samples": ctx.fingerprints("convert", "embed"),
            "curate": ctx.recipe.curate,
            "seed": ctx.recipe.seed,
        }

    def run(self, ctx: BuildContext, key: str, out: Path) -> dict[str, Any]:
        report = curate_report(
            ctx.recipe.curate, ctx.samples, ctx.embeddings, ctx.roots, ctx.recipe.seed
        )
        (out / "curate.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
        return {"input": report["input"], "kept": report["kept"], "removed": len(report["removed"])}

    def finish(self, ctx: BuildContext, results: list[StageResult]) -> None:
        (result,) = results
        ctx.curate_report = json.loads((result.path / "curate.json").read_text())
        removed = {r["sample_id"] for r in ctx.curate_report["removed"]}
        ctx.samples = SampleTable(ctx.samples.paths, exclude=removed)

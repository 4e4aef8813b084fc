"""The validate stage, and the one way its inputs are assembled: the build's own check and
``medvqa-build validate`` read the same files (the item table, the convert stages' samples,
the curate stage's duplicate groups, the render stage's alignment problems) and run the same
rules."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ValidationFailed
from ..manifest import SourceManifest
from ..recipe import BlindSpec
from ..render import RENDERERS
from ..store.atomic import write_atomic
from ..store.tables import ItemTable, SampleTable
from ..validate import Problem, run_rules, write_validation_report
from ..validate.blind import blind_summary
from .base import BuildContext, Stage, StageResult


@dataclass
class ValidationInputs:
    """What the rules read of a build."""

    items: ItemTable
    samples: SampleTable
    manifests: Mapping[str, SourceManifest]
    resolve: Callable[[str], Path]
    duplicate_groups: list[list[str]]
    alignment: list[Problem]  # found by the render stage on the pixels it drew

    @classmethod
    def read(
        cls,
        items: ItemTable,
        sample_paths: Iterable[Path],
        manifests: Mapping[str, SourceManifest],
        resolve: Callable[[str], Path],
        curate_dirs: Iterable[Path],
        render_dir: Path,
    ) -> ValidationInputs:
        """The inputs from a build's files; where two convert folders hold one sample id,
        the later wins."""
        groups: list[list[str]] = []
        for d in curate_dirs:
            if (d / "curate.json").is_file():
                data = json.loads((d / "curate.json").read_text())
                groups += [
                    g["members"] for g in (data.get("dedup") or {}).get("duplicate_groups", [])
                ]
        alignment_file = render_dir / "alignment.json"
        lines = json.loads(alignment_file.read_text()) if alignment_file.is_file() else []
        alignment = [Problem(**p) for p in lines]
        samples = SampleTable(list(reversed(list(sample_paths))))
        return cls(items, samples, manifests, resolve, groups, alignment)


def validate(
    inputs: ValidationInputs,
    *,
    letter_tolerance: float = 0.1,
    blind: BlindSpec | None = None,
    seed: int = 0,
    findings: dict[str, Any] | None = None,
) -> list[Problem]:
    """Every rule's problems, then the render stage's alignment problems. With ``blind`` the
    text-only audit runs too and leaves its report in ``findings["blind"]``."""
    problems = run_rules(
        inputs.items,
        inputs.samples,
        inputs.manifests,
        inputs.resolve,
        letter_tolerance=letter_tolerance,
        duplicate_groups=inputs.duplicate_groups,
        blind=blind,
        seed=seed,
        findings=findings,
    )
    return problems + inputs.alignment


class Validate(Stage):
    """``problems.json`` and the validation report; a failed validation stops the build
    before export unless ``force_export``."""

    name = "validate"
    version = 2

    def inputs(self, ctx: BuildContext, key: str) -> Any:
        blind = ctx.recipe.blind
        if blind is None:
            return {"render": ctx.last("render").fingerprint}
        return {
            "render": ctx.last("render").fingerprint,
            "blind": blind.model_dump(mode="json"),
            "seed": ctx.recipe.seed,
        }

    def plugins(self, ctx: BuildContext, key: str) -> list[str]:
        """The renderers of the items' prompt levels (the alignment and geometry checks)."""
        return [RENDERERS.module(level) for level in ctx.items.distinct("prompt_level")]

    def run(self, ctx: BuildContext, key: str, out: Path) -> dict[str, Any]:
        inputs = ValidationInputs.read(
            ctx.items,
            [r.path / "samples.parquet" for r in ctx.results if r.name == "convert"],
            ctx.manifests,
            ctx.resolve,
            [r.path for r in ctx.results if r.name == "curate"],
            ctx.last("render").path,
        )
        findings: dict[str, Any] = {}
        problems = validate(inputs, blind=ctx.recipe.blind, seed=ctx.recipe.seed, findings=findings)
        (out / "problems.json").write_text(
            json.dumps([p.to_dict() for p in problems], indent=2) + "\n"
        )
        blind = findings.get("blind")
        write_validation_report(
            problems,
            out / "validation.json",
            out / "validation.md",
            items_checked=len(ctx.items),
            blind=blind,
        )
        stats: dict[str, Any] = {"problems": len(problems), "failed": bool(problems)}
        if blind is not None:  # the report's and the card's table; the items are in the JSON
            stats["blind"] = blind_summary(blind)
        return stats

    def finish(self, ctx: BuildContext, results: list[StageResult]) -> None:
        (result,) = results
        for name in ("validation.json", "validation.md"):
            write_atomic(ctx.out / name, (result.path / name).read_text(encoding="utf-8"))
        if result.stats["failed"] and not ctx.force_export:
            raise ValidationFailed(
                f"{result.stats['problems']} validation problem(s); nothing exported",
                where=str(result.path / "problems.json"),
                fix="fix the recipe or sources, or pass --force to export anyway "
                "(the card will say so)",
            )

"""The Python API a notebook uses; each CLI command is a thin layer over one of these."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError, ValidationFailed
from .eval.predictions import read_predictions
from .eval.score import BuildEntries, image_size_reader, score_predictions
from .eval.score_report import write_score
from .export import EXPORTERS, export
from .export.hub import PushResult, push
from .layouts.discovery import RootResolution
from .licences import SourceTerms
from .pipeline import BuildDir, BuildResult, shared
from .pipeline import build as _build
from .pipeline.clean import Stale
from .pipeline.clean import clean_build as _clean_build
from .pipeline.recipes import read_recipe
from .recipe import Recipe
from .records import QuarantineEntry
from .release import (
    card_section,
    changes_markdown,
    diff_releases,
    failed_rules,
    parse_fail_on,
    read_release,
)
from .release.changes import card_of, refresh_checksum, write_card_section
from .review import apply_decisions, write_preview
from .sources import GENERATORS, Source, all_sources, get_source
from .sources.inspection import SourceInspection
from .sources.inspection import inspect_source as _inspect_source
from .stages.convert import (
    ConvertResult,
    convert_source,
    nothing_converted,
    open_samples,
    quarantine_path_for,
    scan_source,
)
from .stages.export import export_context
from .stages.validate import ValidationInputs, validate
from .store.atomic import folder_written_aside, write_atomic
from .store.quarantine import read_quarantine
from .validate import Problem, write_validation_report
from .validate.blind import blind_summary


def list_sources() -> list[Source]:
    """Every registered source (packaged manifests plus ``MEDVQA_MANIFESTS`` folders)."""
    return [all_sources()[k] for k in sorted(all_sources())]


def load_source(source_id: str, root: str | os.PathLike, verify: str = "header") -> ConvertResult:
    """Scan a source root into samples + quarantine (``.to_pandas()`` for a DataFrame)."""
    return scan_source(source_id, root, verify=verify, progress=False)


def resolve_source(source_id: str, root: str | os.PathLike) -> RootResolution:
    """Where a source's data is under the folder given, and which of its parts are there."""
    return get_source(source_id).resolve(root)


def inspect_source(
    source_id: str, root: str | os.PathLike, limit: int = 200, verify: str = "header"
) -> SourceInspection:
    """A quick look at a download without converting it: the resolved root, the parts found
    and missing, file counts, label columns and values seen, the first problems
    (``.lines()`` to print, ``.to_dict()`` for JSON, ``.convert_command``)."""
    return _inspect_source(source_id, root, limit=limit, verify=verify)


def quarantine_of(samples_path: str | os.PathLike) -> tuple[Path, list[QuarantineEntry]]:
    """The quarantine file written beside a converted sample table, and its entries."""
    path = quarantine_path_for(Path(samples_path))
    return path, read_quarantine(path)


def load_recipe(path: str | os.PathLike, overrides: list[str] | None = None) -> Recipe:
    """Read and validate a recipe; ``overrides`` are ``key.path=value`` strings as in ``--set``."""
    return read_recipe(path, overrides)


def build(
    recipe: Recipe | str | os.PathLike, out_dir: str | os.PathLike = "build", **kwargs
) -> BuildResult:
    """Run a recipe (object or YAML path) into ``out_dir``; finished stages are reused."""
    if not isinstance(recipe, Recipe):
        recipe = load_recipe(recipe)
    return _build(recipe, out_dir, **kwargs)


def make_synthetic(source_id: str, root: str | os.PathLike, **options) -> Path:
    """Write a generated source (e.g. ``synthetic-endo``) under ``root``."""
    get_source(source_id)
    if source_id not in GENERATORS:
        raise UsageError(
            f"source {source_id!r} is not generated", fix="use one of: " + ", ".join(GENERATORS)
        )
    return GENERATORS[source_id](root, **options)


@dataclass
class ValidationResult:
    problems: list[Problem]
    items_checked: int
    blind: dict | None = None  # the text-only audit's report, when the recipe asks for it


def validate_build(
    build_dir: str | os.PathLike,
    *,
    letter_tolerance: float = 0.1,
    report_dir: str | os.PathLike | None = None,
) -> ValidationResult:
    """Every rule on a finished build, read as the build's own validate stage reads it; with
    ``report_dir`` the validation report is written there. The text-only audit runs when the
    build's recipe has a ``blind`` key, as in the build."""
    folder = BuildDir.open(build_dir)
    recipe = folder.recipe()
    items = folder.items()
    inputs = ValidationInputs.read(
        items,
        folder.sample_paths(),
        folder.manifests(),
        folder.resolver(),
        folder.stage_dirs("curate"),
        folder.inside("render_dir", folder.meta().get("render_dir")),
    )
    findings: dict = {}
    problems = validate(
        inputs,
        letter_tolerance=letter_tolerance,
        blind=recipe.blind,
        seed=recipe.seed,
        findings=findings,
    )
    if report_dir is not None:
        d = Path(report_dir)
        d.mkdir(parents=True, exist_ok=True)
        write_validation_report(
            problems,
            d / "validation.json",
            d / "validation.md",
            items_checked=len(items),
            blind=findings.get("blind"),
        )
    return ValidationResult(problems, len(items), findings.get("blind"))


@dataclass(frozen=True)
class ExportResult:
    """One export written: its folder, the items written, the items left out per reason (a
    format that holds only some items, e.g. spinebench and vlmeval no box answers) and the
    exporter's stats."""

    path: Path
    written: int
    left_out: dict[str, int]
    stats: dict


def export_build(
    build_dir: str | os.PathLike,
    fmt: str,
    out: str | os.PathLike | None = None,
    *,
    force: bool = False,
    circular: bool = False,
) -> ExportResult:
    """Write one export format of a finished build (default ``DIR/<format>``), after checking
    it as ``validate_build`` does; returns the folder and what the exporter wrote and left
    out. ``circular`` (VLMEvalKit only) adds MMBench-style rotated copies of every
    multiple-choice item."""
    EXPORTERS.get(fmt, where="--format")
    if circular and fmt != "vlmeval":
        raise UsageError(
            f"--circular writes rotated copies for the vlmeval format, not {fmt!r}",
            where="--circular",
            fix="export with --format vlmeval --circular",
        )
    folder = BuildDir.open(build_dir)
    checked = validate_build(build_dir)
    problems = checked.problems
    if problems and not force:
        raise ValidationFailed(
            f"build has {len(problems)} validation problem(s); not exported",
            where=str(build_dir),
            fix="run `medvqa-build validate DIR` to see them, or pass --force",
        )
    target = Path(out or Path(build_dir) / fmt)
    recipe = folder.recipe()
    items = folder.items()
    if not items:
        raise UsageError(
            "the build has no items, so there is nothing to export",
            where=str(folder.path),
            fix="a review that rejected every item leaves none: apply other decisions to the "
            "build (review/audit.jsonl lists what was applied), or rerun `medvqa-build run`",
        )
    validation: dict = {"problems": len(problems), "failed": bool(problems)}
    if checked.blind is not None:  # the card's audit table, as the build's own export has it
        validation["blind"] = blind_summary(checked.blind)
    ctx = export_context(
        items,
        folder.resolver(),
        recipe,
        recipe.to_yaml(),
        folder.manifests(recipe),
        validation,
        fmt,
    )
    if circular:
        ctx.options["circular"] = True
    with folder_written_aside(target) as tmp:  # a failed export leaves the target as it was
        stats = export(fmt, ctx, tmp)
    return ExportResult(target, stats["written"], stats["left_out"], stats)


def score(
    build_dir: str | os.PathLike,
    predictions: str | os.PathLike | list[str | os.PathLike],
    out: str | os.PathLike | None = None,
    *,
    parser: str = "auto",
    seed: int = 0,
    card_model: str | None = None,
) -> dict:
    """Score one model's prediction files (VLMEvalKit result, lmms-eval samples, or plain
    JSONL/CSV) on a finished build: a JSON-ready dict (see docs/evaluation.md). With ``out``,
    ``report.md`` and ``score.json`` are written there (and ``leaderboard.md`` for a
    ``card_model``)."""
    folder = BuildDir.open(build_dir)
    paths = [predictions] if isinstance(predictions, str | os.PathLike) else list(predictions)
    files = [read_predictions(p) for p in paths]
    result = score_predictions(
        BuildEntries(folder.items()),
        files,
        image_size_reader(folder.resolver()),
        parser=parser,
        seed=seed,
    )
    if out is not None:
        write_score(result, Path(out), card_model=card_model)
    return result


def export_formats() -> list[str]:
    """The registered export formats, in the order ``export`` lists them."""
    return EXPORTERS.registered()


def push_build(build_dir: str | os.PathLike, repo_id: str, **options) -> PushResult:
    """Publish a build's HF export to the Hub (see :func:`medvqa_build.export.hub.push`),
    its licence gate judging the export by the terms the build recorded."""
    return push(build_dir, repo_id, terms=recorded_terms(build_dir), **options)


def recorded_terms(path: str | os.PathLike) -> dict[str, SourceTerms]:
    """The terms push's licence gate reads for ``path`` (a build folder or an HF export
    folder): those the build recorded when it ran (``build.json``; a build from before the
    record is one line telling to rerun). An HF folder outside any build folder (copied
    elsewhere) holds no record: it is judged, deliberately, by the manifests registered now."""
    path = Path(path)
    build_dir = path if (path / "build.json").is_file() else path.parent
    if (build_dir / "build.json").is_file():
        return BuildDir(build_dir).source_terms()
    return {k: source.manifest.terms() for k, source in all_sources().items()}


def clean_build(build_dir: str | os.PathLike, *, dry_run: bool = False) -> list[Stale]:
    """Delete the stage folders the last finished run did not use (``dry_run``: list them)."""
    return _clean_build(build_dir, dry_run=dry_run)


def clean_shared_cache(older_than_days: float, *, dry_run: bool = False) -> list[shared.Entry]:
    """Delete the shared stage cache's entries no build has stored or used for
    ``older_than_days`` days (0: all); see :mod:`medvqa_build.pipeline.shared`."""
    return shared.prune(older_than_days, dry_run=dry_run)


def shared_cache_root() -> Path | None:
    """The shared stage cache's folder, None when ``MEDVQA_STAGE_CACHE=off``."""
    return shared.cache_root()


def preview_build(build_dir: str | os.PathLike, out_html=None, **options) -> Path:
    """The review gallery of a build (see :func:`medvqa_build.review.write_preview`)."""
    return write_preview(build_dir, out_html, **options)


def apply_review(build_dir: str | os.PathLike, decisions: str | os.PathLike, **options) -> dict:
    """Apply a reviewers' decisions file (see :func:`medvqa_build.review.apply_decisions`)."""
    return apply_decisions(build_dir, decisions, **options)


def diff(
    old: str | os.PathLike,
    new: str | os.PathLike,
    out: str | os.PathLike | None = None,
    *,
    card: bool = False,
    previous: str | None = None,
) -> dict:
    """What changed from release ``old`` to ``new`` (each a build folder or an HF export
    folder): a JSON-ready dict (see docs/releases.md). With ``out``, ``diff.md`` and
    ``diff.json`` are written there; ``card`` puts a "Changes since <previous>" section into
    ``new``'s card (an HF folder's README.md, a build's hf/README.md and its checksum line)."""
    a, b = read_release(old), read_release(new)
    result = diff_releases(a, b, old_label=str(old), new_label=str(new))
    result["old"]["label"] = previous or result["old"]["label"]
    if out is not None:
        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        write_atomic(d / "diff.json", json.dumps(result, indent=2, ensure_ascii=False) + "\n")
        write_atomic(d / "diff.md", changes_markdown(result))
    if card:
        target = card_of(b.path, b.kind)
        if target is None:
            raise UsageError(
                "--card: the new release has no card to write into",
                where=str(new),
                fix="export the build's hf format first, or drop --card",
            )
        write_card_section(target, card_section(result, previous))
        if b.kind == "build":
            refresh_checksum(b.path, target)
        result["card"] = str(target)
    return result


def open_build(build_dir: str | os.PathLike) -> BuildResult:
    """A finished build folder as :func:`build` returns it: its items and samples (on disk),
    recipe and report; in a notebook it shows itself and ``show()`` draws a grid of items."""
    return BuildResult.open(build_dir)


def build_item_count(build_dir: str | os.PathLike) -> int:
    """How many items a finished build holds."""
    return len(BuildDir.open(build_dir).items())


__all__ = [
    "apply_review",
    "build",
    "build_item_count",
    "changes_markdown",
    "clean_build",
    "clean_shared_cache",
    "convert_source",
    "diff",
    "ExportResult",
    "export_build",
    "failed_rules",
    "inspect_source",
    "list_sources",
    "load_recipe",
    "load_source",
    "make_synthetic",
    "nothing_converted",
    "open_build",
    "open_samples",
    "parse_fail_on",
    "preview_build",
    "push_build",
    "quarantine_of",
    "resolve_source",
    "score",
    "shared_cache_root",
    "validate_build",
]

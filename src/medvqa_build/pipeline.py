"""The whole build: materialize/convert -> generate -> render -> validate -> export.

Each stage is content-addressed (see :mod:`runner`); the build directory holds the stages, the
published exports (``hf/``, ``vlmeval/``), the combined quarantine, ``report.json``/``.md`` and
``checksums.sha256`` of every exported file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from .convert import scan_source, write_convert_result
from .errors import RecipeError, SourceError, ValidationFailed
from .export import EXPORTERS, ExportContext
from .generate import generate_items
from .images import encode_image, render_ref, resolve_image, write_bytes_atomic
from .manifest import SourceManifest
from .media.image import ImageProblem, load_rgb
from .quarantine import QuarantineEntry, read_quarantine, write_quarantine
from .recipe import Recipe
from .records import Item, Sample
from .render import Mark, RenderResult, Style, coord_text, fit_max_side, render
from .runner import StageResult, run_stage, tree_fingerprint
from .schema import read_items, read_samples, write_items
from .sources import get_source
from .validate import Problem, check_items, letter_histogram
from .validate.alignment import check_alignment

log = logging.getLogger(__name__)


@dataclass
class BuildResult:
    """What a build produced; ``items``/``samples`` turn into pandas via :func:`records_frame`."""

    out_dir: Path
    recipe: Recipe
    samples: list[Sample]
    items: list[Item]
    report: dict[str, Any]
    stages: list[StageResult] = field(default_factory=list)

    @property
    def reused_all(self) -> bool:
        return all(s.reused for s in self.stages)

    def items_frame(self):
        from .schema import items_to_table

        return items_to_table(self.items).to_pandas()

    def samples_frame(self):
        from .schema import samples_to_table

        return samples_to_table(self.samples).to_pandas()


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _publish(stage_dir: Path, dest: Path) -> None:
    """Expose a finished export stage at ``dest`` (hard links: no copy of the bytes)."""
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(
        stage_dir, tmp, copy_function=link, ignore=shutil.ignore_patterns("_SUCCESS.json")
    )
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)


def _without_missing(recipe: Recipe, roots: dict[str, Path]) -> tuple[Recipe, dict[str, int]]:
    """The recipe restricted to the present sources, and the quotas of tasks left with none."""
    data = recipe.model_dump(mode="json")
    data["sources"] = [s for s in data["sources"] if s["id"] in roots]
    kept, skipped = [], {}
    for task in data["tasks"]:
        if task["sources"]:
            task["sources"] = [s for s in task["sources"] if s in roots]
            if not task["sources"]:
                skipped[task["name"]] = task["quota"]
                continue
        kept.append(task)
    data["tasks"] = kept
    return Recipe.model_validate(data), skipped


def _missing_line(source, where: str) -> str:
    m = source.manifest
    return f"{m.id} ({where}; get it from {m.download or m.homepage}, access: {m.access})"


def _source_roots(
    recipe: Recipe, out: Path, stages: list[StageResult], allow_missing: bool = False
) -> tuple[dict[str, Path], list[str]]:
    """Roots of the recipe's sources (generated ones are materialised) and the missing ones.

    Without ``allow_missing`` every missing source is named in one error, with where to get it.
    """
    roots: dict[str, Path] = {}
    missing: list[str] = []
    for spec in recipe.sources:
        source = get_source(spec.id)
        if spec.generate is not None or (spec.root is None and source.generator is not None):
            if source.generator is None:
                raise RecipeError(
                    f"source {spec.id!r} is not generated; give it a root", fix="set sources[].root"
                )
            params = {"seed": recipe.seed, **(spec.generate or {})}
            st = run_stage(
                out,
                "materialize",
                spec.id,
                params,
                lambda d, p=params, g=source.generator: (g(d, **p), {})[1],
            )
            stages.append(st)
            roots[spec.id] = st.path
            continue
        try:
            root = recipe.resolved_root(spec)
        except RecipeError:
            missing.append(_missing_line(source, f"root {spec.root} uses an unset environment variable"))
            continue
        if root is None or not root.is_dir():
            missing.append(_missing_line(source, f"expected at {root or 'no root given'}"))
            continue
        roots[spec.id] = source.check_root(root)
    if missing and not allow_missing:
        raise SourceError(
            f"{len(missing)} source(s) missing: " + "; ".join(missing),
            fix="download them and set their roots (or environment variables), or pass --allow-missing "
            "to build from the sources present",
        )
    return roots, missing


def build(
    recipe: Recipe,
    out_dir: str | os.PathLike,
    *,
    progress: bool = True,
    force_export: bool = False,
    allow_missing: bool = False,
) -> BuildResult:
    """Run every stage of ``recipe`` into ``out_dir``; finished stages are reused.

    With ``allow_missing`` sources whose roots are absent are left out; the report names them
    and the quota shortfall per task.
    """
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    stages: list[StageResult] = []
    recipe_yaml = recipe.to_yaml()
    (out / "recipe.yaml").write_text(recipe_yaml, encoding="utf-8")
    roots, missing = _source_roots(recipe, out, stages, allow_missing)
    if not roots:
        raise SourceError("no source of the recipe is present", fix="download at least one source")
    skipped: dict[str, int] = {}
    if missing:
        recipe, skipped = _without_missing(recipe, roots)
    manifests: dict[str, SourceManifest] = {s.id: get_source(s.id).manifest for s in recipe.sources}

    # -- convert ---------------------------------------------------------------------------
    samples: list[Sample] = []
    quarantine: list[QuarantineEntry] = []
    source_counts: dict[str, dict] = {}
    for spec in recipe.sources:
        source = get_source(spec.id)
        inputs = {
            "manifest": source.path.read_text(encoding="utf-8"),
            "tree": tree_fingerprint(roots[spec.id]),
            "verify": spec.verify,
        }

        def do_convert(d: Path, spec=spec) -> dict:
            result = scan_source(spec.id, roots[spec.id], verify=spec.verify, progress=progress)
            return write_convert_result(result, d / "samples.parquet")

        st = run_stage(out, "convert", spec.id, inputs, do_convert)
        stages.append(st)
        samples += read_samples(st.path / "samples.parquet")
        quarantine += read_quarantine(st.path / "samples.quarantine.json")
        source_counts[spec.id] = {k: st.stats[k] for k in ("found", "converted", "quarantined")}
    write_quarantine(quarantine, out / "quarantine.json")

    # -- embed (only when a task uses visual negatives) -------------------------------------
    convert_fps = [s.fingerprint for s in stages]
    embeddings = _embed_stage(recipe, out, samples, roots, convert_fps, stages, progress)

    # -- generate --------------------------------------------------------------------------
    gen_inputs = {
        "convert": convert_fps,
        "tasks": [t.model_dump(mode="json") for t in recipe.tasks],
        "seed": recipe.seed,
        "benchmark": recipe.benchmark,
        "embed": stages[-1].fingerprint if embeddings is not None else None,
    }

    def do_generate(d: Path) -> dict:
        result = generate_items(
            recipe, samples, manifests, progress=progress, embeddings=embeddings, out_dir=d
        )
        write_items(result.items, d / "items.parquet")
        (d / "dropped.json").write_text(json.dumps(result.dropped, indent=2) + "\n")
        return {
            "items": len(result.items),
            "dropped": len(result.dropped),
            "shortfall": {**result.shortfall, **skipped},
        }

    gen = run_stage(out, "generate", "items", gen_inputs, do_generate)
    stages.append(gen)

    # -- render ----------------------------------------------------------------------------
    def do_render(d: Path) -> dict:
        items = read_items(gen.path / "items.parquet")
        rendered, bad, problems = render_items(items, roots, d, recipe, progress, gen.path)
        write_items(rendered, d / "items.parquet")
        (d / "quarantine.json").write_text(json.dumps(bad, indent=2) + "\n")
        (d / "alignment.json").write_text(json.dumps(problems, indent=2) + "\n")
        return {
            "items": len(rendered),
            "quarantined": len(bad),
            "alignment_problems": len(problems),
            "rendered": sum(1 for i in rendered if i.images[0].startswith("render://")),
        }

    ren = run_stage(
        out,
        "render",
        "items",
        {"generate": gen.fingerprint, "render": recipe.render.model_dump()},
        do_render,
    )
    stages.append(ren)
    items = read_items(ren.path / "items.parquet")
    (out / "build.json").write_text(
        json.dumps(
            {
                "roots": {k: str(v) for k, v in sorted(roots.items())},
                "items": (ren.path / "items.parquet").relative_to(out).as_posix(),
                "render_dir": ren.path.relative_to(out).as_posix(),
                "generated_dir": gen.path.relative_to(out).as_posix(),
            },
            indent=2,
        )
        + "\n"
    )

    def resolve(ref: str) -> Path:
        return resolve_image(ref, roots, ren.path, gen.path)

    # -- validate --------------------------------------------------------------------------
    def do_validate(d: Path) -> dict:
        problems = check_items(items, resolve)
        problems += [
            Problem(p.split(":", 1)[0], "alignment", p)
            for p in json.loads((ren.path / "alignment.json").read_text())
        ]
        (d / "problems.json").write_text(
            json.dumps([p.to_dict() for p in problems], indent=2) + "\n"
        )
        return {"problems": len(problems), "failed": bool(problems)}

    val = run_stage(out, "validate", "items", {"render": ren.fingerprint}, do_validate)
    stages.append(val)
    if val.stats["failed"] and not force_export:
        _write_report(
            out, recipe, stages, source_counts, quarantine, gen, val, items, {}, None, missing
        )
        raise ValidationFailed(
            f"{val.stats['problems']} validation problem(s); nothing exported",
            where=str(val.path / "problems.json"),
            fix="fix the recipe or sources, or pass --force to export anyway (the card will say so)",
        )

    # -- export ----------------------------------------------------------------------------
    checksums: dict[str, str] = {}
    for fmt in recipe.export.formats:
        exp_inputs = {
            "render": ren.fingerprint,
            "validate": val.fingerprint,
            "export": recipe.export.model_dump(),
            "recipe": recipe_yaml,
            "format": fmt,
        }

        def do_export(d: Path, fmt=fmt) -> dict:
            ctx = ExportContext(
                items,
                resolve,
                recipe.export.name,
                recipe_yaml,
                manifests,
                val.stats,
                recipe.export.options.get(fmt, {}),
            )
            return EXPORTERS.get(fmt)(ctx, d)

        st = run_stage(out, "export", fmt, exp_inputs, do_export)
        stages.append(st)
        _publish(st.path, out / fmt)
        for path in sorted((out / fmt).rglob("*")):
            if path.is_file():
                checksums[path.relative_to(out).as_posix()] = _file_sha256(path)
    (out / "checksums.sha256").write_text(
        "".join(f"{h}  {p}\n" for p, h in sorted(checksums.items()))
    )
    report = _write_report(
        out,
        recipe,
        stages,
        source_counts,
        quarantine,
        gen,
        val,
        items,
        checksums,
        _difficulty(items, samples, embeddings),
        missing,
    )
    return BuildResult(out, recipe, samples, items, report, stages)


def _embed_stage(recipe, out, samples, roots, convert_fps, stages, progress):
    """Embed every still-image sample once (cached by content) when a visual strategy is used."""
    from .negatives import SAMPLERS, embed_with_cache, make_embedder

    if not any(
        getattr(SAMPLERS.get(t.negatives.strategy), "needs_embeddings", False) for t in recipe.tasks
    ):
        return None
    embeddable = [s for s in samples if s.frame is None and s.slice is None]

    def do_embed(d: Path) -> dict:
        embedder = make_embedder(recipe.embedder)
        paths = [roots[s.source] / s.image for s in embeddable]
        vectors = embed_with_cache(embedder, paths, recipe.embedding_cache, progress=progress)
        np.save(d / "embeddings.npy", vectors.astype(np.float32))
        (d / "sample_ids.json").write_text(json.dumps([s.sample_id for s in embeddable]) + "\n")
        return {"embedded": len(embeddable), "embedder": embedder.id, "dim": int(vectors.shape[1])}

    st = run_stage(
        out, "embed", "samples", {"convert": convert_fps, "embedder": recipe.embedder}, do_embed
    )
    stages.append(st)
    ids = json.loads((st.path / "sample_ids.json").read_text())
    vectors = np.load(st.path / "embeddings.npy")
    return dict(zip(ids, vectors, strict=True))


def render_items(
    items: list[Item],
    roots: dict[str, Path],
    out: Path,
    recipe: Recipe,
    progress: bool,
    generated_dir: Path | None = None,
) -> tuple[list[Item], list[dict], list[str]]:
    """Draw each item's planned shapes on a copy of its clean image and keep what was drawn.

    Returns ``(items, quarantined, alignment_problems)``: an item whose geometry cannot be
    drawn (empty mask, box outside the image) is quarantined with the reason; the alignment
    check runs on the in-memory image, before lossy encoding. With ``render.max_side`` the
    image and its geometry are scaled down together first. A ``{box}`` slot in the question is
    filled from the box as drawn, in the item's coordinate convention.
    """
    spec = recipe.render
    style = Style(thickness_px=spec.thickness_px)
    ext = ".jpg" if spec.format == "jpeg" else ".png"
    done, quarantined, problems = [], [], []
    for item in tqdm(items, desc="render", unit="item", disable=not progress, leave=False):
        planned = [s for s in item.prompt_geometry if s.image_index == 0]
        if item.prompt_level == "image" and spec.max_side is None:
            done.append(item)
            continue
        root = roots.get(item.source)
        try:
            clean = load_rgb(resolve_image(item.images[0], roots, generated_dir=generated_dir))
            rs = fit_max_side(clean.shape[0], clean.shape[1], spec.max_side)
            clean = rs.image(clean)
            marks = [
                Mark(region=rs.region(_shape_region(s), root), color=s.color or "red")
                for s in planned
            ]
            if item.prompt_level == "image" or not planned:
                result = RenderResult(clean, ())
            else:
                result = render(item.prompt_level, clean, marks, style, root=root)
        except (ValueError, ImageProblem) as exc:
            quarantined.append(
                {
                    "item_id": item.item_id,
                    "sample_ids": list(item.sample_ids),
                    "task": item.task,
                    "reason": str(exc),
                }
            )
            continue
        problems += check_alignment(clean, result.image, result.shapes, item.item_id)
        changes: dict = {"prompt_geometry": result.shapes}
        if item.answer_bbox is not None:
            changes["answer_bbox"] = rs.box(item.answer_bbox)
        if "{box}" in item.question and result.shapes and result.shapes[0].bbox is not None:
            h, w = result.image.shape[:2]
            box_text = coord_text(result.shapes[0].bbox, item.coord_format or "abs", w, h)
            changes["question"] = item.question.replace("{box}", box_text)
        if item.prompt_level in ("image", "coord") and rs.is_identity:
            done.append(item.replace(**changes))  # nothing drawn: the model sees the source file
            continue
        rel = f"images/{item.item_id}_0{ext}"
        data = encode_image(result.image, spec.format, spec.jpeg_quality, spec.png_level)
        write_bytes_atomic(out / rel, data)
        done.append(item.replace(images=(render_ref(rel),) + item.images[1:], **changes))
    return done, quarantined, problems


def _shape_region(shape):
    from .records import Region

    return Region(label=shape.label or "", bbox=shape.bbox, mask=shape.mask, polygon=shape.polygon)


def _difficulty(items: list[Item], samples: list[Sample], embeddings) -> dict:
    """Per (task, negative strategy): distractor similarity and nearest-centroid accuracy."""
    if embeddings is None:
        return {}
    from .negatives import class_centroids, difficulty_report

    labelled = [(embeddings[i.sample_ids[0]], i.gt) for i in items if i.sample_ids[0] in embeddings]
    if not labelled:
        return {}
    centroids = class_centroids(np.stack([v for v, _ in labelled]), [g for _, g in labelled])
    tagged = [
        i.replace(task=f"{i.task} [{i.negatives.strategy if i.negatives else '-'}]") for i in items
    ]
    report = difficulty_report(tagged, embeddings, centroids)
    # NaN (nothing scored) is not valid JSON: report it as null
    return {
        t: {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
        for t, row in report.items()
    }


def _write_report(
    out,
    recipe,
    stages,
    source_counts,
    quarantine,
    gen,
    val,
    items,
    checksums,
    difficulty=None,
    missing=(),
) -> dict:
    from collections import Counter

    ren_stats = next((s.stats for s in stages if s.name == "render"), {})
    report = {
        "recipe": recipe.name,
        "benchmark": recipe.benchmark,
        "seed": recipe.seed,
        "sources": source_counts,
        "missing_sources": list(missing),
        "quarantined": [
            {"file": q.file, "source": q.source, "reason": q.reason} for q in quarantine
        ],
        "items": len(items),
        "items_per_task": dict(sorted(Counter(i.task for i in items).items())),
        "dropped": gen.stats.get("dropped", 0),
        "render_quarantined": ren_stats.get("quarantined", 0),
        "shortfall": gen.stats.get("shortfall", {}),
        "validation": val.stats,
        "answer_letters": letter_histogram(items),
        "stages": [
            {"stage": s.name, "path": s.path.relative_to(out).as_posix(), "reused": s.reused}
            for s in stages
        ],
        "difficulty": difficulty or {},
        "exports": checksums,
    }
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    lines = [
        f"# Build report: {recipe.name}",
        "",
        "| source | found | converted | quarantined |",
        "|---|---|---|---|",
    ]
    for sid, c in source_counts.items():
        lines.append(f"| {sid} | {c['found']} | {c['converted']} | {c['quarantined']} |")
    if missing:
        lines += ["", "Missing sources (left out with --allow-missing):"] + [
            f"- {m}" for m in missing
        ]
    lines += ["", "| task | items |", "|---|---|"]
    lines += [f"| {t} | {n} |" for t, n in report["items_per_task"].items()]
    lines += [
        "",
        f"Dropped candidates: {report['dropped']}; quota shortfall: {report['shortfall'] or 'none'}.",
        f"Validation problems: {val.stats['problems']}.",
        "",
    ]
    if difficulty:
        from .negatives import format_difficulty

        lines += ["## Difficulty of the distractors", "", format_difficulty(difficulty), ""]
    if quarantine:
        lines += (
            ["## Quarantine", ""]
            + [f"- `{q.file}` ({q.source}): {q.reason}" for q in quarantine]
            + [""]
        )
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    return report


def open_build(build_dir: str | os.PathLike):
    """``(items, resolve, recipe)`` of a finished build directory, for validate/export."""
    out = Path(build_dir).resolve()
    meta_path = out / "build.json"
    if not meta_path.is_file():
        raise SourceError(
            "not a build directory (no build.json)",
            where=str(out),
            fix="pass the -o folder of a `medvqa-build run`",
        )
    meta = json.loads(meta_path.read_text())
    roots = {k: Path(v) for k, v in meta["roots"].items()}
    render_dir = out / meta["render_dir"]
    generated_dir = out / meta["generated_dir"]
    items = read_items(out / meta["items"])
    recipe = Recipe.from_yaml(out / "recipe.yaml")
    return items, (lambda ref: resolve_image(ref, roots, render_dir, generated_dir)), recipe


__all__ = ["BuildResult", "build", "open_build"]

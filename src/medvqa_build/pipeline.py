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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from .convert import convert_to
from .curate import curate_report, duplicate_groups, parse_curate_spec
from .curate.splits import SplitPlan
from .embed_stage import embed_stage
from .errors import RecipeError, SourceError, ValidationFailed
from .export import EXPORTERS, ExportContext
from .generate import generate_items
from .images import resolve_image
from .manifest import SourceManifest
from .memory import limit_arenas, release_freed_memory
from .quarantine import QuarantineEntry, read_quarantine, write_quarantine
from .recipe import Recipe
from .records import Item
from .render_stage import CHUNK, RenderJob, render_items
from .report import difficulty, write_report
from .runner import (
    StageResult,
    crash_point,
    run_stage,
    tree_fingerprint,
    write_text_atomic,
)
from .schema import ItemWriter, iter_items
from .sources import get_source
from .tables import ItemTable, SampleTable
from .validate import Problem, run_rules, write_validation_report

log = logging.getLogger(__name__)

# items read, rendered and written at a time: small, because a contour item records every
# outline vertex (~50 kB as Python tuples), and enough chunks to keep every worker busy
RENDER_WINDOW = 512


def _windows(items: Iterable[Item], size: int) -> Iterator[list[Item]]:
    window: list[Item] = []
    for item in items:
        window.append(item)
        if len(window) >= size:
            yield window
            window = []
    if window:
        yield window


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

    @property
    def reused_all(self) -> bool:
        return all(s.reused for s in self.stages)

    def items_frame(self):
        return self.items.to_arrow().to_pandas()

    def samples_frame(self):
        return self.samples.to_arrow().to_pandas()


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _publish(stage_dir: Path, dest: Path) -> None:
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


def _without_missing(recipe: Recipe, roots: dict[str, Path]) -> tuple[Recipe, dict[str, int]]:
    """The recipe restricted to the present sources, and the quotas of tasks left with none."""
    data = recipe.model_dump(mode="json")
    data["sources"] = [s for s in data["sources"] if s["id"] in roots]
    kept, skipped = [], {}
    for task in data["tasks"]:
        if task["sources"]:
            task["sources"] = [s for s in task["sources"] if s in roots]
            if not task["sources"]:
                skipped[task["name"]] = max(1, round(task["quota"] * recipe.quota_scale))
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
            missing.append(
                _missing_line(source, f"root {spec.root} uses an unset environment variable")
            )
            continue
        if root is None or not root.is_dir():
            missing.append(_missing_line(source, f"expected at {root or 'no root given'}"))
            continue
        roots[spec.id] = source.check_root(root)
    if missing and not allow_missing:
        raise SourceError(
            f"{len(missing)} source(s) missing: " + "; ".join(missing),
            fix="download them and set their roots (or environment variables), or pass "
            "--allow-missing to build from the sources present",
        )
    return roots, missing


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
    from .executors import make_executor
    from .schema import use_returning_memory_pool

    use_returning_memory_pool()
    limit_arenas()
    with make_executor(executor, workers, **(executor_options or {})) as ex:
        return _build(recipe, out_dir, progress, force_export, allow_missing, ex)


def _build(recipe, out_dir, progress, force_export, allow_missing, executor) -> BuildResult:
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
    sample_paths: list[Path] = []
    quarantine: list[QuarantineEntry] = []
    source_counts: dict[str, dict] = {}
    inputs_by_id = {
        spec.id: {
            "manifest": get_source(spec.id).path.read_text(encoding="utf-8"),
            "tree": tree_fingerprint(roots[spec.id]),
            "verify": spec.verify,
        }
        for spec in recipe.sources
    }
    for spec in recipe.sources:
        inputs = inputs_by_id[spec.id]

        def do_convert(d: Path, spec=spec) -> dict:
            return convert_to(
                spec.id,
                roots[spec.id],
                d / "samples.parquet",
                verify=spec.verify,
                progress=progress,
                executor=executor,
            )

        st = run_stage(out, "convert", spec.id, inputs, do_convert)
        stages.append(st)
        sample_paths.append(st.path / "samples.parquet")
        quarantine += read_quarantine(st.path / "samples.quarantine.json")
        source_counts[spec.id] = {k: st.stats[k] for k in ("found", "converted", "quarantined")}
    write_quarantine(quarantine, out / "quarantine.json")
    # on disk, read a batch at a time by each stage: never every sample in memory
    samples = SampleTable(sample_paths)

    # -- embed (only when a task uses visual negatives) -------------------------------------
    convert_fps = [s.fingerprint for s in stages]
    curate_spec = parse_curate_spec(recipe.curate) if recipe.curate else None
    embeddings = embed_stage(
        recipe,
        out,
        samples,
        roots,
        convert_fps,
        stages,
        progress,
        force=bool(curate_spec and curate_spec.needs_embeddings),
        executor=executor,
    )

    # -- curate (only with a curate section): dedup and selection ------------------------------
    curate_report: dict = {}
    if curate_spec is not None:
        samples, curate_report, cur = _curate_stage(recipe, out, samples, embeddings, roots, stages)

    # -- generate --------------------------------------------------------------------------
    gen_inputs = {
        "convert": convert_fps,
        "tasks": [t.model_dump(mode="json") for t in recipe.tasks],
        "seed": recipe.seed,
        "benchmark": recipe.benchmark,
        "embed": next((s.fingerprint for s in stages if s.name == "embed"), None),
        "curate": next((s.fingerprint for s in stages if s.name == "curate"), None),
    }

    def do_generate(d: Path) -> dict:
        resplit = curate_spec is not None and curate_spec.split is not None
        # splits over the whole set: items go to a first file while a packed plan of their
        # strata and samples is kept, then are copied with the splits the plan assigns
        plan = SplitPlan(curate_spec.split) if resplit else None
        first = d / ("items.unsplit.parquet" if resplit else "items.parquet")
        with ItemWriter(first) as writer:

            def keep(item: Item) -> None:
                if plan is not None:
                    plan.add(item)
                writer.add(item)

            result = generate_items(
                recipe,
                samples,
                manifests,
                progress=progress,
                embeddings=embeddings,
                out_dir=d,
                roots=roots,
                sink=keep,
            )
        if plan is not None:
            splits = plan.assign(samples, recipe.seed)
            with ItemWriter(d / "items.parquet") as writer:
                for k, item in enumerate(ItemTable(first)):
                    writer.add(item.replace(split=splits[k]))
            first.unlink()
        (d / "dropped.json").write_text(json.dumps(result.dropped, indent=2) + "\n")
        return {
            "items": result.count,
            "dropped": len(result.dropped),
            "shortfall": {**result.shortfall, **skipped},
        }

    gen = run_stage(out, "generate", "items", gen_inputs, do_generate)
    stages.append(gen)

    # -- render ----------------------------------------------------------------------------
    def do_render(d: Path) -> dict:
        job = RenderJob(roots=roots, out=d, spec=recipe.render, generated_dir=gen.path)
        bad: list[dict] = []
        problems: list[str] = []
        n_items = n_rendered = 0
        bar = tqdm(
            total=gen.stats["items"], desc="render", unit="item", disable=not progress, leave=False
        )
        with ItemWriter(d / "items.parquet") as writer:
            # a window of items at a time: chunks of it run in parallel, none holds them all
            size = max(RENDER_WINDOW, 4 * CHUNK * executor.workers)
            for window in _windows(iter_items(gen.path / "items.parquet"), size):
                rendered, w_bad, w_problems = render_items(
                    window, job, progress=False, executor=executor
                )
                for item in rendered:
                    writer.add(item)
                n_items += len(rendered)
                n_rendered += sum(1 for i in rendered if i.images[0].startswith("render://"))
                bad += w_bad
                problems += w_problems
                bar.update(len(window))
                del window, rendered
                release_freed_memory(collect=False)
        bar.close()
        (d / "quarantine.json").write_text(json.dumps(bad, indent=2) + "\n")
        (d / "alignment.json").write_text(json.dumps(problems, indent=2) + "\n")
        return {
            "items": n_items,
            "quarantined": len(bad),
            "alignment_problems": len(problems),
            "rendered": n_rendered,
        }

    ren = run_stage(
        out,
        "render",
        "items",
        {"generate": gen.fingerprint, "render": recipe.render.model_dump()},
        do_render,
    )
    stages.append(ren)
    items = ItemTable(ren.path / "items.parquet")
    write_text_atomic(
        out / "build.json",
        json.dumps(
            {
                "roots": {k: str(v) for k, v in sorted(roots.items())},
                "items": (ren.path / "items.parquet").relative_to(out).as_posix(),
                "render_dir": ren.path.relative_to(out).as_posix(),
                "generated_dir": gen.path.relative_to(out).as_posix(),
            },
            indent=2,
        )
        + "\n",
    )

    def resolve(ref: str) -> Path:
        return resolve_image(ref, roots, ren.path, gen.path)

    # -- validate --------------------------------------------------------------------------
    def do_validate(d: Path) -> dict:
        problems = run_rules(
            items,
            samples,
            manifests,
            resolve,
            duplicate_groups=duplicate_groups(curate_report),
        )
        problems += [
            Problem(p.split(":", 1)[0], "alignment", p)
            for p in json.loads((ren.path / "alignment.json").read_text())
        ]
        (d / "problems.json").write_text(
            json.dumps([p.to_dict() for p in problems], indent=2) + "\n"
        )
        write_validation_report(
            problems, d / "validation.json", d / "validation.md", items_checked=len(items)
        )
        return {"problems": len(problems), "failed": bool(problems)}

    val = run_stage(out, "validate", "items", {"render": ren.fingerprint, "v": 2}, do_validate)
    stages.append(val)
    for name in ("validation.json", "validation.md"):
        write_text_atomic(out / name, (val.path / name).read_text(encoding="utf-8"))
    if val.stats["failed"] and not force_export:
        write_report(
            out, recipe, stages, source_counts, quarantine, gen, val, items, {}, None, missing
        )
        raise ValidationFailed(
            f"{val.stats['problems']} validation problem(s); nothing exported",
            where=str(val.path / "problems.json"),
            fix="fix the recipe or sources, or pass --force to export anyway "
            "(the card will say so)",
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
    write_text_atomic(
        out / "checksums.sha256", "".join(f"{h}  {p}\n" for p, h in sorted(checksums.items()))
    )
    report = write_report(
        out,
        recipe,
        stages,
        source_counts,
        quarantine,
        gen,
        val,
        items,
        checksums,
        difficulty(items, samples, embeddings),
        missing,
    )
    return BuildResult(out, recipe, samples, items, report, stages)


def _curate_stage(recipe, out, samples, embeddings, roots, stages):
    """Dedup and selection over the converted samples; ``(kept samples, report, stage)``."""
    inputs = {
        "samples": [s.fingerprint for s in stages if s.name in ("convert", "embed")],
        "curate": recipe.curate,
        "seed": recipe.seed,
    }

    def do_curate(d: Path) -> dict:
        # dedup and selection compare samples with each other: they read the table once and
        # keep ~100 bytes of facts a sample (curate/facts.py), not the samples
        report = curate_report(recipe.curate, samples, embeddings, roots, recipe.seed)
        (d / "curate.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
        return {"input": report["input"], "kept": report["kept"], "removed": len(report["removed"])}

    st = run_stage(out, "curate", "samples", inputs, do_curate)
    stages.append(st)
    report = json.loads((st.path / "curate.json").read_text())
    removed = {r["sample_id"] for r in report["removed"]}
    return SampleTable(samples.paths, exclude=removed), report, st


def open_build(build_dir: str | os.PathLike):
    """``(items, resolve, recipe)`` of a finished build directory, for validate/export.

    Like :func:`build`, it lets Arrow return freed memory and caps glibc's arenas first: what
    opens a build (validate, export, preview, review) streams its whole item table, and with
    Arrow's default pool a validate of 80k items alone held ~95 MiB more at its peak."""
    from .schema import use_returning_memory_pool

    use_returning_memory_pool()
    limit_arenas()
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
    items = ItemTable(out / meta["items"])
    recipe = Recipe.from_yaml(out / "recipe.yaml")
    return items, (lambda ref: resolve_image(ref, roots, render_dir, generated_dir)), recipe


__all__ = ["BuildResult", "build", "open_build"]

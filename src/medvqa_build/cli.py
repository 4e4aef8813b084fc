"""``medvqa-build``: thin subcommands over :mod:`medvqa_build.api`.

User mistakes print one line (what, where, how to fix) and exit 2; validation failures exit 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from .errors import MedvqaError, ValidationFailed


def _scenes(m) -> list[str]:
    found = {m.scene} | {p.scene for p in m.parts} | set(m.scene_map.values())
    return sorted(x for x in found if x)


def _cmd_sources(args) -> int:
    from .api import list_sources

    rows = []
    for s in list_sources():
        m = s.manifest
        rows.append(
            {
                "id": m.id,
                "title": m.title,
                "modality": m.modality,
                "scenes": _scenes(m),
                "layouts": list(dict.fromkeys(p.layout for p in m.parts)),
                "licence": m.licence,
                "access": m.access,
                "homepage": m.homepage,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    header = ("id", "scene", "modality", "access", "licence", "layouts")
    table = [header] + [
        (
            r["id"],
            ", ".join(r["scenes"]) or "-",
            r["modality"],
            r["access"],
            r["licence"][:40],
            ",".join(r["layouts"]),
        )
        for r in rows
    ]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _cmd_convert(args) -> int:
    from .convert import convert_to, quarantine_path_for
    from .quarantine import read_quarantine

    out = Path(args.output)
    counts = convert_to(
        args.source,
        args.root,
        out,
        verify=args.verify,
        progress=not args.quiet,
        workers=args.workers,
    )
    print(
        f"{args.source}: found {counts['found']}, converted {counts['converted']}, "
        f"quarantined {counts['quarantined']} -> {out}"
    )
    if counts["quarantined"]:
        print(f"quarantine report: {quarantine_path_for(out)}")
        for e in read_quarantine(quarantine_path_for(out))[:5]:
            print(f"  {e.file}: {e.reason}")
    return 0


def _cmd_make_synthetic(args) -> int:
    from .api import make_synthetic

    root = make_synthetic(
        args.source,
        args.root,
        n_images=args.images,
        n_videos=args.videos,
        frames_per_video=args.frames,
        n_corrupt=args.corrupt,
        seed=args.seed,
    )
    print(f"wrote {args.source} to {root}")
    return 0


def _cmd_run(args) -> int:
    from .api import build, load_recipe

    recipe = load_recipe(args.recipe, args.set)
    out = Path(args.output or f"build/{recipe.name}")
    result = build(
        recipe,
        out,
        progress=not args.quiet,
        force_export=args.force,
        allow_missing=args.allow_missing,
        workers=args.workers,
        executor=args.executor,
        executor_options={"address": args.ray_address} if args.ray_address else None,
    )
    for st in result.stages:
        state = "reused" if st.reused else "built"
        print(f"  {st.name:<11} {st.path.parent.name + '/' + st.path.name:<48} {state}")
    r = result.report
    for sid, c in r["sources"].items():
        print(
            f"{sid}: found {c['found']}, converted {c['converted']}, quarantined {c['quarantined']}"
        )
    if r.get("missing_sources"):
        print("missing sources: " + "; ".join(r["missing_sources"]))
    if r.get("shortfall"):
        print("quota shortfall: " + ", ".join(f"{k}: {v}" for k, v in r["shortfall"].items()))
    print(
        f"items: {r['items']} ({', '.join(f'{k}: {v}' for k, v in r['items_per_task'].items())}); "
        f"dropped {r['dropped']}; validation problems {r['validation']['problems']}"
    )
    reused = sum(s.reused for s in result.stages)
    print(
        f"stages reused: {reused}/{len(result.stages)}"
        + (" (nothing rebuilt)" if result.reused_all else "")
    )
    print(
        f"exports: {', '.join(str(out / f) for f in recipe.export.formats)}; "
        f"report: {out / 'report.md'}"
    )
    from .clean import CleanError, stale_stages

    try:
        stale = stale_stages(out, sizes=False)
    except CleanError:  # the build is reported above; only the hint is lost
        stale = []
    if stale:
        print(
            f"{len(stale)} stage folder(s) from earlier runs are not used by this build "
            f"(a cache): `medvqa-build clean {out}` deletes them, --dry-run lists them"
        )
    return 0


def _cmd_clean(args) -> int:
    from .clean import clean_build

    stale = clean_build(args.dir, dry_run=args.dry_run)
    for s in stale:
        print(f"  {s.path.relative_to(Path(args.dir).resolve())}  {s.bytes / 2**20:,.1f} MiB")
    total = sum(s.bytes for s in stale) / 2**20
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{verb} {len(stale)} stage folder(s) the last run did not use, {total:,.1f} MiB")
    return 0


def _cmd_validate(args) -> int:
    from .pipeline import open_build
    from .validate import validate_build

    items, _, _ = open_build(args.dir)
    report_dir = Path(args.dir) / "validation"
    problems = validate_build(args.dir, report_dir=report_dir)
    for p in problems[:50]:
        print(f"{p.item_id}: [{p.check}] {p.message}")
    print(f"{len(items)} items checked, {len(problems)} problem(s); report: {report_dir}")
    return 1 if problems else 0


def _cmd_export(args) -> int:
    from .export import EXPORTERS, ExportContext
    from .pipeline import open_build
    from .sources import get_source
    from .validate import validate_build

    exporter = EXPORTERS.get(args.format, where="--format")
    items, resolve, recipe = open_build(args.dir)
    problems = validate_build(args.dir)
    if problems and not args.force:
        raise ValidationFailed(
            f"build has {len(problems)} validation problem(s); not exported",
            where=args.dir,
            fix="run `medvqa-build validate DIR` to see them, or pass --force",
        )
    out = Path(args.output or Path(args.dir) / args.format)
    manifests = {s.id: get_source(s.id).manifest for s in recipe.sources}
    ctx = ExportContext(
        items,
        resolve,
        recipe.export.name,
        recipe.to_yaml(),
        manifests,
        {"problems": len(problems), "failed": bool(problems)},
        dict(recipe.export.options.get(args.format, {})),
    )
    exporter(ctx, out)
    print(f"exported {len(items)} items as {args.format} to {out}")
    return 0


def _cmd_push(args) -> int:
    from .hub import push

    if args.quiet:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    result = push(
        args.dir,
        args.repo_id,
        private=args.private,
        revision=args.revision,
        create_pr=args.create_pr,
        max_commit_mb=args.max_commit_mb,
        force=args.force,
        timeout_s=args.timeout,
    )
    where = result.pr_url or f"{result.url} ({result.revision})"
    print(f"pushed {result.files} file(s) in {len(result.commits)} commit(s) to {where}")
    return 0


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="medvqa-build",
        description="Build validated, reproducible medical VQA benchmarks from raw public "
        "datasets.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log stage decisions")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "sources",
        help="list sources, layouts, licences and access terms",
        description="List every registered source (manifests/ and MEDVQA_MANIFESTS).",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_sources)

    p = sub.add_parser(
        "convert",
        help="one source root -> sample table + quarantine report",
        description="Scan a dataset as its owners distribute it and write the sample "
        "table (Parquet), <out>.quarantine.json and <out>.counts.json.",
    )
    p.add_argument("source", metavar="SOURCE", help="source id (see `medvqa-build sources`)")
    p.add_argument("root", metavar="ROOT", help="folder of the unpacked dataset")
    p.add_argument(
        "-o",
        "--output",
        default="samples.parquet",
        help="output Parquet (default: samples.parquet)",
    )
    p.add_argument(
        "--verify",
        choices=("header", "decode"),
        default="header",
        help="header: read headers and end markers (fast); decode: decode every image",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="processes sharing the per-file work (same output as 1)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_convert)

    p = sub.add_parser(
        "make-synthetic",
        help="write a generated source (synthetic-endo) to a folder",
        description="Write the built-in synthetic dataset in its on-disk layout.",
    )
    p.add_argument("root", metavar="ROOT", help="folder to write")
    p.add_argument("--source", default="synthetic-endo", help="generated source id")
    p.add_argument("--images", type=int, default=120, help="still images (default 120)")
    p.add_argument("--videos", type=int, default=2, help="surgical videos (default 2)")
    p.add_argument("--frames", type=int, default=24, help="frames per video (default 24)")
    p.add_argument("--corrupt", type=int, default=0, help="truncate this many images (default 0)")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.set_defaults(func=_cmd_make_synthetic)

    p = sub.add_parser(
        "run",
        help="run a recipe: convert, generate, render, validate, export",
        description="Run the whole pipeline of a recipe; finished stages are reused.",
    )
    p.add_argument("recipe", metavar="RECIPE", help="recipe YAML")
    p.add_argument("-o", "--output", help="build directory (default: build/<recipe name>)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a recipe key, e.g. --set seed=3 --set tasks.0.quota=10",
    )
    p.add_argument("--force", action="store_true", help="export even if validation fails")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="parallel tasks for convert and render (same output as 1); default 1 locally, "
        "every CPU of the cluster with --executor ray",
    )
    p.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where convert shards, render chunks and embedding run: local processes "
        "(default) or a Ray cluster (needs the [ray] extra; see docs/cluster.md)",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="Ray cluster to join with --executor ray (e.g. auto, ray://head:10001); "
        "default: start Ray locally",
    )
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="build from the sources present; report the missing ones and the shortfall",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser(
        "validate",
        help="re-check a build; exit 1 on violations",
        description="Re-run every item check on a build directory.",
    )
    p.add_argument("dir", metavar="DIR", help="build directory")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser(
        "clean",
        help="delete the stage folders the last run of a build did not use",
        description="Every run whose inputs changed (recipe, data, code) writes new stage "
        "folders beside the old ones, which stay as a cache. This deletes those the last "
        "finished run did not use (it keeps what report.json and build.json name) and prints "
        "what it freed. It refuses while a build runs in DIR.",
    )
    p.add_argument("dir", metavar="DIR", help="build directory")
    p.add_argument(
        "--dry-run", action="store_true", help="list the folders and their size; delete nothing"
    )
    p.set_defaults(func=_cmd_clean)

    p = sub.add_parser(
        "export",
        help="export a build in one format",
        description="Write one export format of a finished build.",
    )
    p.add_argument("dir", metavar="DIR", help="build directory")
    p.add_argument(
        "--format",
        required=True,
        help="export format: hf, vlmeval, lmms-eval, sharegpt, medsg, spinebench",
    )
    p.add_argument("-o", "--output", help="output folder (default: DIR/<format>)")
    p.add_argument(
        "--force", action="store_true", help="export even if validation fails (the card says so)"
    )
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser(
        "push",
        help="publish the HF export of a build to the Hugging Face Hub",
        description="Create the dataset repo REPO_ID if needed and upload the HF "
        "export (data shards, assets, then README.md). The token comes "
        "from HF_TOKEN or `hf auth login` and is never printed; "
        "HF_ENDPOINT selects the Hub.",
    )
    p.add_argument("dir", metavar="DIR", help="build directory, or its hf/ export folder")
    p.add_argument("repo_id", metavar="REPO_ID", help="NAMESPACE/NAME of the dataset repo")
    p.add_argument("--private", action="store_true", help="create the repo private")
    p.add_argument("--revision", help="branch to push to (created from main if missing)")
    p.add_argument(
        "--create-pr", action="store_true", help="open a pull request instead of committing"
    )
    p.add_argument(
        "--max-commit-mb",
        type=float,
        default=2000,
        help="upload in batches of at most this many MB before the one commit (default 2000)",
    )
    p.add_argument("--force", action="store_true", help="push even if the build failed validation")
    p.add_argument(
        "--timeout",
        type=float,
        default=300,
        metavar="SECONDS",
        help="give up on (and retry) any HTTP call that takes longer (default 300)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_push)
    from .review.cli import add_review_commands

    add_review_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s"
    )
    try:
        return int(args.func(args) or 0)
    except MedvqaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted; finished stages are kept and reused on the next run", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

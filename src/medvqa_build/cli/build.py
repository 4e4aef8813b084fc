"""Commands that read sources and build: ``sources``, ``convert``, ``inspect``,
``make-synthetic`` and ``run``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import RecipeError
from . import failures, noop

# = media.image.DEFAULT_MAX_PIXELS, not imported so that --help stays light
DEFAULT_MAX_PIXELS = 200_000_000


def _positive_int(text: str) -> int:
    """An integer >= 1, written as digits or in e-notation (2e8)."""
    try:
        value = float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value != int(value) or value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(value)


def _scenes(m) -> list[str]:
    found = {m.scene} | {p.scene for p in m.parts} | set(m.scene_map.values())
    return sorted(x for x in found if x)


def _cmd_sources(args) -> int:
    from ..api import list_sources

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
                "licence_id": m.licence_id,
                "redistribution": m.redistribution,
                "access": m.access,
                "homepage": m.homepage,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    header = ("id", "scene", "modality", "access", "redistribution", "licence", "layouts")
    table = [header] + [
        (
            r["id"],
            ", ".join(r["scenes"]) or "-",
            r["modality"],
            r["access"],
            r["redistribution"],
            r["licence"][:40],
            ",".join(r["layouts"]),
        )
        for r in rows
    ]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return 0


def shortfall_summary(report: dict) -> str:
    """Each task's quota not met, and how much of it answer balance withheld (docs/validity.md)."""
    parts = []
    for task, short in report["shortfall"].items():
        withheld = (report.get("balance") or {}).get(task, {}).get("withheld", 0)
        parts.append(f"{task}: {short}" + (f" ({withheld} by answer balance)" if withheld else ""))
    return ", ".join(parts)


def parts_summary(counts: dict) -> str:
    """``parts found: a (12), b (3); missing: c (loses regions, masks)`` of a counts dict."""
    found = ", ".join(f"{k} ({v['found']})" for k, v in counts.get("parts", {}).items())
    text = f"parts found: {found or '-'}"
    missing = counts.get("parts_missing", {})
    if missing:
        lost = counts.get("loses") or []
        cost = f"; loses {', '.join(lost)}" if lost else ""
        text += f"; missing: {', '.join(missing)}{cost}"
    return text


def labels_missing_summary(counts: dict) -> str | None:
    """One line on labels the tables left empty, or None when there were none."""
    missing = counts.get("labels_missing") or {}
    if not missing:
        return None
    top = sorted(missing.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{k}: {v}" for k, v in top[:5]) + (", ..." if len(top) > 5 else "")
    return (
        f"labels left out (empty or not assessed): {sum(missing.values())} in "
        f"{counts.get('samples_missing_labels', 0)} kept sample(s) ({shown})"
    )


def _cmd_convert(args) -> int:
    from ..api import convert_source, nothing_converted, quarantine_of, resolve_source

    out = Path(args.output)
    failures.claim(args, out.parent)  # a folder -o made is removed if convert fails
    print(resolve_source(args.source, args.root).line())
    counts = convert_source(
        args.source,
        args.root,
        out,
        verify=args.verify,
        progress=not args.quiet,
        workers=args.workers,
        max_pixels=args.max_pixels,
    )
    print(
        f"{args.source}: found {counts['found']}, converted {counts['converted']}, "
        f"quarantined {counts['quarantined']}; {parts_summary(counts)} -> {out}"
    )
    if counts.get("root"):
        print(f"image paths are relative to {counts['root']} (recorded in the table's metadata)")
    if line := labels_missing_summary(counts):
        print(line)
    path, entries = quarantine_of(out)
    if counts["converted"] == 0:  # an empty table is no success: say why and what was expected
        raise nothing_converted(args.source, {**counts, "out": str(out)}, entries)
    if counts["quarantined"]:
        print(f"quarantine report: {path}")
        for e in entries[:5]:
            print(f"  {e.file}: {e.reason}")
    return 0


def _cmd_inspect(args) -> int:
    from ..api import inspect_source

    report = inspect_source(args.source, args.root, limit=args.limit, verify=args.verify)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("\n".join(report.lines()))
    return 0


def _cmd_make_synthetic(args) -> int:
    from ..api import make_synthetic

    failures.claim(args, args.root)
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
    out = noop.output_dir(args.recipe, args.output, args.set)
    flags = {"force": args.force, "allow_missing": args.allow_missing}
    key = None if out is None or args.verbose else noop.run_key(args.recipe, args.set, flags)
    if key is not None and (lines := noop.replay(out, key)) is not None:
        print("\n".join(lines))
        return 0
    from ..api import build, load_recipe

    recipe = load_recipe(args.recipe, args.set)
    out_dir = Path(args.output or f"build/{recipe.name}")
    if out is not None:
        noop.forget(out)
    head = _root_lines(recipe)
    print("\n".join(head)) if head else None
    failures.claim(args, out_dir)
    result = build(
        recipe,
        out_dir,
        progress=not args.quiet,
        force_export=args.force,
        allow_missing=args.allow_missing,
        workers=args.workers,
        executor=args.executor,
        executor_options=_executor_options(args, out_dir),
    )
    print("\n".join(_run_lines(result, out_dir)))
    if key is not None and out_dir == out:
        rerun = head + _run_lines(result, out_dir, as_rerun=True)
        noop.record(out_dir, key, rerun, _roots(recipe), result.reused_report_text())
    return 0


def _executor_options(args, out_dir: Path) -> dict | None:
    """The Ray executor joins ``--ray-address`` and keeps Ray's C++ log lines in
    ``<out>/logs/ray.log`` instead of the terminal."""
    if args.executor != "ray":
        return None
    options = {"log_file": out_dir / "logs" / "ray.log"}
    return options | ({"address": args.ray_address} if args.ray_address else {})


def _run_lines(result, out: Path, as_rerun: bool = False) -> list[str]:
    """What ``run`` prints after a build; ``as_rerun``: as a rerun reusing every stage would."""
    lines = []
    for st in result.stages:
        state = "reused" if st.reused or as_rerun else "built"
        if state == "built" and getattr(st, "cached", False):
            state = "from the shared cache"
        lines.append(f"  {st.name:<11} {st.path.parent.name + '/' + st.path.name:<48} {state}")
    r = result.report
    for sid, c in r["sources"].items():
        lines.append(
            f"{sid}: found {c['found']}, converted {c['converted']}, quarantined "
            f"{c['quarantined']}; {parts_summary(c)}"
        )
        if c.get("tasks_losing_input"):
            lines.append(f"  tasks losing {sid}'s input: {', '.join(c['tasks_losing_input'])}")
        if line := labels_missing_summary(c):
            lines.append(f"  {line}")
    later = {k: v for k, v in r.get("quarantined_per_stage", {}).items() if k != "convert"}
    if later:
        lines.append(
            "quarantined after convert: "
            + ", ".join(f"{k} {v}" for k, v in later.items())
            + f" (see {out / 'quarantine.json'})"
        )
    if r.get("missing_sources"):
        lines.append("missing sources: " + "; ".join(r["missing_sources"]))
    if r.get("shortfall"):
        lines.append("quota shortfall: " + shortfall_summary(r))
    lines.append(
        f"items: {r['items']} ({', '.join(f'{k}: {v}' for k, v in r['items_per_task'].items())}); "
        f"dropped {r['dropped']}; validation problems {r['validation']['problems']}"
    )
    reused = len(result.stages) if as_rerun else sum(s.reused for s in result.stages)
    nothing = as_rerun or result.reused_all
    lines.append(
        f"stages reused: {reused}/{len(result.stages)}" + (" (nothing rebuilt)" if nothing else "")
    )
    exported = [s.stats for s in result.stages if s.name == "export"]
    lines.append(
        "exports: "
        + ", ".join(
            f"{out / f} ({export_counts(stats)})"
            for f, stats in zip(result.recipe.export.formats, exported, strict=True)
        )
        + f"; report: {out / 'report.md'}"
    )
    stale = result.unused_stage_folders()
    if stale:
        lines.append(
            f"{len(stale)} stage folder(s) from earlier runs are not used by this build "
            f"(a cache): `medvqa-build clean {out}` deletes them, --dry-run lists them"
        )
    return lines


def export_counts(stats: dict) -> str:
    """``"280 items"``, or ``"240 items, left out 40: not multiple-choice 40"``: what an
    exporter wrote and left out (its stats' ``written`` and ``left_out``)."""
    left = left_out_text(stats)
    return f"{stats.get('written', 0)} items" + (f", {left}" if left else "")


def left_out_text(stats: dict) -> str:
    """``"left out 40: not multiple-choice 40"``, or ``""`` when the exporter left out none."""
    left = stats.get("left_out") or {}
    if not left:
        return ""
    reasons = ", ".join(f"{reason} {n}" for reason, n in left.items())
    return f"left out {sum(left.values())}: {reasons}"


def export_line(stats: dict, fmt: str, path: Path, rotated: str = "") -> str:
    """What ``medvqa-build export`` prints: ``exported 3 items as spinebench to OUT; left out
    1: not multiple-choice 1`` (the counts first, the reasons after the folder)."""
    left = left_out_text(stats)
    line = f"exported {stats.get('written', 0)} items as {fmt}{rotated} to {path}"
    return line + (f"; {left}" if left else "")


def _resolved_roots(recipe) -> list[tuple[str, Path]]:
    """``(source id, root)`` of each source whose root resolves (an unset variable is left to
    the build, which names every missing source at once)."""
    found = []
    for spec in recipe.sources:
        try:
            root = recipe.resolved_root(spec)
        except RecipeError:
            continue
        if root is not None:
            found.append((spec.id, root))
    return found


def _roots(recipe) -> list[Path]:
    """The roots a no-op rerun must find unchanged."""
    return [root for _, root in _resolved_roots(recipe)]


def _root_lines(recipe) -> list[str]:
    """The root resolution line of each source whose root exists, before anything converts."""
    from ..api import resolve_source

    return [
        resolve_source(sid, root).line() for sid, root in _resolved_roots(recipe) if root.is_dir()
    ]


def register(sub: argparse._SubParsersAction) -> None:
    """Add these commands to the main parser's subcommands, in the order ``--help`` lists."""
    _add_sources(sub)
    _add_convert(sub)
    _add_inspect(sub)
    _add_make_synthetic(sub)
    _add_run(sub)


def _add_sources(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sources",
        help="list sources, layouts, licences and access terms",
        description="List every registered source (manifests/ and MEDVQA_MANIFESTS).",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_sources)


def _add_convert(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "convert",
        help="one source root -> sample table + quarantine report",
        description="Scan a dataset as its owners distribute it and write the sample "
        "table (Parquet), <out>.quarantine.json and <out>.counts.json.",
    )
    p.add_argument("source", metavar="SOURCE", help="source id (see `medvqa-build sources`)")
    p.add_argument(
        "root",
        metavar="ROOT",
        help="the unpacked download: the folder an archive made, the folder holding it, or a "
        "download folder above that",
    )
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
        default=None,
        metavar="N",
        help="processes sharing the per-file work (same output as 1); default every core "
        "for a source of 2,000 files or more, else 1",
    )
    p.add_argument(
        "--max-pixels",
        type=_positive_int,
        default=DEFAULT_MAX_PIXELS,
        metavar="N",
        help="quarantine, undecoded, an image whose header claims more pixels than N "
        f"(default {DEFAULT_MAX_PIXELS:.0e}; the recipe key max_pixels)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_convert)


def _add_inspect(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "inspect",
        help="look at a download before converting it: root, parts, labels, problems",
        description="Resolve ROOT as convert would, name the parts found and missing (and "
        "what a missing part costs), count each part's files and read the first --limit of "
        "them (headers only, no pixels decoded): label tables and their columns, labels and "
        "attributes seen, labels left empty, the first problems. Ends with the convert "
        "command to run. Writes nothing.",
    )
    p.add_argument("source", metavar="SOURCE", help="source id (see `medvqa-build sources`)")
    p.add_argument("root", metavar="ROOT", help="folder of the download (see convert)")
    p.add_argument(
        "--limit",
        type=int,
        default=200,
        metavar="N",
        help="read at most N candidates per part (default 200)",
    )
    p.add_argument(
        "--verify",
        choices=("header", "decode"),
        default="header",
        help="header: read headers and end markers (default); decode: decode the N read",
    )
    p.add_argument("--json", action="store_true", help="print the same facts as JSON")
    p.set_defaults(func=_cmd_inspect)


def _add_make_synthetic(sub: argparse._SubParsersAction) -> None:
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


def _add_run(sub: argparse._SubParsersAction) -> None:
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
        help="parallel tasks for convert and render (same output as 1); default 1 locally "
        "(convert: every core for a source of 2,000 files or more), every CPU of the cluster "
        "with --executor ray",
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
        help="Ray cluster to join with --executor ray: auto (the cluster of this node) or "
        "HEAD_IP:6379; default: start Ray locally (docs/cluster.md)",
    )
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="build from the sources present; report the missing ones and the shortfall",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_run)

"""``medvqa-build preview`` and ``medvqa-build review apply``: clinician review of a build."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import failures


def _cmd_preview(args) -> int:
    from ..api import build_item_count, preview_build

    page_path = Path(args.output) if args.output else Path(args.dir) / "preview" / "index.html"
    failures.claim(args, page_path.parent)  # a folder the page made is removed if it fails
    page = preview_build(
        args.dir, args.output, sample=args.sample, seed=args.seed, progress=not args.quiet
    )
    print(f"wrote {page}; open it in a browser, mark items, then press 'Export decisions'")
    if args.sample is None:
        n = build_item_count(args.dir)
        if n > LARGE_PAGE:
            print(
                f"note: the page holds all {n} items; browsers slow down past a few thousand. "
                "Review a stratified sample with --sample N (e.g. --sample 500)"
            )
    return 0


LARGE_PAGE = 5000  # items on one page before the command suggests --sample


def _cmd_review_apply(args) -> int:
    from ..api import apply_review

    entry = apply_review(args.dir, args.decisions, progress=not args.quiet)
    print(
        f"applied {args.decisions}: {entry['items_before']} -> {entry['items_after']} items "
        f"({len(entry['rejected'])} rejected, {len(entry['edited'])} edited, "
        f"{len(entry['accepted'])} accepted, {entry['undecided']} undecided); "
        f"audit trail: {args.dir}/review/audit.jsonl"
    )
    print(
        "run `medvqa-build validate DIR` and `medvqa-build export DIR --format ...` "
        "to publish the reviewed build"
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Register ``preview`` and ``review apply`` on the main parser's subcommands."""
    _add_preview(sub)
    _add_review(sub)


def _add_preview(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "preview",
        help="write a static HTML gallery of a build for clinician review",
        description="Write an HTML gallery of every item, or of a stratified sample with "
        "--sample (rendered and clean image, question, options, answer), with filters by "
        "task, scene, source and prompt level; reviewers accept, reject or edit items with a "
        "comment and export a decisions file for `medvqa-build review apply`.",
    )
    p.add_argument("dir", metavar="DIR", help="build directory")
    p.add_argument(
        "-o",
        "--output",
        help="HTML file to write (default: DIR/preview/index.html); "
        "images go to an images/ folder beside it",
    )
    p.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="show N items drawn evenly over the (task, prompt level) strata instead of all; "
        "decisions still apply to the whole build (items not shown stay undecided)",
    )
    p.add_argument("--seed", type=int, help="seed of --sample's draw (default: the recipe's seed)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_preview)


def _add_review(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "review",
        help="apply clinician review decisions to a build",
        description="Work with the decisions exported from `medvqa-build preview`.",
    )
    rsub = p.add_subparsers(dest="review_command", required=True, metavar="ACTION")
    a = rsub.add_parser(
        "apply",
        help="rebuild the item set without rejected items and with edits",
        description="Check a decisions file against the build (same items, known ids, "
        "valid edits), then write the reviewed item set, point build.json at "
        "it and append the changes to DIR/review/audit.jsonl. A bad file "
        "changes nothing.",
    )
    a.add_argument("dir", metavar="DIR", help="build directory")
    a.add_argument(
        "decisions", metavar="DECISIONS", help="decisions JSON exported from the preview page"
    )
    a.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    a.set_defaults(func=_cmd_review_apply)

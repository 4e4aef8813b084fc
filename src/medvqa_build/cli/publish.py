"""Commands over a finished build: ``validate``, ``clean``, ``export`` and ``push``."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import UsageError
from . import failures
from .build import export_line


def _cmd_validate(args) -> int:
    from ..api import validate_build

    report_dir = Path(args.dir) / "validation"
    result = validate_build(args.dir, report_dir=report_dir)
    for p in result.problems[:50]:
        print(f"{p.item_id}: [{p.check}] {p.message}")
    print(
        f"{result.items_checked} items checked, {len(result.problems)} problem(s); "
        f"report: {report_dir}"
    )
    return 1 if result.problems else 0


def _cmd_clean(args) -> int:
    if args.shared_cache:
        return _clean_shared_cache(args)
    if args.dir is None:
        raise UsageError(
            "clean: no build folder given",
            fix="name one (`medvqa-build clean DIR`), or clean the shared cache: --shared-cache",
        )
    from ..api import clean_build

    stale = clean_build(args.dir, dry_run=args.dry_run)
    for s in stale:
        print(f"  {s.path.relative_to(Path(args.dir).resolve())}  {s.bytes / 2**20:,.1f} MiB")
    total = sum(s.bytes for s in stale) / 2**20
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{verb} {len(stale)} stage folder(s) the last run did not use, {total:,.1f} MiB")
    return 0


def _clean_shared_cache(args) -> int:
    from ..api import clean_shared_cache, shared_cache_root

    root = shared_cache_root()
    if root is None:
        print("the shared stage cache is turned off (MEDVQA_STAGE_CACHE=off); nothing to clean")
        return 0
    stale = clean_shared_cache(args.older_than, dry_run=args.dry_run)
    for e in stale:
        print(f"  {e.path.relative_to(root)}  {e.bytes / 2**20:,.1f} MiB")
    total = sum(e.bytes for e in stale) / 2**20
    verb = "would delete" if args.dry_run else "deleted"
    print(
        f"{verb} {len(stale)} entr{'y' if len(stale) == 1 else 'ies'} of the shared stage cache "
        f"{root} unused for {args.older_than:g} day(s), {total:,.1f} MiB"
    )
    return 0


def _cmd_export(args) -> int:
    from ..api import export_build

    target = failures.claim(args, args.output or Path(args.dir) / args.format)
    result = export_build(args.dir, args.format, target, force=args.force, circular=args.circular)
    rotated = " with circular rotations" if args.circular else ""
    print(export_line(result.stats, args.format, result.path, rotated))
    return 0


def _cmd_push(args) -> int:
    from ..api import push_build

    result = push_build(
        args.dir,
        args.repo_id,
        private=not args.public,
        revision=args.revision,
        create_pr=args.create_pr,
        max_commit_mb=args.max_commit_mb,
        force=args.force,
        timeout_s=args.timeout,
        progress=not args.quiet,
        annotations_only=args.annotations_only,
        permitted=tuple(args.i_have_permission),
    )
    where = result.pr_url or f"{result.url} ({result.revision})"
    print(
        f"pushed {result.files} file(s) ({result.unchanged} unchanged, not uploaded) in "
        f"{len(result.commits)} commit(s) to {where}, {'private' if result.private else 'public'}"
    )
    if result.withheld:
        print(f"withheld the images of {', '.join(result.withheld)} (annotations only)")
    return 0


class _FormatOption(argparse.Action):
    """``--format FORMAT``. Its help names the registered export formats, read only when the
    help is shown: listing them imports every exporter, which ``--help`` should not pay."""

    @property
    def help(self) -> str:
        from ..api import export_formats

        return "export format: " + ", ".join(export_formats())

    @help.setter
    def help(self, value) -> None:  # argparse assigns the default help; the property answers
        pass

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, values)


def register(sub: argparse._SubParsersAction) -> None:
    """Add these commands to the main parser's subcommands, in the order ``--help`` lists."""
    _add_validate(sub)
    _add_clean(sub)
    _add_export(sub)
    _add_push(sub)


def _add_validate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="re-check a build; exit 1 on violations",
        description="Re-run every item check on a build directory.",
    )
    p.add_argument("dir", metavar="DIR", help="build directory")
    p.set_defaults(func=_cmd_validate)


def _add_clean(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "clean",
        help="delete the stage folders the last run of a build did not use",
        description="Every run whose inputs changed (recipe, data, code) writes new stage "
        "folders beside the old ones, which stay as a cache. This deletes those the last "
        "finished run did not use (it keeps what report.json and build.json name) and prints "
        "what it freed. It refuses while a build runs in DIR. With --shared-cache it cleans "
        "the stage cache shared by all build folders instead (converted sample tables, "
        "$MEDVQA_STAGE_CACHE or ~/.cache/medvqa_build/stages): entries no build has stored or "
        "used for --older-than days.",
    )
    p.add_argument("dir", metavar="DIR", nargs="?", help="build directory")
    p.add_argument(
        "--dry-run", action="store_true", help="list the folders and their size; delete nothing"
    )
    p.add_argument(
        "--shared-cache",
        action="store_true",
        help="clean the shared stage cache instead of a build folder",
    )
    p.add_argument(
        "--older-than",
        type=float,
        default=30.0,
        metavar="DAYS",
        help="with --shared-cache: entries unused for this many days (default 30; 0: all)",
    )
    p.set_defaults(func=_cmd_clean)


def _add_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="export a build in one format",
        description="Write one export format of a finished build.",
    )
    p.add_argument("dir", metavar="DIR", help="build directory")
    p.add_argument("--format", required=True, action=_FormatOption)
    p.add_argument("-o", "--output", help="output folder (default: DIR/<format>)")
    p.add_argument(
        "--force", action="store_true", help="export even if validation fails (the card says so)"
    )
    p.add_argument(
        "--circular",
        action="store_true",
        help="vlmeval only: add MMBench-style copies of each item with its options rotated "
        "through every position (index + k * 1000000); `score` then reports circular accuracy",
    )
    p.set_defaults(func=_cmd_export)


def _add_push(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "push",
        help="publish the HF export of a build to the Hugging Face Hub",
        description="Create the dataset repo REPO_ID (private unless --public) if needed and "
        "upload the HF export (data shards, assets, then README.md). A source whose owners do "
        "not allow redistribution stops the push unless --annotations-only or "
        "--i-have-permission SOURCE is given. The token comes from HF_TOKEN or `hf auth login` "
        "and is never printed; HF_ENDPOINT selects the Hub. Needs huggingface_hub>=1.0.",
    )
    p.add_argument("dir", metavar="DIR", help="build directory, or its hf/ export folder")
    p.add_argument("repo_id", metavar="REPO_ID", help="NAMESPACE/NAME of the dataset repo")
    p.add_argument(
        "--public", action="store_true", help="create the repo public (default: private)"
    )
    p.add_argument(
        "--private", action="store_true", help="create the repo private (the default; kept)"
    )
    p.add_argument(
        "--annotations-only",
        action="store_true",
        help="publish no pixels of the sources that may not be redistributed: their items keep "
        "source-relative image references, and rebuild_images.py rebuilds them from your copy",
    )
    p.add_argument(
        "--i-have-permission",
        action="append",
        default=[],
        metavar="SOURCE",
        help="publish SOURCE's pixels although its terms forbid redistribution: you have the "
        "owners' permission (repeatable)",
    )
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

"""``diff``: what changed between two releases of one benchmark (docs/releases.md)."""

from __future__ import annotations

import argparse
import json
import sys


def _cmd_diff(args) -> int:
    from ..api import changes_markdown, diff, failed_rules, parse_fail_on

    rules = parse_fail_on(args.fail_on)  # a bad rule stops before the releases are read
    result = diff(args.old, args.new, args.output, card=args.card, previous=args.previous)
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print(changes_markdown(result), end="")
    if "card" in result:
        print(f"card: {result['card']}", file=sys.stderr)
    broken = failed_rules(result, rules)
    for line in broken:
        print(f"error: {line}", file=sys.stderr)
    return 1 if broken else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diff",
        help="what changed between two releases of a benchmark",
        description="Compare two releases of one benchmark, each a build folder or an HF "
        "export folder: items added, removed and changed (question, options, answer, image "
        "bytes, split) by item_id, per task and source; shifts in the answer letters, answers, "
        "sources, prompt levels and blind accuracy; and the recipe and version differences. "
        "Prints Markdown (or --json). Exit 1 when a --fail-on rule is broken, 2 when the two "
        "are different benchmarks.",
    )
    p.add_argument("old", metavar="OLD", help="the previous release (build or HF folder)")
    p.add_argument("new", metavar="NEW", help="the new release (build or HF folder)")
    p.add_argument("-o", "--output", help="also write diff.md and diff.json into this folder")
    p.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    p.add_argument(
        "--card",
        action="store_true",
        help="write a 'Changes since <previous>' section into NEW's card (README.md)",
    )
    p.add_argument("--previous", help="the previous release's name in the card (default: OLD)")
    p.add_argument(
        "--fail-on",
        action="append",
        default=[],
        metavar="RULE",
        help="exit 1 when the diff exceeds RULE: METRIC>N or METRIC>N%% (of the old items), "
        "METRIC one of added, removed, changed, any, recipe; repeatable",
    )
    p.set_defaults(func=_cmd_diff)

"""``score``: one model's predictions on a finished build, as report.md + score.json."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import failures


def _cmd_score(args) -> int:
    from ..api import score

    first = Path(args.predictions[0])
    out = Path(args.output) if args.output else Path(args.dir) / "scores" / first.stem
    model = (args.model or first.stem) if args.card else None
    failures.claim(args, out)
    result = score(
        args.dir, args.predictions, out, parser=args.parser, seed=args.seed, card_model=model
    )
    sc, circ = result["single_choice"], result["circular"]
    parts = []
    if sc:
        parts.append(f"single-choice {100 * sc['all']['accuracy']:.2f} % of {sc['all']['n']}")
    if circ:
        parts.append(f"circular {100 * circ['all']['circular']:.2f} %")
    if result["multi_select"]:
        ms = result["multi_select"]["all"]
        parts.append(f"multi-select F1 {100 * ms['f1']:.2f} %, exact {100 * ms['exact']:.2f} %")
    if result["grounding"]:
        g = result["grounding"]["task_average"]
        parts.append(f"mean IoU {g['mean_iou']:.4f}, Acc@0.5 {100 * g['acc@0.5']:.2f} %")
    parts.append(f"{len(result['missing'])} missing")
    print("; ".join(parts))
    print(f"report: {out / 'report.md'}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "score",
        help="score a model's predictions on a build",
        description="Score prediction files (VLMEvalKit's .xlsx/.csv result, lmms-eval's "
        "--log_samples .jsonl, or a plain .jsonl/.csv of item_id or index + prediction) "
        "against a finished build; writes report.md and score.json (docs/evaluation.md).",
    )
    p.add_argument("dir", metavar="BUILD", help="build directory")
    p.add_argument("predictions", metavar="PREDICTIONS", nargs="+", help="prediction file(s)")
    p.add_argument("-o", "--output", help="output folder (default: BUILD/scores/<file stem>)")
    p.add_argument(
        "--card", action="store_true", help="also write leaderboard.md, a table for the card"
    )
    p.add_argument("--model", help="the model's name in the leaderboard (default: file stem)")
    p.add_argument(
        "--parser",
        default="auto",
        choices=["auto", "medvqa", "vlmeval", "lmms-eval"],
        help="how single-choice replies are read (auto: as the client that wrote the file)",
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.set_defaults(func=_cmd_score)

"""The validation report (JSON + Markdown): every rule with its meaning and count, and the
problems found, grouped by rule."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ..store.atomic import write_atomic
from .blind import blind_table
from .rules import RULES, Problem

SHOWN_PER_RULE = 50  # Markdown lists this many problems per rule; the JSON has all


def write_validation_report(
    problems: Sequence[Problem],
    path_json: str | os.PathLike,
    path_md: str | os.PathLike,
    *,
    items_checked: int | None = None,
    blind: dict | None = None,
) -> dict:
    """Write the problems grouped by rule; returns the JSON document.

    Every rule is listed with its meaning and count (0 included), so the report also says
    what was checked. Problems whose ``check`` is no rule of :data:`RULES` (e.g. the render
    stage's ``alignment``) are counted under their own id.
    """
    counts = Counter(p.check for p in problems)
    known = {r.id: r.message for r in RULES}
    extra = {
        "alignment": "rendered pixels differ from the clean image only where the recorded "
        "prompt geometry says (checked by the render stage)"
    }
    ids = list(known) + sorted(set(counts) - set(known))
    doc = {
        "items_checked": items_checked,
        "problems": len(problems),
        "failed": bool(problems),
        "rules": [
            {"id": i, "message": known.get(i) or extra.get(i, ""), "problems": counts.get(i, 0)}
            for i in ids
        ],
        "items_with_problems": len({p.item_id for p in problems}),
        "list": [p.to_dict() for p in problems],
    }
    if blind is not None:
        doc["blind"] = blind
    write_atomic(path_json, json.dumps(doc, indent=2) + "\n")
    status = "FAILED" if problems else "passed"
    lines = [
        "# Validation report",
        "",
        f"{items_checked if items_checked is not None else '?'} items checked, "
        f"{len(problems)} problem(s): **{status}**.",
        "",
        "| rule | meaning | problems |",
        "|---|---|---|",
    ]
    lines += [f"| `{r['id']}` | {r['message']} | {r['problems']} |" for r in doc["rules"]]
    for rule in doc["rules"]:
        mine = [p for p in problems if p.check == rule["id"]]
        if not mine:
            continue
        lines += ["", f"## `{rule['id']}` ({len(mine)})", ""]
        lines += [f"- `{p.item_id}`: {p.message}" for p in mine[:SHOWN_PER_RULE]]
        if len(mine) > SHOWN_PER_RULE:
            lines.append(
                f"- ... and {len(mine) - SHOWN_PER_RULE} more (see {Path(path_json).name})"
            )
    if blind is not None:
        lines += ["", *_blind_lines(blind, Path(path_json).name)]
    write_atomic(path_md, "\n".join(lines) + "\n")
    return doc


def _blind_lines(blind: dict, json_name: str) -> list[str]:
    lines = blind_table(blind)
    sure = blind.get("confident", [])
    if sure:
        lines += [f"Items answered confidently without the image ({len(sure)}):", ""]
        lines += [
            f"- `{c['item_id']}` ({c['task']}): {c['answer']} with p = {c['probability']:.2f}"
            for c in sure[:SHOWN_PER_RULE]
        ]
        if len(sure) > SHOWN_PER_RULE:
            lines.append(f"- ... and {len(sure) - SHOWN_PER_RULE} more (see {json_name})")
    return lines


__all__ = ["write_validation_report"]

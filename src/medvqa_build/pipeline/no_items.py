"""A recipe whose tasks made no item stops after the generate stage, with each task's reason.

Rendering, validating and exporting nothing would end in a card and exports with no data (the
card writer had no config to describe); the generate stage already knows why each task came out
empty: its candidates were dropped (``dropped.json``: not enough distinct options, ...), its
files could not be read (quarantined), its sources are missing, or no sample matched it.
"""

from __future__ import annotations

import json
from collections import Counter

from ..errors import RecipeError
from ..stages.base import BuildContext, StageResult

SHOWN_TASKS = 4  # tasks named in the line; the rest are counted


def _reason(task: str, quota: int, dropped: list[dict], quarantined: int) -> str:
    """Why one task made no item, in a few words."""
    mine = [d for d in dropped if d.get("task") == task]
    if mine:
        first = " ".join(str(mine[0].get("reason", "")).split())
        first = first if len(first) <= 160 else first[:157] + "..."
        return f"{task}: 0 of {quota}, {len(mine)} candidate(s) dropped (first: {first})"
    if quarantined:
        return f"{task}: 0 of {quota}, {quarantined} candidate file(s) quarantined"
    return f"{task}: 0 of {quota}, no sample of its sources matched (labels, where:, scene)"


def stop_if_no_items(ctx: BuildContext, result: StageResult) -> None:
    """Raise a :class:`RecipeError` when ``result`` (the generate or render stage's) holds no
    item: after generate naming each task and why, after render the quarantine."""
    stats = result.stats
    if stats.get("items", 0) > 0:
        return
    if result.name == "render":
        raise RecipeError(
            f"every item was quarantined while rendering ({stats.get('quarantined', 0)}), so "
            "nothing was validated or exported",
            where=str(ctx.out / "quarantine.json"),
            fix="the quarantine names each file and why; fix or remove those files",
        )
    dropped_file = result.path / "dropped.json"
    dropped = json.loads(dropped_file.read_text()) if dropped_file.is_file() else []
    quarantine_file = result.path / "quarantine.json"
    bad = json.loads(quarantine_file.read_text()) if quarantine_file.is_file() else []
    bad_per_task = Counter(b.get("task") for b in bad)
    reasons = [
        _reason(spec.name, ctx.recipe.quota(spec), dropped, bad_per_task[spec.name])
        for spec in ctx.recipe.tasks
    ]
    reasons += [
        f"{name}: 0 of {quota}, its sources are missing" for name, quota in ctx.skipped.items()
    ]
    if stats.get("blind_removed"):
        reasons = [f"all {stats['blind_removed']} item(s) removed as blind-solvable"]
    more = len(reasons) - SHOWN_TASKS
    shown = "; ".join(reasons[:SHOWN_TASKS]) + (f"; {more} more task(s)" if more > 0 else "")
    raise RecipeError(
        f"the recipe's tasks made no item, so nothing was rendered or exported: {shown}",
        where=str(dropped_file),
        fix="lower n_options, widen the task's where:, or add sources with those labels "
        "(dropped.json lists every candidate and why)",
    )

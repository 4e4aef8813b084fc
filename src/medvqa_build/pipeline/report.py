"""The build report (report.json + report.md): counts that add up, what was left out and why,
letters and answers per task, and the difficulty of the distractors."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..curate.answer_spread import AnswerTally, balance_lines, spread_table
from ..eval.baselines import ENDOBENCH_RANDOM, ChanceTally, baseline_rows, format_baseline_table
from ..negatives import difficulty_report, format_difficulty
from ..negatives.embedder import l2_normalise
from ..recipe import Recipe
from ..records import Item, QuarantineEntry
from ..sources import get_source
from ..stages.base import BuildContext, StageResult
from ..tasks.requirements import tasks_losing_input
from ..validate.blind import blind_table
from ..validate.rules import LetterTally


def difficulty(items: Iterable[Item], samples, embeddings) -> dict:
    """Per (task, negative strategy): distractor similarity and nearest-centroid accuracy.

    Two passes over ``items`` (a list or a table): the first sums, per truth label, the
    embeddings of its items' first samples into that label's centroid; the second scores the
    items one by one. ``samples`` is not read.
    """
    if embeddings is None:
        return {}
    # the centroids of class_centroids (the unit-norm float32 mean of each label's vectors,
    # in item order) from running sums: numpy's mean over rows adds them one after another
    # in float32, so the sums are the same to the bit, without holding every vector
    sums: dict[str, list] = {}
    labelled = False
    for i in items:
        sid = i.sample_ids[0]
        if sid not in embeddings:
            continue
        labelled = True
        if not i.gt:
            continue
        row = np.asarray(embeddings[sid], dtype=np.float32)
        acc = sums.get(i.gt)
        if acc is None:
            sums[i.gt] = [np.array(row, dtype=np.float32, copy=True), 1]
        else:
            acc[0] += row
            acc[1] += 1
    if not labelled:
        return {}
    centroids = {}
    for label in sorted(sums):
        total, n = sums[label]
        # the division np.mean makes
        np.true_divide(total, np.intp(n), out=total, casting="unsafe", subok=False)
        centroids[label] = l2_normalise(total)
    tagged = (
        i.replace(task=f"{i.task} [{i.negatives.strategy if i.negatives else '-'}]") for i in items
    )
    report = difficulty_report(tagged, embeddings, centroids)
    # NaN (nothing scored) is not valid JSON: report it as null
    return {
        t: {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
        for t, row in report.items()
    }


@dataclass
class BuildSummary:
    """What the report says of one build run (taken from its :class:`BuildContext`)."""

    recipe: Recipe
    stages: list[StageResult]
    source_counts: dict[str, dict]
    quarantine: list[QuarantineEntry]
    missing: list[str]
    items: Iterable[Item]
    checksums: dict[str, str] = field(default_factory=dict)
    difficulty: dict = field(default_factory=dict)

    @classmethod
    def of(cls, ctx: BuildContext, difficulty: dict | None = None) -> BuildSummary:
        return cls(
            ctx.recipe,
            ctx.results,
            ctx.source_counts,
            ctx.quarantine,
            ctx.missing,
            ctx.items,
            ctx.checksums,
            difficulty or {},
        )

    def stats(self, stage: str) -> dict:
        return next((s.stats for s in reversed(self.stages) if s.name == stage), {})


def report_json(summary: BuildSummary, out: Path) -> dict:
    """The report's facts: counts per source, what was left out, items per task, answer
    letters, the random-guess baseline, the distractors' difficulty and the exports."""
    recipe = summary.recipe
    # one pass over the items, keeping counts only
    n_items, per_task, letters, answers = 0, Counter(), LetterTally(), AnswerTally()
    test = ChanceTally()  # the random baseline is that of the test split (or of all items)
    for item in summary.items:
        n_items += 1
        per_task[item.task] += 1
        letters.add(item)
        answers.add(item)
        if item.split in (None, "test"):
            test.add(item)
    # expected accuracy of random guessing per task (percent), beside EndoBench's published
    # random row when the build is an EndoBench rebuild
    published = ENDOBENCH_RANDOM if recipe.benchmark == "EndoBench" else {}
    generate = summary.stats("generate")
    # with curate.drop_blind_solvable: generated = blind_removed + render_quarantined + items
    blind_drop = (
        {"generated": generate["generated"], "blind_removed": generate["blind_removed"]}
        if "blind_removed" in generate
        else {}
    )
    return {
        "recipe": recipe.name,
        "benchmark": recipe.benchmark,
        "seed": recipe.seed,
        "sources": {
            sid: _with_tasks_losing_input(recipe, sid, counts)
            for sid, counts in summary.source_counts.items()
        },
        "missing_sources": list(summary.missing),
        "quarantined": [
            {"file": q.file, "source": q.source, "stage": q.stage, "reason": q.reason}
            for q in summary.quarantine
        ],
        "quarantined_per_stage": dict(sorted(Counter(q.stage for q in summary.quarantine).items())),
        "items": n_items,
        "items_per_task": dict(sorted(per_task.items())),
        "dropped": generate.get("dropped", 0),
        "answer_repeats": generate.get("answer_repeats", {}),
        **blind_drop,
        "render_quarantined": summary.stats("render").get("quarantined", 0),
        "shortfall": generate.get("shortfall", {}),
        "validation": summary.stats("validate"),
        "answer_letters": letters.histogram(),
        "answer_spread": answers.spread(),
        "balance": generate.get("balance", {}),
        # per box task: its pool's cap per (source, finding) and what it kept (issue 35)
        **({"box_pools": generate["box_pools"]} if generate.get("box_pools") else {}),
        "stages": [
            {
                "stage": s.name,
                "path": s.path.relative_to(out).as_posix(),
                "reused": s.reused,
                "seconds": s.seconds,
            }
            for s in summary.stages
        ],
        "seconds_per_stage": stage_seconds(summary.stages),
        **_embedded(summary.stats("embed")),
        "random_baseline": baseline_rows(test, published=published),
        "difficulty": summary.difficulty,
        "exports": summary.checksums,
        **formula_cells(summary.stages),
    }


def formula_cells(stages: Iterable[StageResult]) -> dict:
    """``{"formula_cells": {format: {"cells", "examples"}}}`` of the exports holding cells a
    spreadsheet would run as formulas (export/cells.py); empty when none does."""
    found = {
        s.path.name.rsplit("-", 1)[0]: {
            "cells": s.stats["formula_cells"],
            "examples": s.stats.get("formula_cell_examples", []),
        }
        for s in stages
        if s.name == "export" and s.stats.get("formula_cells")
    }
    return {"formula_cells": found} if found else {}


def _embedded(stats: dict) -> dict:
    """What the embed stage embedded of the samples, and what each visual task drew
    (``{}`` when nothing was embedded)."""
    if not stats:
        return {}
    keys = ("samples", "embedded", "unembedded", "left_out", "demand")
    return {"embedded": {k: stats[k] for k in keys if k in stats}}


def stage_seconds(stages: Iterable[StageResult]) -> dict[str, float | None]:
    """Wall seconds per stage (its outputs summed), each as long as the output took when it was
    built: a rerun that reuses an output reports the same time, so the report says where a
    cold build's time went and stays the same bytes on a rerun. None: a marker without a time."""
    out: dict[str, float | None] = {}
    for s in stages:
        if s.name in out and (out[s.name] is None or s.seconds is None):
            out[s.name] = None
        else:
            out[s.name] = (
                round(out.get(s.name, 0.0) + s.seconds, 3) if s.seconds is not None else None
            )
    return out


def _with_tasks_losing_input(recipe: Recipe, source_id: str, counts: dict) -> dict:
    """``counts`` plus the recipe's tasks this source would feed whole but cannot with the
    parts found (a partial download's cost in this build)."""
    if not counts.get("parts_missing"):
        return counts
    source = get_source(source_id)
    have = source.capabilities(list(counts.get("parts", {})))
    losing = tasks_losing_input(recipe.tasks, source_id, source.capabilities(), have)
    return {**counts, "tasks_losing_input": losing}


def report_markdown(report: dict, summary: BuildSummary) -> str:
    """``report.md``: the same facts for a reader."""
    lines = [f"# Build report: {summary.recipe.name}", ""]
    lines += _source_lines(report["sources"])
    if summary.missing:
        lines += ["", "Missing sources (left out with --allow-missing):"]
        lines += [f"- {m}" for m in summary.missing]
    lines += ["", "| task | items |", "|---|---|"]
    lines += [f"| {t} | {n} |" for t, n in report["items_per_task"].items()]
    lines += [
        "",
        f"Dropped candidates: {report['dropped']}{_repeats(report)}; "
        f"quota shortfall: {report['shortfall'] or 'none'}.",
        f"Validation problems: {report['validation']['problems']}.",
        "",
    ]
    if "blind_removed" in report:
        lines[-1:-1] = [
            f"Removed as answerable without the image (curate.drop_blind_solvable): "
            f"{report['blind_removed']} of {report['generated']} generated items; "
            f"render quarantined {report['render_quarantined']}; {report['items']} kept."
        ]
    if report["validation"].get("blind"):
        blind = report["validation"]["blind"]
        lines += blind_table(blind)
        if blind.get("confident"):
            lines += [
                f"The {blind['confident']} items answered confidently are listed in validation.md.",
                "",
            ]
    lines += balance_lines(report.get("balance", {}))
    lines += spread_table(report["answer_spread"])
    if report["random_baseline"]:
        table = format_baseline_table(report["random_baseline"])
        lines += ["## Random-guess baseline", "", table, ""]
    if summary.difficulty:
        table = format_difficulty(summary.difficulty)
        lines += ["## Difficulty of the distractors", "", table, ""]
    if "embedded" in report and "samples" in report["embedded"]:
        e = report["embedded"]
        lines += [
            f"Embedded {e['embedded']} of {e['samples']} samples: what the visual tasks can "
            f"use (their reachable candidates and per-class pools); {e['left_out']} left out, "
            f"{e['unembedded']} undecodable. Per task: `embedded.demand` in report.json.",
            "",
        ]
        per_task = demand_lines(e.get("demand", {}))
        lines += [*per_task, ""] if per_task else []
    lines += _time_lines(report)
    for fmt, cells in report.get("formula_cells", {}).items():
        lines += [
            f"Export {fmt}: {cells['cells']} cell(s) begin with = + - @, which a spreadsheet "
            f"runs as a formula (first: {', '.join(cells['examples'])}); they are kept as the "
            "model must see them: open the file in a spreadsheet with care.",
            "",
        ]
    if summary.quarantine:
        lines += ["## Quarantine", ""]
        lines += [
            f"- `{q.file}` ({q.source}, {q.stage}): {q.reason}" for q in summary.quarantine
        ] + [""]
    return "\n".join(lines)


def demand_lines(demand: dict) -> list[str]:
    """One line per visual task of ``embedded.demand``: its per-class cap, the pool ``N`` and
    the images drawn ``n`` (summed over the classes), the largest ``se_factor`` of a class, and
    its candidates."""
    lines = []
    for name, row in demand.items():
        if row.get("mode") == "whole pool":
            lines.append(f"- {name}: its whole pool embedded ({row['pool']} images).")
            continue
        if row.get("mode") != "capped":
            continue
        classes = row.get("classes", {})
        pool = sum(c["pool"] for c in classes.values())
        drawn = sum(c["drawn"] for c in classes.values())
        se = [(c["se_factor"], k) for k, c in classes.items() if c["se_factor"] is not None]
        worst = max(se, default=None)
        cap = f"{row['pool_cap_param']} {row['pool_cap']}" if "pool_cap" in row else "a cap"
        if worst is None:
            error = "no class drawn"
        elif worst[0] == 0:
            error = "se_factor 0 (every class drawn whole)"
        else:
            error = f"largest se_factor {worst[0]} ({worst[1]})"
        lines.append(
            f"- {name}: {cap} per class; pool N = {pool} in {len(classes)} classes, "
            f"n = {drawn} drawn ({drawn / pool if pool else 0:.1%}); {error}; candidates "
            f"{row['candidates']} of {row['candidates_in_pool']} (embed_candidates "
            f"{row['candidate_cap']}); {row['embedded']} embedded."
        )
    return lines


def _time_lines(report: dict) -> list[str]:
    """Where the time went: each stage's wall seconds when its outputs were built."""
    per = report.get("seconds_per_stage") or {}
    if not per:
        return []
    reused = Counter(s["stage"] for s in report["stages"] if s["reused"])
    built = Counter(s["stage"] for s in report["stages"])
    lines = [
        "## Time per stage",
        "",
        "Wall seconds each stage's outputs took when they were built (a reused output keeps the "
        "time of the run that built it).",
        "",
        "| stage | outputs | reused | seconds |",
        "|---|---|---|---|",
    ]
    for stage, sec in per.items():
        shown = "-" if sec is None else f"{sec:.1f}"
        lines.append(f"| {stage} | {built[stage]} | {reused[stage]} | {shown} |")
    known = [v for v in per.values() if v is not None]
    lines += [f"| total | {sum(built.values())} | {sum(reused.values())} | {sum(known):.1f} |", ""]
    return lines


def _repeats(report: dict) -> str:
    """The dropped candidates that repeated their images' answer, per task (issue 32.3)."""
    repeats = report.get("answer_repeats") or {}
    if not repeats:
        return ""
    per_task = ", ".join(f"{t}: {n}" for t, n in repeats.items())
    return f" (of which repeating an answer their images already gave: {per_task})"


def _source_lines(source_counts: dict[str, dict]) -> list[str]:
    """The sources' table, their missing parts and their labels left out."""
    lines = [
        "found = converted + quarantined; a converted sample may have had labels left out "
        '(an empty or "not assessed" table cell drops that label only).',
        "",
        "| source | found | converted | quarantined | labels left out (samples) | parts found |",
        "|---|---|---|---|---|---|",
    ]
    for sid, c in source_counts.items():
        left_out = sum((c.get("labels_missing") or {}).values())
        parts = ", ".join(c.get("parts", {})) or "-"
        lines.append(
            f"| {sid} | {c['found']} | {c['converted']} | {c['quarantined']} | "
            f"{left_out} ({c.get('samples_missing_labels', 0)}) | {parts} |"
        )
    partial = {sid: c for sid, c in source_counts.items() if c.get("parts_missing")}
    if partial:
        lines += ["", "Parts missing (partial downloads):"]
        for sid, c in partial.items():
            for name, reason in c["parts_missing"].items():
                tasks = ", ".join(c.get("tasks_losing_input", [])) or "none"
                lines.append(
                    f"- {sid} / {name}: {reason}; loses {', '.join(c.get('loses', [])) or '-'}; "
                    f"tasks losing this source's input: {tasks}"
                )
    with_missing = {
        sid: c["labels_missing"] for sid, c in source_counts.items() if c.get("labels_missing")
    }
    if with_missing:
        lines += ["", "Labels left out, by table column:"]
        lines += [
            f"- {sid}: " + ", ".join(f"{k} {v}" for k, v in sorted(m.items()))
            for sid, m in with_missing.items()
        ]
    return lines

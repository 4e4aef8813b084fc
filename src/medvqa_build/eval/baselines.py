"""The random-guess baseline a build implies, next to EndoBench's published random row.

A uniform guess on an item with ``n`` options is right with probability ``1/n``; a task's
expected random accuracy is the mean of that over its items. A multi-select item (answer
``A,C``) scored by exact match is taken as a uniform guess among the ``2**n - 1`` non-empty
subsets of its options. EndoBench's published random row was *measured* (one random run), so
it carries sampling noise: its standard error is ``sqrt(p (1 - p) / N)`` with ``N`` EndoBench's
item count for the task, and a rebuild agrees with it when the two differ by at most two
standard errors. All accuracies here are in percent.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping, Sequence

from ..records import Item
from ..vocab import option_chance  # below export and eval: the card reports it too

# EndoBench Table 1, "Random" row (reference/endobench.md 4.1), percent.
ENDOBENCH_RANDOM: dict[str, float] = {
    "Landmark Identification": 23.68,
    "Organ Identification": 24.64,
    "Lesion Quantification": 23.25,
    "Lesion Type Identification": 15.98,
    "Lesion Severity Grading": 15.48,
    "Preoperative Assessment": 50.00,
    "Macro Phases Identification": 25.61,
    "Micro Operation Analysis": 27.78,
    "Instrument Management": 33.33,
    "Visual Grounding": 28.10,
    "Region Selection": 22.63,
    "Region Recognition": 24.26,
}

ENDOBENCH_ABBREVIATIONS: dict[str, str] = {
    "Landmark Identification": "LI",
    "Organ Identification": "OI",
    "Lesion Quantification": "LQ",
    "Lesion Type Identification": "LT",
    "Lesion Severity Grading": "LS",
    "Preoperative Assessment": "PA",
    "Macro Phases Identification": "MP",
    "Micro Operation Analysis": "MO",
    "Instrument Management": "IM",
    "Visual Grounding": "VG",
    "Region Selection": "RS",
    "Region Recognition": "RR",
}

# EndoBench's items per task: the TSV shares of 6,832 (reference/endobench.md 1.2), rounded so
# each category adds up to its verified count (Anatomy 1,043, Lesion 1,575, Surgery 1,801,
# Spatial 2,413). recipes/endobench.yaml uses the same numbers as quotas.
ENDOBENCH_TASK_ITEMS: dict[str, int] = {
    "Landmark Identification": 626,
    "Organ Identification": 417,
    "Lesion Quantification": 321,
    "Lesion Type Identification": 1061,
    "Lesion Severity Grading": 193,
    "Preoperative Assessment": 102,
    "Macro Phases Identification": 738,
    "Micro Operation Analysis": 668,
    "Instrument Management": 293,
    "Visual Grounding": 670,
    "Region Selection": 430,
    "Region Recognition": 1313,
}


def _chance(n_options: int, multi_select: bool) -> float:
    return option_chance(n_options, multi_select=multi_select) if n_options else 0.0


def item_chance(item: Item, multi_select: bool | None = None) -> float:
    """Probability that a uniform random guess answers ``item`` right (0..1). A multi-select
    question is one of 2^n - 1 non-empty subsets even when its answer has one letter, so the
    caller says whether the task is multi-select (default: the answer has several letters)."""
    multi = "," in item.answer if multi_select is None else multi_select
    return _chance(len(item.options), multi)


class ChanceTally:
    """What the random baseline needs of each item, gathered in one pass: per group (task,
    subtask, ...) the option count of each item in order, and whether any answer has several
    letters: four bytes an item, the items themselves are not kept."""

    def __init__(self, key: str = "task"):
        self.key = key
        self.n_options: dict[str, array] = {}
        self.multi: set[str] = set()

    def add(self, item: Item) -> None:
        group = str(getattr(item, self.key))
        counts = self.n_options.get(group)
        if counts is None:
            counts = self.n_options[group] = array("I")
        counts.append(len(item.options))
        if "," in item.answer:
            self.multi.add(group)

    @classmethod
    def of(cls, items: Iterable[Item], key: str = "task") -> ChanceTally:
        tally = cls(key)
        for item in items:
            tally.add(item)
        return tally

    def percent(self) -> dict[str, float]:
        """Expected accuracy (percent) of random guessing per group."""
        out = {}
        for group, counts in sorted(self.n_options.items()):
            multi = group in self.multi
            out[group] = 100.0 * sum(_chance(n, multi) for n in counts) / len(counts)
        return out


def multi_select_tasks(items: Iterable[Item], key: str = "task") -> set[str]:
    """Groups in which any answer has several letters: all their items are multi-select."""
    return {str(getattr(i, key)) for i in items if "," in i.answer}


def random_baseline(items: Iterable[Item], key: str = "task") -> dict[str, float]:
    """Expected accuracy (percent) of random guessing per ``key`` (task, subtask, ...)."""
    return ChanceTally.of(items, key).percent()


def standard_error(accuracy_pct: float, n_items: int) -> float:
    """Standard error (percent) of an accuracy measured on ``n_items`` items."""
    p = accuracy_pct / 100.0
    return 100.0 * math.sqrt(p * (1.0 - p) / n_items) if n_items > 0 else math.inf


def baseline_rows(
    items: Iterable[Item] | ChanceTally,
    published: Mapping[str, float] = ENDOBENCH_RANDOM,
    published_items: Mapping[str, int] = ENDOBENCH_TASK_ITEMS,
    abbreviations: Mapping[str, str] = ENDOBENCH_ABBREVIATIONS,
) -> list[dict]:
    """One row per task: ours, the published random accuracy, its standard error, and whether
    ours lies within two standard errors. Tasks only one side has get ``None`` where unknown.
    ``items`` is read once (or given as a per-task :class:`ChanceTally` of them)."""
    tally = items if isinstance(items, ChanceTally) else ChanceTally.of(items)
    if tally.key != "task":
        raise ValueError(f"baseline rows are per task, not per {tally.key!r}")
    ours = tally.percent()
    counts = {task: len(n) for task, n in tally.n_options.items()}
    options = {task: set(n) for task, n in tally.n_options.items()}
    rows = []
    for task in list(published) + sorted(t for t in ours if t not in published):
        mine, theirs = ours.get(task), published.get(task)
        se = (
            standard_error(theirs, published_items[task])
            if theirs is not None and task in published_items
            else None
        )
        diff = None if mine is None or theirs is None else mine - theirs
        rows.append(
            {
                "task": task,
                "abbreviation": abbreviations.get(task, ""),
                "items": counts.get(task, 0),
                "options": sorted(options.get(task, ())),
                "random_expected": mine,
                "published_random": theirs,
                "published_items": published_items.get(task),
                "standard_error": se,
                "difference": diff,
                "within_2se": None if diff is None or se is None else abs(diff) <= 2 * se,
            }
        )
    return rows


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_baseline_table(rows: Sequence[dict]) -> str:
    """Markdown table of :func:`baseline_rows` for the build report and the dataset card."""
    lines = [
        "| task | abbr. | items | options | random (expected) | EndoBench random "
        "| EndoBench items | 2 SE | difference | within 2 SE |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        se2 = None if r["standard_error"] is None else 2 * r["standard_error"]
        within = {True: "yes", False: "**no**", None: "-"}[r["within_2se"]]
        opts = "/".join(str(n) for n in r["options"]) or "-"
        lines.append(
            f"| {r['task']} | {r['abbreviation'] or '-'} | {r['items']} | {opts} | "
            f"{_fmt(r['random_expected'])} | {_fmt(r['published_random'])} | "
            f"{r['published_items'] if r['published_items'] is not None else '-'} | {_fmt(se2)} | "
            f"{_fmt(r['difference'])} | {within} |"
        )
    return "\n".join(lines)


__all__ = [
    "ENDOBENCH_ABBREVIATIONS",
    "ENDOBENCH_RANDOM",
    "ENDOBENCH_TASK_ITEMS",
    "ChanceTally",
    "baseline_rows",
    "format_baseline_table",
    "item_chance",
    "option_chance",
    "random_baseline",
    "standard_error",
]

"""Random-guess baselines: expectation from option counts, EndoBench's row and its noise."""

import math

from medvqa_build.eval.baselines import (
    ENDOBENCH_RANDOM,
    ENDOBENCH_TASK_ITEMS,
    baseline_rows,
    format_baseline_table,
    item_chance,
    random_baseline,
    standard_error,
)
from medvqa_build.records import Item


def _item(task, n, answer="A", i=0):
    return Item(
        item_id=f"{task}{n}{i}",
        benchmark="b",
        category="c",
        task=task,
        subtask=task,
        source="s",
        sample_ids=("s:1",),
        images=("x",),
        question="q?",
        options=tuple(str(k) for k in range(n)),
        answer=answer,
        gt="0",
    )


def test_expected_accuracy_is_the_mean_of_one_over_options():
    items = [_item("T", 4), _item("T", 6, i=1), _item("U", 2)]
    assert random_baseline(items) == {"T": 100 * (1 / 4 + 1 / 6) / 2, "U": 50.0}
    assert item_chance(_item("T", 3, "A,C")) == 1 / 7  # a random non-empty subset


def test_endobench_item_counts_add_up():
    assert sum(ENDOBENCH_TASK_ITEMS.values()) == 6832
    assert set(ENDOBENCH_TASK_ITEMS) == set(ENDOBENCH_RANDOM)


def test_two_standard_errors_match_the_issue():
    two_se = {
        t: 2 * standard_error(p, ENDOBENCH_TASK_ITEMS[t]) for t, p in ENDOBENCH_RANDOM.items()
    }
    assert math.isclose(two_se["Lesion Type Identification"], 2.25, abs_tol=0.1)
    assert math.isclose(two_se["Region Recognition"], 2.37, abs_tol=0.1)
    assert math.isclose(two_se["Preoperative Assessment"], 9.9, abs_tol=0.2)
    assert all(
        3 <= v <= 6.5
        for t, v in two_se.items()
        if t
        not in (
            "Lesion Type Identification",
            "Region Recognition",
            "Preoperative Assessment",
            "Landmark Identification",
        )
    )


def test_rows_and_table():
    items = [_item("Preoperative Assessment", 2, i=i) for i in range(3)] + [_item("Other", 4)]
    rows = baseline_rows(items)
    pa = next(r for r in rows if r["task"] == "Preoperative Assessment")
    assert pa["random_expected"] == 50.0 and pa["within_2se"] is True and pa["abbreviation"] == "PA"
    li = next(r for r in rows if r["task"] == "Landmark Identification")
    assert li["random_expected"] is None and li["within_2se"] is None
    table = format_baseline_table(rows)
    assert (
        table.splitlines()[0].startswith("| task | abbr.")
        and "| Other | - | 1 | 4 | 25.00 |" in table
    )
    assert len(table.splitlines()) == 2 + 13

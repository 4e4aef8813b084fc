"""Issue 32.3: counting options whose numbers give nothing away. The truth's rank among the
options is spread evenly over a task (chi-square), and each count is the answer in about
1 / n_options of the items that show it; "counts nearest the truth" (the old rule) fails both."""

from collections import Counter

import numpy as np
import pytest

from medvqa_build.negatives.frequency import FrequencyLedger
from medvqa_build.records import Sample
from medvqa_build.tasks.base import ItemProblem
from medvqa_build.tasks.count_options import count_distractors, count_range, feasible_ranks

from .conftest import LESION, run, task

CHI2_3DF_999 = 16.27  # chi-square, 3 degrees of freedom, p = 0.001


def chi2_uniform(ranks, n):
    counts = np.bincount(ranks, minlength=n)
    expected = len(ranks) / n
    return float(((counts - expected) ** 2 / expected).sum())


def nearest_counts(truth, k, max_count, rng):
    """The rule this replaces: nearer counts likelier (kept here to show the tests bite)."""
    others = [c for c in range(max_count + 1) if c != truth]
    w = np.array([1.0 / abs(c - truth) for c in others])
    picks = rng.choice(len(others), size=k, replace=False, p=w / w.sum())
    return sorted(others[i] for i in picks)


def ranks_of(truths, pick):
    out = []
    for t in truths:
        options = sorted([t, *pick(t)])
        out.append(options.index(t))
    return out


def test_feasible_ranks():
    assert feasible_ranks(0, 3, 4) == [0]
    assert feasible_ranks(2, 3, 4) == [1, 2]
    assert feasible_ranks(4, 3, 4) == [3]
    assert feasible_ranks(7, 3, 4) == [3]  # above max_count: the range grows to the truth
    assert feasible_ranks(1, 5, 4) == []


def test_rank_is_uniform_and_counts_carry_no_frequency():
    truths = list(np.random.default_rng(0).integers(0, 5, size=500))
    rng, ledger = np.random.default_rng(1), FrequencyLedger()
    items = []
    for t in truths:
        others = count_distractors(int(t), 3, 4, rng, ledger)
        assert len(set(others)) == 3 and int(t) not in others and all(0 <= o <= 4 for o in others)
        items.append((int(t), sorted([int(t), *others])))
    ranks = [opts.index(t) for t, opts in items]
    assert chi2_uniform(ranks, 4) < 3.0
    shown = Counter(o for _, opts in items for o in opts)
    answers = Counter(t for t, _ in items)
    assert all(0.2 <= answers[v] / shown[v] <= 0.3 for v in range(5)), (answers, shown)
    # the old rule: the truth sits in the middle (a guesser of "the 2nd smallest" wins)
    old = ranks_of(truths, lambda t: nearest_counts(int(t), 3, 4, np.random.default_rng(int(t))))
    assert chi2_uniform(old, 4) > CHI2_3DF_999


def test_count_range_is_what_the_answers_span():
    assert count_range({1, 2, 3}, 4, 4) == (1, 4)  # no image without lesions: 0 never right
    assert count_range({0, 1, 2}, 4, 4) == (0, 3)  # 4 never right
    assert count_range({2}, 4, 4) == (1, 4)  # widened up to max_count, then down
    assert count_range({1, 2, 3, 4, 5, 6}, 4, 4) == (1, 4)  # larger counts: the truth widens
    assert count_range({0}, 4, 2) == (0, 3)
    assert count_range((), 4, 4) == (0, 4)
    assert feasible_ranks(1, 3, 4, min_count=1) == [0]


def test_not_enough_counts_is_an_item_problem():
    with pytest.raises(ItemProblem):
        count_distractors(1, 5, 4, np.random.default_rng(0))


def test_count_options_seeded():
    a = [count_distractors(2, 3, 4, np.random.default_rng(3), FrequencyLedger()) for _ in "ab"]
    assert a[0] == a[1]


def counted(n_each=(40, 40, 40, 40, 40)):
    out = []
    for count, n in enumerate(n_each):
        for i in range(n):
            out.append(
                Sample(
                    sample_id=f"synthetic-endo:n{count}/{i}",
                    source="synthetic-endo",
                    image=f"n{count}/{i}.jpg",
                    width=64,
                    height=64,
                    modality="endoscopy",
                    attributes={"lesion_count": str(count)},
                    group_id=f"g{count}-{i}",
                )
            )
    return out


def test_lesion_counting_items_spread_the_answer_rank():
    spec = task(
        "lc",
        "lesion_counting",
        LESION,
        "Lesion Quantification",
        "Lesion Counting",
        quota=200,
        params={"count_attribute": "lesion_count", "max_count": 4},
    )
    items = run([spec], counted()).items
    assert len(items) == 200
    ranks = [sorted(i.options, key=int).index(i.gt) for i in items]
    assert chi2_uniform(ranks, 4) < CHI2_3DF_999 / 4
    assert {i.negatives.strategy for i in items} == {"rank_balanced_counts"}
    # letters stay balanced: the rank is about values, the letter about positions
    letters = Counter(i.answer for i in items)
    assert max(letters.values()) - min(letters.values()) <= 1


def test_a_count_no_item_can_have_is_never_an_option():
    """Lesion counting skips images without lesions: 0 is never the answer, so never shown."""
    spec = task(
        "lc",
        "lesion_counting",
        LESION,
        "Lesion Quantification",
        "Lesion Counting",
        quota=90,
        params={"count_attribute": "lesion_count", "max_count": 4},
    )
    items = run([spec], counted((0, 30, 30, 30, 0))).items
    assert len(items) == 90
    shown = Counter(o for i in items for o in i.options)
    assert set(shown) == {"1", "2", "3", "4"}  # 4 fills the fourth option

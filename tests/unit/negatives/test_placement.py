from collections import Counter

import numpy as np

from medvqa_build.negatives import BalancedSlots, place_answer


def test_balanced_letters_within_one_per_task():
    rng = np.random.default_rng(3)
    slots = BalancedSlots(rng)
    counts: dict[str, Counter] = {"a": Counter(), "b": Counter()}
    plan = [("a", 5)] * 103 + [("b", 4)] * 37
    for task, n in [plan[i] for i in rng.permutation(len(plan))]:
        options, pos = place_answer(
            "truth", [f"d{i}" for i in range(n - 1)], slots.next(task, n), rng
        )
        assert options[pos] == "truth" and len(options) == n
        counts[task][pos] += 1
    for task, n in (("a", 5), ("b", 4)):
        per_letter = [counts[task][i] for i in range(n)]
        assert max(per_letter) - min(per_letter) <= 1, (task, per_letter)


def test_place_answer_is_deterministic():
    a = place_answer("t", ["x", "y", "z"], 6, np.random.default_rng(1))
    b = place_answer("t", ["x", "y", "z"], 6, np.random.default_rng(1))
    assert a == b and a[1] == 2

"""Answer balance (recipe ``balance:``, docs/validity.md): how many items each answer class of a
task may get, so that the most common answer is not a guess that wins without the image.

The generate stage takes a task's candidates round-robin over their answer classes (the first
candidate of every class, then the second, ...). Stopping each class at a *level* ``L`` keeps
the spread as even as the pool allows (water-filling): every class gets ``min(n_c, L)`` items.
:func:`plan` picks the highest level, and the largest total up to the quota, whose spread meets
the policy; with ``prefer: quota`` the quota wins where both cannot hold, and the report says by
how much the policy is missed. :class:`BalanceGate` applies the plan while items are made and
counts every candidate it holds back, class by class, so the report's counts add up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import RecipeError
from ..recipe import BalanceSpec, Recipe, TaskSpec

NO_CAP = 2**62  # the level of a plan that caps no class


def policy_for(recipe: Recipe, spec: TaskSpec, answer_is_truth: bool) -> BalanceSpec:
    """A task's policy: the recipe's with the task's keys; none by default for a task whose
    answer is not its truth (a box, a colour), unless the task gives its own."""
    if answer_is_truth or spec.balance is not None:
        return recipe.balance_for(spec)
    return BalanceSpec.model_validate(False)


def normalised_entropy(counts: Sequence[int] | np.ndarray) -> float:
    """Shannon entropy of the non-zero ``counts`` over its maximum, ``ln`` of how many there
    are (Pielou's evenness): 1.0 is an even spread; 0.0 for fewer than two classes."""
    c = np.asarray([n for n in counts if n > 0], dtype=np.float64)
    if len(c) < 2:
        return 0.0
    p = c / c.sum()
    return float(-(p * np.log(p)).sum() / math.log(len(c)))


def spread_of(counts: Sequence[int] | np.ndarray) -> dict:
    """``{items, classes, max_share, entropy}`` of answer-class counts (report and card)."""
    c = [int(n) for n in counts if n > 0]
    total = sum(c)
    return {
        "items": total,
        "classes": len(c),
        "max_share": round(max(c) / total, 4) if total else None,
        "entropy": round(normalised_entropy(c), 4),
    }


@dataclass(frozen=True)
class Allocation:
    """At most ``level`` items per answer class and ``total`` in all; ``met``: the policy holds
    (False only where ``prefer: quota`` filled the quota against it)."""

    level: int
    total: int
    met: bool = True


def _filled(n: np.ndarray, level: int) -> int:
    return int(np.minimum(n, level).sum())


def _allocation_counts(n: np.ndarray, total: int) -> tuple[np.ndarray, int]:
    """The per-class counts of water-filling ``total`` items, and their level."""
    lo, hi = 0, int(n.max())  # smallest level whose full round reaches ``total``
    while lo < hi:
        mid = (lo + hi) // 2
        if _filled(n, mid) >= total:
            hi = mid
        else:
            lo = mid + 1
    counts = np.minimum(n, max(lo - 1, 0))
    extra = total - int(counts.sum())
    if extra:
        counts[np.flatnonzero(n >= lo)[:extra]] += 1
    return counts, lo


def meets(policy: BalanceSpec, counts: np.ndarray) -> bool:
    """Whether answer-class counts satisfy the policy. Fewer than two classes always do, and so
    does a spread as even as whole items allow (3 items over yes / no: 2 and 1)."""
    c = counts[counts > 0]
    if len(c) < 2 or c.max() - c.min() <= 1:
        return True
    share = c.max() / c.sum()
    if policy.max_share is not None and share > policy.max_share + 1e-12:
        return False
    if policy.max_ratio is not None and share * len(c) > policy.max_ratio + 1e-12:
        return False
    return policy.min_entropy is None or normalised_entropy(c) >= policy.min_entropy - 1e-12


def check_reachable(policy: BalanceSpec, n_classes: int, task: str) -> None:
    """A cap below an even spread over the pool's answer classes: no number of items meets it."""
    if policy.max_share is None or n_classes < 2 or policy.max_share * n_classes >= 1 - 1e-12:
        return
    best = math.ceil(1e4 / n_classes) / 1e4  # rounded up, so that it is itself reachable
    raise RecipeError(
        f"task {task!r}: balance.max_share={policy.max_share:g} cannot be met: its pool has "
        f"{n_classes} answer classes, so the best achievable cap is {best:g} (all equal)",
        fix=f"set balance.max_share to {best:g} or more for this task (tasks[].balance)",
    )


def plan(available: Sequence[int], quota: int, policy: BalanceSpec, task: str = "?") -> Allocation:
    """The level and total for a task whose answer classes have ``available`` candidates."""
    n = np.asarray([c for c in available if c > 0], dtype=np.int64)
    check_reachable(policy, len(n), task)
    target = min(quota, int(n.sum()))
    if len(n) < 2 or not policy.active:
        return Allocation(NO_CAP, target)
    counts, level = _allocation_counts(n, target)
    if meets(policy, counts):
        return Allocation(NO_CAP if level >= n.max() else level, target)
    if policy.prefer == "quota":
        return Allocation(level, target, met=False)
    # the quota's round misses the policy. Over whole rounds the top share rises and the
    # evenness falls with the level, and level 1 (one item per class) meets any reachable
    # policy: take the highest whole round that meets it, then as much of the next round as
    # still does (one more item to a class at the level can keep the spread even enough).
    lo, hi = 1, max(level - 1, 1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if meets(policy, np.minimum(n, mid)):
            lo = mid
        else:
            hi = mid - 1
    extra = _into_next_round(policy, n, lo, quota - _filled(n, lo))
    return Allocation(lo + 1 if extra else lo, _filled(n, lo) + extra)


def _into_next_round(policy: BalanceSpec, n: np.ndarray, level: int, room: int) -> int:
    """How many classes may go from ``level`` to ``level + 1`` items (at most ``room``) with
    the spread still meeting the policy: the share and the evenness are updated one item at
    a time (entropy = ln T - sum(c ln c) / T)."""
    counts = np.minimum(n, level).astype(np.float64)
    total, k = counts.sum(), len(counts)
    s = float((counts * np.log(counts)).sum())
    step = (level + 1) * math.log(level + 1) - level * math.log(level)
    growing = min(room, int((n > level).sum()))
    if counts.min() >= level:  # every class at the level: one more item each is still even
        return growing
    best = 0
    for r in range(1, growing + 1):
        total, s = total + 1, s + step
        share = (level + 1) / total
        if policy.max_share is not None and share > policy.max_share + 1e-12:
            continue
        if policy.max_ratio is not None and share * k > policy.max_ratio + 1e-12:
            continue
        evenness = (math.log(total) - s / total) / math.log(k)
        if policy.min_entropy is not None and evenness < policy.min_entropy - 1e-12:
            break  # the evenness only falls further along this round
        best = r
    return best


class BalanceGate:
    """A plan applied while a task's items are made, in round-robin order.

    :meth:`admit` says whether the next candidate of a class may become an item (its class is
    below the level and the total below the plan's). A candidate that fails (:meth:`failed`)
    lowers its class's count; when the class can then no longer reach the level, the plan is
    redone (the caller then offers the candidates it held back again).
    """

    def __init__(
        self, available: Mapping[str, int], quota: int, policy: BalanceSpec, task: str = "?"
    ):
        self.names = sorted(available)
        self.index = {name: k for k, name in enumerate(self.names)}
        self.available = np.array([available[k] for k in self.names], dtype=np.int64)
        self.usable = self.available.copy()
        self.made = np.zeros(len(self.names), np.int64)
        self.dropped = np.zeros(len(self.names), np.int64)
        self.quota, self.policy, self.task = quota, policy, task
        self.first = self.allocation = plan(self.available, quota, policy, task)

    @property
    def total(self) -> int:
        return int(self.made.sum())

    def full(self) -> bool:
        return self.total >= self.allocation.total

    def admit(self, name: str) -> bool:
        return not self.full() and self.made[self.index[name]] < self.allocation.level

    def took(self, name: str) -> None:
        self.made[self.index[name]] += 1

    def failed(self, name: str) -> None:
        k = self.index[name]
        self.dropped[k] += 1
        self.usable[k] -= 1
        if self.usable[k] < self.allocation.level and self.allocation.level != NO_CAP:
            self.replan()

    def replan(self) -> None:
        # what each class can still give: its items so far plus its untried candidates
        self.allocation = plan(self.usable, self.quota, self.policy, self.task)

    def summary(self) -> dict:
        """The task's balance section of the report: policy, plan, spread achieved, and per
        answer class the candidates ``available = made + dropped + left`` (left: held back by
        the policy or past the quota) and ``short``, the usable candidates it lacks for an
        even share of the quota (the data to add). Per task ``quota = made + withheld +
        pool_short``."""
        k = len(self.names)
        even = self._even_share(k)
        per_class = {
            name: {
                "available": int(self.available[i]),
                "made": int(self.made[i]),
                "dropped": int(self.dropped[i]),
                "left": int(self.available[i] - self.made[i] - self.dropped[i]),
                "short": max(0, int(even[i]) - int(self.usable[i])),
            }
            for i, name in enumerate(self.names)
        }
        fillable = min(self.quota, int(self.usable.sum()))
        level = self.allocation.level
        return {
            "policy": self.policy.model_dump(mode="json"),
            "quota": self.quota,
            "made": self.total,
            "level": None if level == NO_CAP else level,
            "policy_met": self.allocation.met and meets(self.policy, self.made),
            # quota = made + withheld (kept out to meet the policy) + pool_short (too few
            # usable candidates even without it)
            "withheld": max(0, fillable - self.total),
            "pool_short": self.quota - fillable,
            **{k: v for k, v in spread_of(self.made).items() if k != "items"},
            "per_class": per_class,
        }

    def _even_share(self, k: int) -> np.ndarray:
        """Each class's share of the quota spread evenly (the first classes by name take the
        remainder, as the round-robin order does)."""
        if k == 0:
            return np.zeros(0, np.int64)
        even = np.full(k, self.quota // k, np.int64)
        even[: self.quota % k] += 1
        return even

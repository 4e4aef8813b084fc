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


def meets(policy: BalanceSpec, counts: np.ndarray) -> bool:
    """Whether answer-class counts satisfy the policy. Fewer than two classes always do, and so
    does a spread as even as whole items allow (3 items over yes / no: 2 and 1)."""
    c = np.asarray(counts)
    c = c[c > 0]
    if len(c) < 2:
        return True
    s = float((c * np.log(c)).sum())
    return _meets(policy, int(c.sum()), int(c.max()), int(c.min()), s, len(c))


def _meets(policy: BalanceSpec, total: int, top: int, low: int, s: float, k: int) -> bool:
    """:func:`meets` from a spread's summary: its total, largest and smallest count, the sum
    of ``c ln c`` over its counts and how many classes it has (entropy = ln T - s / T)."""
    if k < 2:
        return True
    if policy.max_share is not None and policy.max_share * k < 1 - 1e-12:
        return False  # below an even spread: no spread meets it
    if top - low <= 1:
        return True
    share = top / total
    if policy.max_share is not None and share > policy.max_share + 1e-12:
        return False
    if policy.max_ratio is not None and share * k > policy.max_ratio + 1e-12:
        return False
    if policy.min_entropy is None:
        return True
    return (math.log(total) - s / total) / math.log(k) >= policy.min_entropy - 1e-12


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


def _xlogx(v: float) -> float:
    return v * math.log(v) if v > 0 else 0.0


class _Rounds:
    """A pool's classes sorted by size, with prefix sums: the spread of any level (every class
    at ``min(n_c, level)``, ``r`` of the larger ones one item further) in O(log classes)."""

    def __init__(self, n: np.ndarray):
        self.n = np.sort(n)
        self.k = len(self.n)
        self.cum = np.concatenate(([0], np.cumsum(self.n)))
        f = self.n.astype(np.float64)
        self.cumlog = np.concatenate(([0.0], np.cumsum(f * np.log(f))))

    def filled(self, level: int) -> int:
        i = int(np.searchsorted(self.n, level, "right"))  # classes with n_c <= level
        return int(self.cum[i]) + (self.k - i) * level

    def level_for(self, total: int) -> int:
        """The smallest level whose whole round gives ``total`` items or more."""
        lo, hi = 0, int(self.n[-1])
        while lo < hi:
            mid = (lo + hi) // 2
            if self.filled(mid) >= total:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def state(self, level: int, r: int = 0) -> tuple[int, int, int, float, int]:
        """``(total, top, low, sum c ln c, classes)`` of the spread at ``level`` plus ``r``."""
        i = int(np.searchsorted(self.n, level, "right"))
        m = self.k - i  # classes with more than ``level`` candidates
        if level == 0:
            return r, 1, 1, 0.0, r
        total = int(self.cum[i]) + m * level + r
        s = float(self.cumlog[i]) + m * _xlogx(level) + r * self._step(level)
        top = level + 1 if r else (level if m else int(self.n[-1]))
        low = int(self.n[0]) if i else (level if r < m else level + 1)
        return total, top, low, s, self.k

    @staticmethod
    def _step(level: int) -> float:
        return _xlogx(level + 1) - _xlogx(level)

    def meets(self, policy: BalanceSpec, level: int, r: int = 0) -> bool:
        return _meets(policy, *self.state(level, r))

    def into_next_round(self, policy: BalanceSpec, level: int, room: int) -> int:
        """How many classes may go from ``level`` to ``level + 1`` items (at most ``room``)
        with the spread still meeting the policy. The top share falls as more classes join
        (the cap allows the larger ``r``); the evenness, once it misses, only falls further."""
        growing = min(room, self.k - int(np.searchsorted(self.n, level, "right")))
        if growing <= 0:
            return 0
        total, _, low, s, k = self.state(level)
        if low >= level:  # every class at the level: one more item each is still even
            return growing
        r = np.arange(1, growing + 1)
        t = total + r
        ok = np.ones(growing, bool)
        share = (level + 1) / t
        if policy.max_share is not None:
            ok &= share <= policy.max_share + 1e-12
        if policy.max_ratio is not None:
            ok &= share * k <= policy.max_ratio + 1e-12
        if policy.min_entropy is not None:
            even = (np.log(t) - (s + r * self._step(level)) / t) / math.log(k)
            missed = np.flatnonzero(even < policy.min_entropy - 1e-12)
            if len(missed):
                ok[missed[0] :] = False
        hits = np.flatnonzero(ok)
        return int(hits[-1]) + 1 if len(hits) else 0


def plan(
    available: Sequence[int], quota: int, policy: BalanceSpec, task: str = "?", check: bool = True
) -> Allocation:
    """The level and total for a task whose answer classes have ``available`` candidates;
    ``check``: an unreachable cap is a recipe error (else the plan says it is not met)."""
    n = np.asarray(available, dtype=np.int64)
    n = n[n > 0]
    if check:
        check_reachable(policy, len(n), task)
    target = min(quota, int(n.sum()))
    if len(n) < 2 or not policy.active:
        return Allocation(NO_CAP, target)
    rounds = _Rounds(n)
    level = rounds.level_for(target)
    if rounds.meets(policy, level - 1, target - rounds.filled(level - 1)):
        return Allocation(NO_CAP if level >= rounds.n[-1] else level, target)
    if policy.prefer == "quota":
        return Allocation(level, target, met=False)
    # the quota's round misses the policy. Over whole rounds the top share rises and the
    # evenness falls with the level, and level 1 (one item per class) meets any reachable
    # policy: take the highest whole round that meets it, then as much of the next round as
    # still does (one more item to a class at the level can keep the spread even enough).
    lo, hi = 1, max(level - 1, 1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if rounds.meets(policy, mid):
            lo = mid
        else:
            hi = mid - 1
    extra = rounds.into_next_round(policy, lo, quota - rounds.filled(lo))
    met = rounds.meets(policy, lo, extra)  # False only for a cap the pool lost mid-way
    return Allocation(lo + 1 if extra else lo, rounds.filled(lo) + extra, met)


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
        self.allocation = plan(self.usable, self.quota, self.policy, self.task, check=False)

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

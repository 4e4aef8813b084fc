"""The text-only audit of the items a multiple-choice judge cannot score: free-form grounding
(the answer is a box, no options; MedSG) and multi-select items (every correct letter; the
lesion levels of SpineBench). Numpy only, cross-validated like the choice judge: each item is
guessed by a rule learned on the other folds' items, never on its own.

- **Boxes.** The guess is the mean answer box of the other folds' items of the task (a
  positional prior: "the liver is on the left"), a hit when its IoU with the answer is >= 0.5;
  or, for an item whose question states one box (a reference box written in the text), that
  box, where copying it hit more often than the mean box on the other folds' items that state
  one (an object tracked over neighbouring slices barely moves: its reference box is its
  answer).
  Chance is the hit rate of a random other item's answer box of the task: per item, the share
  of the task's other answers that overlap its own at IoU >= 0.5 (what a guess from the same
  pool gets without a prior on where).
- **Multi-select.** Per option text, how often it was in the answer when shown (the other
  folds, smoothed towards their overall rate); the guess is the options with the highest such
  shares, as many as the other folds' most common answer-set size; right when it is exactly
  the answer set. Chance is a random valid set: of a size the task's answers take, drawn in
  the proportions they take, then a random set of that size (``share(k) / C(n, k)`` for an
  answer of ``k`` of ``n`` options), so a set size that is always the same is not itself the
  shortcut, a level that is usually the answer is.

Both give the per-task rows of :func:`medvqa_build.validate.blind._task_row`, with ``kind``
``"box"`` or ``"multi-select"`` (issue 32, point 3).
"""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter

import numpy as np

from ..rng import rng_for

HIT_IOU = 0.5
CHANCE_OTHERS = 2000  # at most this many other answers per item estimate a box's chance
_NUM = r"\s*(-?\d+(?:\.\d+)?)\s*"
_BOXES = (
    re.compile(rf"\[{_NUM},{_NUM},{_NUM},{_NUM}\]"),  # [x1, y1, x2, y2]
    re.compile(rf"\({_NUM},{_NUM}\)\s*,?\s*\({_NUM},{_NUM}\)"),  # Qwen's (x1,y1),(x2,y2)
)
NO_BOX = (math.nan, math.nan, math.nan, math.nan)


def question_box(question: str) -> tuple[float, float, float, float]:
    """The one box a question writes (``[x1, y1, x2, y2]`` or ``(x1,y1),(x2,y2)``, in the
    item's coordinates); NaNs when it writes none or several."""
    found = [m.groups() for pattern in _BOXES for m in pattern.finditer(question)]
    if len(found) != 1:
        return NO_BOX
    x1, y1, x2, y2 = (float(v) for v in found[0])
    return (x1, y1, x2, y2) if x1 < x2 and y1 < y2 else NO_BOX


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of boxes ``a`` (..., 4) with boxes ``b`` (..., 4), broadcast (x1, y1, x2, y2)."""
    iw = np.clip(np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]), 0, None)
    ih = np.clip(np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]), 0, None)
    inter = iw * ih
    area_a = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1])
    area_b = (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    union = area_a + area_b - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def box_judge(
    boxes: np.ndarray, folds: int, rng: np.random.Generator, stated: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per item of one task: whether the text-only guess hits its answer, and the chance of a
    hit (see the module's docstring). The guess is the other folds' mean answer box, or the
    box the item's question states (``stated``, NaN rows: none) where copying it hit more
    often than the mean on the other folds' items. Fewer than ``2 * folds`` items: no guess."""
    n = len(boxes)
    right = np.zeros(n, bool)
    if stated is None:
        stated = np.full((n, 4), np.nan)
    has = ~np.isnan(stated[:, 0])
    if n >= 2 * folds:
        fold = rng.permutation(n) % folds
        copied = has & (box_iou(np.where(has[:, None], stated, 0.0), boxes) >= HIT_IOU)
        for k in range(folds):
            test, train = fold == k, fold != k
            guess = boxes[train].mean(axis=0)
            by_mean = box_iou(guess[None, :], boxes) >= HIT_IOU
            right[test] = by_mean[test]
            seen = train & has
            if seen.any() and copied[seen].sum() > by_mean[seen].sum():
                right[test & has] = copied[test & has]
    p_chance = np.zeros(n)
    if n > 1:
        others = np.arange(n)
        if n - 1 > CHANCE_OTHERS:
            others = np.sort(rng.choice(n, CHANCE_OTHERS + 1, replace=False))
        for i in range(n):
            pool = others[others != i][:CHANCE_OTHERS]
            p_chance[i] = float((box_iou(boxes[i][None, :], boxes[pool]) >= HIT_IOU).mean())
    return right, p_chance


def set_judge(
    keys: np.ndarray,
    in_answer: np.ndarray,
    n: np.ndarray,
    folds: int,
    rng: np.random.Generator,
    smoothing: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Per multi-select item of one task (``n`` options each; ``keys`` and ``in_answer`` one
    per option, items in order): whether the text-only set guess is exactly its answer set,
    and the chance of a random valid set (see the module's docstring)."""
    items = len(n)
    starts = np.r_[0, np.cumsum(n)[:-1]]
    item_of = np.repeat(np.arange(items), n)
    sizes = np.add.reduceat(in_answer.astype(np.int64), starts) if items else np.zeros(0, int)
    share_of_size = Counter(sizes.tolist())
    p_chance = np.array(
        [
            share_of_size[int(k)] / items / math.comb(int(m), int(k))
            for k, m in zip(sizes, n, strict=True)
        ]
    )
    right = np.zeros(items, bool)
    if items < 2 * folds:
        return right, p_chance
    fold = (rng.permutation(items) % folds)[item_of]
    _, code = np.unique(keys, return_inverse=True)
    for k in range(folds):
        train = fold != k
        shown = np.bincount(code[train], minlength=code.max() + 1).astype(float)
        answered = np.bincount(code[train], in_answer[train], minlength=code.max() + 1)
        rate = float(in_answer[train].mean())
        share = (answered + smoothing * rate) / (shown + smoothing)
        size = Counter(sizes[np.unique(item_of[train])].tolist()).most_common()
        top = min(v for v, c in size if c == size[0][1])  # the most common size, the smallest
        for i in np.flatnonzero(np.bincount(item_of[~train], minlength=items)):
            rows = np.arange(starts[i], starts[i] + n[i])
            order = np.argsort(-share[code[rows]], kind="stable")
            guess = np.zeros(n[i], bool)
            guess[order[: max(1, min(top, n[i]))]] = True
            right[i] = bool((guess == in_answer[rows]).all())
    return right, p_chance


class FreeFormAudit:
    """Collects the box answers and the multi-select items of a build (a few numbers each),
    then judges them per task with :func:`box_judge` and :func:`set_judge`."""

    def __init__(self, seed: int):
        self.seed = seed
        self.box_tasks: dict[str, array] = {}
        self.stated: dict[str, array] = {}  # per box item, the box its question writes (NaN)
        self.set_tasks: dict[str, tuple[array, array, array]] = {}

    def add_box(self, task: str, box: tuple[float, float, float, float], question: str) -> None:
        self.box_tasks.setdefault(task, array("d")).extend(float(v) for v in box)
        self.stated.setdefault(task, array("d")).extend(question_box(question))

    def add_choice(self, task: str, keys: list[int], answer: list[int]) -> None:
        """A choice item's option keys and the positions of its correct options (one for a
        single-answer item; a task is judged as multi-select when any of its items has
        several)."""
        k, mask, n = self.set_tasks.setdefault(task, (array("q"), array("b"), array("I")))
        k.extend(keys)
        mask.extend(int(j in answer) for j in range(len(keys)))
        n.append(len(keys))

    def multi_select(self) -> set[str]:
        """The tasks with an item whose answer is several options."""
        out = set()
        for task, (_, mask, n) in self.set_tasks.items():
            m = np.frombuffer(mask, np.int8)
            starts = np.r_[0, np.cumsum(np.frombuffer(n, np.uint32).astype(np.int64))[:-1]]
            if len(m) and (np.add.reduceat(m, starts) > 1).any():
                out.add(task)
        return out

    def judged(self, folds: int, smoothing: float) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
        """``(task, kind, right, chance)`` per judged task."""
        out = []
        for task, flat in sorted(self.box_tasks.items()):
            boxes = np.frombuffer(flat, np.float64).reshape(-1, 4)
            stated = np.frombuffer(self.stated[task], np.float64).reshape(-1, 4)
            rng = rng_for(self.seed, "blind-box", task)
            out.append((task, "box", *box_judge(boxes, folds, rng, stated)))
        for task in sorted(self.multi_select()):
            keys, mask, n = self.set_tasks[task]
            rng = rng_for(self.seed, "blind-sets", task)
            right, chance = set_judge(
                np.frombuffer(keys, np.int64),
                np.frombuffer(mask, np.int8).astype(bool),
                np.frombuffer(n, np.uint32).astype(np.int64),
                folds,
                rng,
                smoothing,
            )
            out.append((task, "multi-select", right, chance))
        return out

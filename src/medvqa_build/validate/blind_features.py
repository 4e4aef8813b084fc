"""What the text-only audit reads from an option beyond its words: the number it states and
the box it writes, and from those the per-option features a shortcut would hide in.

Counting and quantification options are numbers ("2", "More than 4"); grounding options are
boxes ("[x1, y1, x2, y2]", Qwen's ``(x1,y1),(x2,y2)``). A generator that builds them from the
answer can give the answer away by geometry or arithmetic alone: the answer is always the
middle value, the distractors are jittered copies of the answer box (so the answer overlaps
them all and sits at their mean), or the answer is the largest box or the one nearest the
centre. Each such pattern is a column here, taken within the item, so the audit's classifier
learns it when a task has it (issue 32, point 4).
"""

from __future__ import annotations

import re

import numpy as np

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_MORE = re.compile(r"more than|greater than|over|above|>|\+", re.I)
_LESS = re.compile(r"less than|fewer than|under|below|<", re.I)
RANKS = 6  # numeric rank one-hot columns (later ranks share the last)
NAN = float("nan")


def option_number(text: str) -> float:
    """The one number an option states (``More than 4`` is 4.5, ``less than 1`` 0.5); NaN
    when it states none or several."""
    found = _NUMBER.findall(text)
    if len(found) != 1:
        return NAN
    value = float(found[0])
    if _MORE.search(text):
        return value + 0.5
    if _LESS.search(text):
        return value - 0.5
    return value


def option_box(text: str) -> tuple[float, float, float, float]:
    """The box an option writes (its four numbers as x1, y1, x2, y2); NaNs when it does not
    hold exactly four numbers in that order."""
    found = _NUMBER.findall(text)
    if len(found) != 4:
        return (NAN, NAN, NAN, NAN)
    x1, y1, x2, y2 = (float(v) for v in found)
    if not (x1 < x2 and y1 < y2):
        return (NAN, NAN, NAN, NAN)
    return (x1, y1, x2, y2)


def _grid(values: np.ndarray, item: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Rows (one per option) laid out as (items, max options, ...), NaN-padded."""
    starts = np.r_[0, np.cumsum(n)[:-1]]
    slot = np.arange(len(item)) - starts[item]
    grid = np.full((len(n), int(n.max()), *values.shape[1:]), np.nan)
    grid[item, slot] = values
    return grid


def _rows(grid: np.ndarray, item: np.ndarray, n: np.ndarray) -> np.ndarray:
    starts = np.r_[0, np.cumsum(n)[:-1]]
    return grid[item, np.arange(len(item)) - starts[item]]


def _item_all(flags: np.ndarray, item: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Per row: whether every option of its item has ``flags``."""
    per_item = np.logical_and.reduceat(flags, np.r_[0, np.cumsum(n)[:-1]])
    return per_item[item]


def within_item(
    values: np.ndarray, item: np.ndarray, n: np.ndarray, ok: np.ndarray | None = None
) -> list[np.ndarray]:
    """Per row of a measure: centred on its item's mean, its rank among the item's options in
    [0, 1] (ties share the lowest), how far that rank is from the middle, whether it is the
    largest and whether the smallest. All zero in an item where any option lacks the measure
    (NaN), or that ``ok`` leaves out."""
    if ok is None:
        ok = _item_all(~np.isnan(values), item, n)
    grid = _grid(np.where(ok, values, 0.0), item, n)  # NaN only in the padding
    mean = np.nansum(grid, axis=1, keepdims=True) / n[:, None]
    filled = np.where(np.isnan(grid), np.inf, grid)
    less = (filled[:, None, :] < filled[:, :, None]).sum(axis=2)  # options below this one
    rank = less / np.maximum(n[:, None] - 1, 1)
    high = grid == np.where(np.isnan(grid), -np.inf, grid).max(axis=1, keepdims=True)
    low = grid == filled.min(axis=1, keepdims=True)
    columns = [grid - mean, rank, np.abs(rank - 0.5), high, low]
    return [np.where(ok, _rows(np.asarray(c, float), item, n), 0.0) for c in columns]


def number_columns(values: np.ndarray, item: np.ndarray, n: np.ndarray) -> list[np.ndarray]:
    """Numeric options: log value within the item (centred, rank, middle, max, min) and the
    rank as a one-hot (an answer that is always the second smallest is not linear in rank)."""
    ok = _item_all(~np.isnan(values), item, n)
    logged = np.sign(values) * np.log1p(np.abs(values))
    centred, rank, middle, high, low = within_item(logged, item, n, ok)
    position = np.rint(rank * np.maximum(n[item] - 1, 1)).astype(np.int64)
    onehot = np.zeros((len(values), RANKS))
    onehot[np.arange(len(values)), np.minimum(position, RANKS - 1)] = 1.0
    onehot[~ok] = 0.0
    return [centred, rank, middle, high, low, *onehot.T]


def box_columns(
    boxes: np.ndarray, item: np.ndarray, n: np.ndarray, extent: np.ndarray
) -> list[np.ndarray]:
    """Box options: per option its log area, its centre's distance to the image centre, its
    distance to the nearest border, its distance to the mean of the item's other boxes (a
    distractor made as the average of the others, or an answer the distractors were jittered
    around), and its mean and largest IoU with the other boxes; each within the item.
    ``extent`` is the (width, height) each row's image is taken to have."""
    ok = _item_all(~np.isnan(boxes[:, 0]), item, n)
    unit = np.where(ok[:, None], boxes, (0.0, 0.0, 1.0, 1.0)) / np.tile(extent, 2)
    w, h = unit[:, 2] - unit[:, 0], unit[:, 3] - unit[:, 1]
    cx, cy = (unit[:, 0] + unit[:, 2]) / 2, (unit[:, 1] + unit[:, 3]) / 2
    area = np.log(np.maximum(w * h, 1e-9))
    centre = np.hypot(cx - 0.5, cy - 0.5)
    border = np.min(np.stack([unit[:, 0], unit[:, 1], 1 - unit[:, 2], 1 - unit[:, 3]]), axis=0)
    grid = _grid(unit, item, n)  # (items, options, 4), NaN in the padding
    k = n[:, None, None]
    others = (np.nansum(grid, axis=1, keepdims=True) - grid) / np.maximum(k - 1, 1)
    sizes = (grid[..., 2] - grid[..., 0]) * (grid[..., 3] - grid[..., 1])
    side = np.sqrt(np.nansum(sizes, axis=1) / n)
    to_mean = np.linalg.norm(grid - others, axis=2) / np.maximum(side[:, None], 1e-9)
    iou = _pairwise_iou(grid)
    mean_iou = np.nansum(iou, axis=2) / np.maximum(n[:, None] - 1, 1)
    max_iou = np.where(np.isnan(iou), -1.0, iou).max(axis=2)
    measures = [area, centre, border, *(_rows(m, item, n) for m in (to_mean, mean_iou, max_iou))]
    columns = []
    for measure in measures:
        # rounded: boxes of one size are ties whatever the float rounding of their corners
        columns += within_item(np.round(measure, 6), item, n, ok)
    return columns


def _pairwise_iou(grid: np.ndarray) -> np.ndarray:
    """(items, options, options) IoU of each option's box with each other one (NaN on the
    diagonal and for missing boxes)."""
    a, b = grid[:, :, None, :], grid[:, None, :, :]
    iw = np.clip(np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]), 0, None)
    ih = np.clip(np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]), 0, None)
    inter = iw * ih
    area = (grid[..., 2] - grid[..., 0]) * (grid[..., 3] - grid[..., 1])
    union = area[:, :, None] + area[:, None, :] - inter
    iou = inter / np.where(union > 0, union, np.nan)
    diagonal = np.eye(grid.shape[1], dtype=bool)[None]
    return np.where(diagonal, np.nan, iou)


def box_extent(boxes: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per row, the image size a text-only reader can infer: 1 x 1 where every coordinate of
    the group (a source within a task) is at most 1 (normalised boxes), else the largest x2 and
    y2 the group's options write (pixels, or 1000 for norm1000)."""
    out = np.ones((len(boxes), 2))
    for g in np.unique(group):
        mine = (group == g) & ~np.isnan(boxes[:, 0])
        if not mine.any():
            continue
        top = np.nanmax(boxes[mine][:, 2:], axis=0)
        out[group == g] = top if top.max() > 1.0 else (1.0, 1.0)
    return out


def answer_share_columns(
    keys: np.ndarray,
    source: np.ndarray,
    is_answer: np.ndarray,
    fold: np.ndarray,
    item: np.ndarray,
    n: np.ndarray,
    k: int,
    smoothing: float,
) -> list[np.ndarray]:
    """How often each option's text was the answer when it was shown, over the task and within
    the item's source (a source that only holds polyps answers "polyp"), for the model that
    scores fold ``k``: its rows count the other folds, and a training row of fold ``j`` the
    folds other than ``j`` and ``k`` (nested, so a row never counts its own answer). Shares
    are smoothed towards chance by ``smoothing`` pseudo-items; per share, its centred value,
    rank and whether it is the item's largest."""
    folds = int(fold.max()) + 1
    p_chance = float(np.mean(1.0 / n))
    own = np.where(fold != k, fold, -1)
    columns = []
    for group in (np.zeros_like(source), source):
        _, code = np.unique(np.stack([group, keys]), axis=1, return_inverse=True)
        code = code.ravel()
        answered = np.zeros((folds + 1, code.max() + 1))  # the last row stays zero (own = -1)
        shown = np.zeros_like(answered)
        np.add.at(answered, (fold, code), is_answer)
        np.add.at(shown, (fold, code), 1.0)
        a = answered.sum(0)[code] - answered[k, code] - answered[own, code]
        s = shown.sum(0)[code] - shown[k, code] - shown[own, code]
        share = (a + smoothing * p_chance) / (s + smoothing)
        centred, rank, _, high, _ = within_item(share, item, n)
        columns += [centred, rank, high]
    return columns

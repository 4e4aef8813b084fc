"""The text-only (blind) solvability audit: how well a build's items are answered from their
question and options alone, per task against chance.

An item a model answers without looking at the image measures nothing about vision (MMStar,
arXiv 2403.20330). The default judge is a text-only classifier fitted on the build's own
items, cross-validated so that no item is scored by a model that saw it: per option, its
length (and rank of length within the item), how often its text is an option across the
task's items, how often it was the answer when shown (in the training folds, over the task
and within the item's source), its word overlap with the question, its position, and for
numeric and box options their value and geometry (:mod:`.blind_features`). Each option gets a
score, the item's answer is the argmax and its probability the item-wise softmax. With
``blind: {endpoint, model}`` a text-only language model answers instead (:mod:`.blind_llm`).

Free-form grounding items (a box answer, no options) and the tasks with multi-select items are
judged by :mod:`.blind_free` (a mean-box guess, a set guess from the options' answer shares),
each against its own chance, and reported beside the choice tasks with their ``kind``.

:class:`BlindAudit` sees each item once and keeps a few numbers per option, never the item.
"""

from __future__ import annotations

import hashlib
import math
import re
from array import array
from collections.abc import Iterable

import numpy as np

from ..markdown import md_cell
from ..recipe import BlindSpec
from ..records import Item
from ..rng import rng_for
from ..store.packed import PackedStrings
from ..vocab import LETTERS, answer_letters
from .blind_features import (
    answer_share_columns,
    box_columns,
    box_extent,
    number_columns,
    option_box,
    option_number,
)
from .blind_free import FreeFormAudit
from .blind_llm import BlindLLM

SKIPPED = "skipped: install medvqa-build[audit] (scikit-learn) for the blind audit"
POSITIONS = 6  # option positions one-hot encoded (later ones share the last column)
SMOOTHING = 4.0  # pseudo-items at chance in an option text's answer share
SHARES = 6  # the answer-share columns (last in the matrix; their weights kept >= 0)
_WORD = re.compile(r"[0-9a-z]+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold()))


def _option_key(text: str) -> int:
    """Equal options (case and spacing folded) share a key, the same in every process (the
    folds are dealt in the order of the answers' keys)."""
    digest = hashlib.blake2b(" ".join(text.casefold().split()).encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "little", signed=True)


class BlindAudit:
    """Feed it every item (:meth:`add`), then :meth:`finish` for the per-task report.

    Single-answer multiple-choice items go to the classifier (or the language model: in LLM
    mode each item is asked as it is added, answers cached on disk); free-form box answers
    and the tasks with multi-select items to :class:`~.blind_free.FreeFormAudit`.
    """

    def __init__(self, spec: BlindSpec, seed: int):
        self.spec, self.seed = spec, seed
        self.llm = BlindLLM(spec, seed) if spec.uses_llm else None
        self.ids = PackedStrings()
        self.task_names: list[str] = []
        self._task_code: dict[str, int] = {}
        self._source_code: dict[str, int] = {}
        self.tasks, self.n_options, self.answers = array("I"), array("B"), array("b")
        self.sources = array("I")
        self.lengths, self.overlaps, self.keys = array("I"), array("f"), array("q")
        self.numbers, self.boxes = array("d"), array("d")  # per option; NaN: none
        self.picked, self.probability = array("b"), array("f")  # LLM mode
        self.free = FreeFormAudit(seed)

    def add(self, item: Item) -> None:
        n = len(item.options)
        if n < 2:
            if item.answer_bbox is not None:
                self.free.add_box(item.task, item.answer_bbox, item.question)
            return
        letters = answer_letters(item.answer)
        if not letters or any(x not in LETTERS[: min(n, 255)] for x in letters):
            return
        self.free.add_choice(
            item.task,
            [_option_key(o) for o in item.options[:255]],
            [LETTERS.index(x) for x in letters],
        )
        if len(letters) != 1:
            return
        code = self._task_code.get(item.task)
        if code is None:
            code = self._task_code[item.task] = len(self.task_names)
            self.task_names.append(item.task)
        self.ids.append(item.item_id)
        self.tasks.append(code)
        self.n_options.append(min(n, 255))
        self.answers.append(LETTERS.index(letters[0]))
        self.sources.append(self._source_code.setdefault(item.source, len(self._source_code)))
        question = _words(item.question)
        for option in item.options[:255]:
            words = _words(option)
            self.lengths.append(len(option))
            self.overlaps.append(len(words & question) / max(1, len(words)))
            self.keys.append(_option_key(option))
            self.numbers.append(option_number(option))
            self.boxes.extend(option_box(option))
        if self.llm is not None:
            picked, p = self.llm.answer(item.question, item.options)
            self.picked.append(picked)
            self.probability.append(p)

    @property
    def method(self) -> str:
        return f"language model {self.spec.model}" if self.llm else "cross-validated classifier"

    def add_all(self, items: Iterable[Item]) -> BlindAudit:
        for item in items:
            self.add(item)
        return self

    def judge(self) -> tuple[np.ndarray, np.ndarray] | str:
        """Per audited item (item order): the option the judge picks (-1: none) and its
        probability; or why the audit was skipped."""
        if self.llm is not None:
            picked = np.frombuffer(self.picked, np.int8).astype(np.int64)
            return picked, np.frombuffer(self.probability, np.float32).astype(np.float64)
        try:
            from .blind_sklearn import out_of_fold_scores
        except ImportError:
            return SKIPPED
        return self._classify(out_of_fold_scores)

    def report(self) -> dict:
        """The audit: per task, items audited, blind accuracy, chance (mean 1/options), z,
        the verdict and how many items were answered right with probability >=
        ``threshold``; and those items (``confident``)."""
        spec = self.spec
        doc: dict = {
            "method": self.method,
            "threshold": spec.threshold,
            "margin": spec.margin,
            "min_z": spec.min_z,
        }
        judged = self.judge() if len(self.tasks) else (np.zeros(0, np.int64), np.zeros(0))
        if isinstance(judged, str):
            return {**doc, "status": judged, "items": 0, "tasks": [], "confident": []}
        picked, prob = judged
        tasks = np.frombuffer(self.tasks, np.uint32)
        p_chance = 1.0 / np.frombuffer(self.n_options, np.uint8)
        right = picked == np.frombuffer(self.answers, np.int8)
        sure = right & (prob >= spec.threshold)
        rows, confident = [], []
        multi = self.free.multi_select()
        for task, kind, hit, chance in self.free.judged(spec.folds, SMOOTHING):
            rows.append(_task_row(task, hit, chance, 0, spec) | {"kind": kind})
        for code, task in sorted(enumerate(self.task_names), key=lambda kv: kv[1]):
            if task in multi:  # judged as multi-select above, all its items
                continue
            mine = tasks == code
            rows.append(_task_row(task, right[mine], p_chance[mine], int(sure[mine].sum()), spec))
            confident += [
                {
                    "item_id": self.ids[k],
                    "task": task,
                    "answer": LETTERS[self.answers[k]],
                    "probability": round(float(prob[k]), 4),
                }
                for k in np.flatnonzero(mine & sure).tolist()
            ]
        rows.sort(key=lambda row: row["task"])
        items = sum(row["items"] for row in rows)
        return {**doc, "status": "ok", "items": items, "tasks": rows, "confident": confident}

    def _classify(self, out_of_fold_scores) -> tuple[np.ndarray, np.ndarray]:
        """Per item, the option with the highest out-of-fold score and its softmax share."""
        n = np.frombuffer(self.n_options, np.uint8).astype(np.int64)
        starts = np.r_[0, np.cumsum(n)[:-1]]
        item_of_row = np.repeat(np.arange(len(n)), n)
        tasks = np.frombuffer(self.tasks, np.uint32)
        answers = np.frombuffer(self.answers, np.int8).astype(np.int64)
        keys = np.frombuffer(self.keys, np.int64)
        sources = np.frombuffer(self.sources, np.uint32).astype(np.int64)
        scores = np.zeros(len(item_of_row))
        for code, name in sorted(enumerate(self.task_names), key=lambda kv: kv[1]):
            items = np.flatnonzero(tasks == code)
            if len(items) < 2 * self.spec.folds:
                continue  # too few to cross-validate: every option scores alike
            local_item = np.repeat(np.arange(len(items)), n[items])
            rows = starts[items][local_item] + np.arange(len(local_item))
            rows -= _item_start(n[items])[local_item]  # each item's rows, in item order
            base = self._features(rows, local_item, n[items], sources[items][local_item])
            y = (rows - starts[item_of_row[rows]] == answers[item_of_row[rows]]).astype(int)
            truth = keys[starts[items] + answers[items]]
            rng = rng_for(self.seed, "blind", name)
            fold = _folds(answers[items], truth, self.spec.folds, rng)[local_item]
            shares = (keys[rows], sources[items][local_item], y, fold, local_item, n[items])

            def features(k: int, base=base, shares=shares) -> np.ndarray:
                return np.column_stack([base, *answer_share_columns(*shares, k, SMOOTHING)])

            scores[rows] = out_of_fold_scores(features, y, fold, self.spec.folds, SHARES)
        grid = np.full((len(n), int(n.max())), -np.inf)  # one row per item, its options
        grid[item_of_row, np.arange(len(item_of_row)) - starts[item_of_row]] = scores
        picked = np.argmax(grid, axis=1)
        e = np.exp(grid - grid.max(axis=1, keepdims=True))
        prob = e[np.arange(len(n)), picked] / e.sum(axis=1)
        return picked, prob

    def _features(
        self, rows: np.ndarray, item: np.ndarray, n: np.ndarray, source: np.ndarray
    ) -> np.ndarray:
        """The option rows of one task's items as a feature matrix (one row per option); the
        columns that depend on the folds are added by :func:`answer_share_columns`."""
        length = np.frombuffer(self.lengths, np.uint32)[rows].astype(np.float64)
        overlap = np.frombuffer(self.overlaps, np.float32)[rows].astype(np.float64)
        keys = np.frombuffer(self.keys, np.int64)[rows]
        _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
        frequency = counts[inverse] / len(n)  # share of the task's items showing this text
        position = np.arange(len(rows)) - _item_start(n)[item]
        length_rank, longest, shortest = _rank_within(length, item, n)
        freq_rank, most_frequent, least_frequent = _rank_within(frequency, item, n)
        boxes = np.frombuffer(self.boxes, np.float64).reshape(-1, 4)[rows]
        columns = [
            _centred(length, item, n) / (_item_mean(length, item, n)[item] + 1.0),
            length_rank,
            longest,
            shortest,
            _centred(frequency, item, n),
            freq_rank,
            most_frequent,
            least_frequent,
            _centred(overlap, item, n),
            *number_columns(np.frombuffer(self.numbers, np.float64)[rows], item, n),
            *box_columns(boxes, item, n, box_extent(boxes, source)),
        ]
        onehot = np.zeros((len(rows), POSITIONS))
        onehot[np.arange(len(rows)), np.minimum(position, POSITIONS - 1)] = 1.0
        return np.column_stack([*columns, onehot])


def _folds(
    answers: np.ndarray, truths: np.ndarray, folds: int, rng: np.random.Generator
) -> np.ndarray:
    """A fold per item, stratified by the answer's position and then its text: every fold
    has the task's letter and (nearly) its answer shares, so a model cannot learn from its
    training folds the letters or answers their test fold lacks (with balanced letters and
    classes, random folds make that anti-learning push the blind accuracy below chance)."""
    _, truth_rank = np.unique(truths, return_inverse=True)
    order = np.lexsort((rng.permutation(len(answers)), truth_rank, answers))
    fold = np.empty(len(answers), np.int64)
    fold[order] = np.arange(len(answers)) % folds
    return fold


def _item_start(n: np.ndarray) -> np.ndarray:
    return np.r_[0, np.cumsum(n)[:-1]]


def _item_mean(values: np.ndarray, item: np.ndarray, n: np.ndarray) -> np.ndarray:
    return np.add.reduceat(values, _item_start(n)) / n


def _centred(values: np.ndarray, item: np.ndarray, n: np.ndarray) -> np.ndarray:
    return values - _item_mean(values, item, n)[item]


def _rank_within(
    values: np.ndarray, item: np.ndarray, n: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: its rank among its item's options scaled to [0, 1] (ties share their mean
    rank), whether it is (one of) the item's largest, and (one of) its smallest."""
    order = np.lexsort((values, item))
    v, it = values[order], item[order]
    new = np.r_[True, (v[1:] != v[:-1]) | (it[1:] != it[:-1])]
    group_start = np.maximum.accumulate(np.where(new, np.arange(len(v)), 0))
    end_marks = np.r_[new[1:], True]
    group_end = np.minimum.accumulate(np.where(end_marks, np.arange(len(v)), len(v))[::-1])[::-1]
    first = _item_start(n)[it]
    last = first + n[it] - 1
    less, equal = group_start - first, group_end - group_start + 1
    rank = (less + (equal - 1) / 2) / np.maximum(n[it] - 1, 1)
    out = np.empty((3, len(v)))
    out[0, order], out[1, order], out[2, order] = rank, group_end == last, less == 0
    return out[0], out[1], out[2]


def _task_row(
    task: str, right: np.ndarray, p_chance: np.ndarray, confident: int, spec: BlindSpec
) -> dict:
    n = len(right)
    accuracy, chance = float(right.mean()), float(p_chance.mean())
    var = float((p_chance * (1 - p_chance)).sum())
    # no variance (a box no other answer overlaps: chance 0): each hit counts as one error
    z = (float(right.sum()) - float(p_chance.sum())) / math.sqrt(var if var > 0 else 1.0)
    enough = n >= spec.min_items
    flagged = enough and accuracy - chance > spec.margin and z > spec.min_z
    if flagged:
        verdict = "answerable without the image"
    else:
        verdict = "near chance" if enough else f"too few items (< {spec.min_items})"
    return {
        "task": task,
        "kind": "choice",
        "items": n,
        "accuracy": round(accuracy, 4),
        "chance": round(chance, 4),
        "z": round(z, 2),
        "confident": confident,
        "flagged": flagged,
        "verdict": verdict,
    }


def run_audit(items: Iterable[Item], spec: BlindSpec, seed: int) -> dict:
    """The audit of ``items`` (read once), as :meth:`BlindAudit.report` gives it."""
    return BlindAudit(spec, seed).add_all(items).report()


def blind_table(report: dict, *, heading: str = "##") -> list[str]:
    """The audit as Markdown lines: one row per task, flagged tasks in bold."""
    lines = [
        f"{heading} Text-only (blind) audit",
        "",
        f"How well a text-only judge ({report['method']}) answers each item from its question "
        "and options alone, without the image (docs/blind_audit.md). A task is flagged when "
        f"its blind accuracy exceeds chance by more than {report['margin']:.0%} and by more "
        f"than {report['min_z']:g} standard errors; an item counts as answered confidently "
        "at probability >= "
        f"{report['threshold']}. Free-form box tasks (box) are guessed with the mean answer "
        "box of the other items or the box the question writes (a hit at IoU >= 0.5; chance: "
        "another item's answer box), "
        "multi-select tasks with the options most often in the answer (exact set; chance: a "
        "random set of a size the task's answers take).",
        "",
    ]
    if report["status"] != "ok":
        return lines + [f"Audit {report['status']}.", ""]
    lines += [
        "| task | items | blind accuracy | chance | z | answered confidently | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in report["tasks"]:
        verdict = f"**{t['verdict']}**" if t["flagged"] else t["verdict"]
        kind = t.get("kind", "choice")
        task = t["task"] if kind == "choice" else f"{t['task']} ({kind})"
        lines.append(
            f"| {md_cell(task)} | {t['items']} | {t['accuracy']:.1%} | {t['chance']:.1%} | "
            f"{t['z']:.1f} | {t['confident']} | {verdict} |"
        )
    return lines + [""]


def blind_summary(report: dict) -> dict:
    """The report without its item list (what the validate stage's stats and the card hold)."""
    return {k: v for k, v in report.items() if k != "confident"} | {
        "confident": len(report.get("confident", []))
    }

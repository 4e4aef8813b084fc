"""Checks every item on its own terms: options, answer, images, geometry; and the build as a
whole: unique ids, answer-letter balance per task. Checks re-read the files; they do not
trust the stage that wrote them."""

from __future__ import annotations

import string
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from ..geometry import box_problem
from ..media.image import ImageProblem, check_image
from ..records import Item

LETTERS = string.ascii_uppercase


@dataclass(frozen=True)
class Problem:
    item_id: str
    check: str
    message: str

    def to_dict(self) -> dict:
        return asdict(self)


def _answer_letters(answer: str) -> list[str]:
    return [a.strip() for a in answer.split(",") if a.strip()]


def check_item(item: Item, resolve: Callable[[str], Path]) -> list[Problem]:
    out: list[Problem] = []

    def bad(check: str, message: str) -> None:
        out.append(Problem(item.item_id, check, message))

    n = len(item.options)
    if n < 2:
        bad("options", f"{n} option(s); an MCQ needs at least 2")
    folded = [o.casefold().strip() for o in item.options]
    if len(set(folded)) != n:
        bad("options", f"duplicate options {list(item.options)}")
    if any(not o.strip() for o in item.options):
        bad("options", "an option is empty")
    letters = _answer_letters(item.answer)
    if not letters or any(a not in LETTERS[:n] for a in letters):
        bad("answer", f"answer {item.answer!r} is not among the letters {LETTERS[:n]}")
    elif len(letters) == 1 and item.options[LETTERS.index(letters[0])] != item.gt:
        shown = item.options[LETTERS.index(letters[0])]
        bad("answer", f"option {letters[0]} is {shown!r}, gt is {item.gt!r}")
    if not item.question.strip():
        bad("question", "empty question")
    if "{" in item.question or "}" in item.question:
        bad("question", f"unfilled template slot in {item.question!r}")
    if not item.images:
        bad("images", "no image")
    sizes = []
    for ref in item.images:
        try:
            sizes.append(check_image(resolve(ref)))
        except (ImageProblem, KeyError) as exc:
            bad("images", f"{ref}: {exc}")
            sizes.append(None)
    for shape in item.prompt_geometry:
        size = sizes[shape.image_index] if shape.image_index < len(sizes) else None
        if size is None:
            bad("geometry", f"shape on image {shape.image_index}, which is missing")
        elif shape.bbox is not None and (problem := box_problem(shape.bbox, *size)):
            bad("geometry", problem)
    return out


def check_items(items: Iterable[Item], resolve: Callable[[str], Path]) -> list[Problem]:
    """Shared ids first, then each item's problems in item order (one pass over ``items``)."""
    ids: Counter[str] = Counter()
    per_item: list[Problem] = []
    for item in items:
        ids[item.item_id] += 1
        per_item.extend(check_item(item, resolve))
    problems = [
        Problem(item_id, "item_id", f"{count} items share this id")
        for item_id, count in sorted(ids.items())
        if count > 1
    ]
    return problems + per_item


class LetterTally:
    """Per task, how often each letter is the answer, counted item by item."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter] = defaultdict(Counter)

    def add(self, item: Item) -> None:
        for letter in _answer_letters(item.answer):
            self.counts[item.task][letter] += 1

    def histogram(self) -> dict[str, dict[str, int]]:
        return {task: dict(sorted(c.items())) for task, c in sorted(self.counts.items())}


def letter_histogram(items: Iterable[Item]) -> dict[str, dict[str, int]]:
    """Per task, how often each letter is the answer (one pass, counts only)."""
    tally = LetterTally()
    for item in items:
        tally.add(item)
    return tally.histogram()

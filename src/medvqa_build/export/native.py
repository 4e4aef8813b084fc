"""Benchmark-native layouts, for code written against the released benchmarks.

* ``medsg``: MedSG-Bench's ``TaskN.json`` + ``TaskN/<image>`` (one N per task family, listed
  in ``tasks.json``). A MedSG-Bench task keeps its own number and spelling (Task1 =
  ``Registered_Diff`` .. Task8 = ``referring``, matched case- and separator-blind); any other
  task follows as Task9, Task10, ... in sorted order. Records ``task, images, question, answer``
  with ``answer`` = ``[x1, y1, x2, y2]`` integer pixels of the last image and ``size`` =
  ``[width, height]`` of that image; MCQ items also carry ``options`` and a letter ``answer``.
* ``spinebench``: one ``<name>.json`` list of ``image, task, question, options, answers``
  (``answers`` = the correct option texts, a list as SpineBench's multi-select localisation
  needs) + ``images/``; box-answer items are left out.
"""

from __future__ import annotations

from ..errors import UsageError
from ..geometry import xyxy_to_abs
from ..records import Item
from ..vocab import LETTERS, answer_letters
from .base import EXPORTERS, Exporter
from .common import check_export_name, column_values, is_grounding, is_mcq, slug

# MedSG-Bench's task keys, Task1..Task8 (its JSON ``task`` field, spelled as released)
MEDSG_TASKS = (
    "Registered_Diff",
    "Non_Registered_Diff",
    "multi_view",
    "object_tracking",
    "concept",
    "patch",
    "crossmodal",
    "referring",
)


def medsg_numbering(tasks: set[str]) -> dict[str, tuple[int, str]]:
    """``task -> (N, key)``: MedSG-Bench's number and spelling for its own tasks, then the
    others from 9 on, sorted, keyed by their slug."""
    known = {slug(t): (n, t) for n, t in enumerate(MEDSG_TASKS, start=1)}
    number = {t: known[slug(t)] for t in tasks if slug(t) in known}
    taken: dict[int, str] = {}
    for task, (n, _) in sorted(number.items()):
        if n in taken:
            raise UsageError(
                f"tasks {taken[n]!r} and {task!r} both name MedSG-Bench's Task{n}",
                fix="rename one of the tasks in the recipe",
            )
        taken[n] = task
    others = sorted(t for t in tasks if t not in number)
    for n, task in enumerate(others, start=len(MEDSG_TASKS) + 1):
        number[task] = (n, slug(task))
    return number


@EXPORTERS.register("medsg")
class MedSG(Exporter):
    """A pass for the task names, then every ``TaskN.json`` filled at once."""

    def start(self) -> None:
        self.numbering = medsg_numbering(set(column_values(self.ctx.items, "task")))
        self.number = {task: n for task, (n, _) in self.numbering.items()}
        self.files = {task: self.json_list(f"Task{n}.json") for task, n in self.number.items()}

    def write(self, item: Item) -> None:
        n = self.number[item.task]
        images = [self.image(ref, folder=f"Task{n}") for ref in item.images]
        w, h = self.images.size(item.images[-1])
        record = {"task": self.numbering[item.task][1], "images": images, "question": item.question}
        if is_grounding(item):
            record["answer"] = list(xyxy_to_abs(item.answer_bbox, w, h))
        else:
            record["options"] = list(item.options)
            record["answer"] = item.answer
        record["size"] = [w, h]
        self.files[item.task].append(record)

    def finish(self) -> dict:
        index = {}
        for task, n in sorted(self.number.items(), key=lambda kv: kv[1]):
            index[f"Task{n}"] = {
                "task": self.numbering[task][1],
                "name": task,
                "items": self.files[task].count,
            }
        self.write_json("tasks.json", index)
        return {"tasks": index}


@EXPORTERS.register("spinebench")
class SpineBench(Exporter):
    """One JSON list of the multiple-choice items; box-answer items are left out."""

    holds = "multiple-choice"

    def leave_out(self, item: Item) -> str | None:
        return None if is_mcq(item) else "not multiple-choice"

    def start(self) -> None:
        self.records = self.json_list(f"{check_export_name(self.ctx.name)}.json")

    def write(self, item: Item) -> None:
        images = [self.image(ref) for ref in item.images]
        record = {
            "image": images[0],
            "task": slug(item.task),
            "question": item.question,
            "options": list(item.options),
            "answers": [item.options[LETTERS.index(a)] for a in answer_letters(item.answer)],
            "answer": item.answer,
        }
        if len(images) > 1:
            record["images"] = images
        self.records.append(record)

    def finish(self) -> dict:
        return {"records": self.records.count}

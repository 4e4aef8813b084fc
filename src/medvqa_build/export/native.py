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

from pathlib import Path

from ..errors import UsageError
from ..geometry import xyxy_to_abs
from ..vocab import LETTERS, answer_letters
from .base import EXPORTERS, ExportContext
from .common import (
    ImageCopier,
    JsonListWriter,
    check_export_name,
    column_values,
    is_grounding,
    is_mcq,
    require_items,
    slug,
    write_json,
)

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
def export_medsg(ctx: ExportContext, out: Path) -> dict:
    """One pass for the task names, one to write: every ``TaskN.json`` is filled at once."""
    copier = ImageCopier(out, ctx.resolve)
    numbering = medsg_numbering(set(column_values(ctx.items, "task")))
    number = {task: n for task, (n, _) in numbering.items()}
    files = {task: JsonListWriter(out / f"Task{n}.json") for task, n in number.items()}
    try:
        for item in ctx.items:
            n = number[item.task]
            images = [copier(ref, folder=f"Task{n}") for ref in item.images]
            w, h = copier.size(item.images[-1])
            record = {"task": numbering[item.task][1], "images": images, "question": item.question}
            if is_grounding(item):
                record["answer"] = list(xyxy_to_abs(item.answer_bbox, w, h))
            else:
                record["options"] = list(item.options)
                record["answer"] = item.answer
            record["size"] = [w, h]
            files[item.task].append(record)
    except BaseException:
        for f in files.values():
            f.abort()
        raise
    index = {}
    for task, n in sorted(number.items(), key=lambda kv: kv[1]):
        files[task].close()
        index[f"Task{n}"] = {
            "task": numbering[task][1],
            "name": task,
            "items": files[task].count,
        }
    write_json(out / "tasks.json", index)
    return {"tasks": index}


@EXPORTERS.register("spinebench")
def export_spinebench(ctx: ExportContext, out: Path) -> dict:
    name = check_export_name(ctx.name)
    items = require_items(ctx.items, "spinebench", is_mcq, "multiple-choice")
    copier = ImageCopier(out, ctx.resolve)
    total = 0
    with JsonListWriter(out / f"{name}.json") as records:  # written record by record
        for item in ctx.items:
            total += 1
            if not items.keep(item):
                continue
            images = [copier(ref) for ref in item.images]
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
            records.append(record)
    return {"records": records.count, "left_out_not_mcq": total - records.count}

"""Benchmark-native layouts, for code written against the released benchmarks.

* ``medsg``: MedSG-Bench's ``TaskN.json`` + ``TaskN/<image>`` (one N per task family, in
  sorted task order, listed in ``tasks.json``). Records ``task, images, question, answer``
  with ``answer`` = ``[x1, y1, x2, y2]`` integer pixels of the last image and ``size`` =
  ``[width, height]`` of that image; MCQ items also carry ``options`` and a letter ``answer``.
* ``spinebench``: one ``<name>.json`` list of ``image, task, question, options, answers``
  (``answers`` = the correct option texts, a list as SpineBench's multi-select localisation
  needs) + ``images/``; box-answer items are left out.
"""

from __future__ import annotations

from pathlib import Path

from ..geometry import xyxy_to_abs
from .base import EXPORTERS, ExportContext
from .common import (
    LETTERS,
    ImageCopier,
    answer_letters,
    check_export_name,
    is_grounding,
    is_mcq,
    require_items,
    slug,
    write_json,
)


@EXPORTERS.register("medsg")
def export_medsg(ctx: ExportContext, out: Path) -> dict:
    copier = ImageCopier(out, ctx.resolve)
    tasks = sorted({i.task for i in ctx.items})
    index = {}
    for n, task in enumerate(tasks, start=1):
        records = []
        for item in (i for i in ctx.items if i.task == task):
            images = [copier(ref, folder=f"Task{n}") for ref in item.images]
            w, h = copier.size(item.images[-1])
            record = {"task": slug(task), "images": images, "question": item.question}
            if is_grounding(item):
                record["answer"] = list(xyxy_to_abs(item.answer_bbox, w, h))
            else:
                record["options"] = list(item.options)
                record["answer"] = item.answer
            record["size"] = [w, h]
            records.append(record)
        write_json(out / f"Task{n}.json", records)
        index[f"Task{n}"] = {"task": task, "items": len(records)}
    write_json(out / "tasks.json", index)
    return {"tasks": index}


@EXPORTERS.register("spinebench")
def export_spinebench(ctx: ExportContext, out: Path) -> dict:
    name = check_export_name(ctx.name)
    items = require_items(ctx.items, "spinebench", is_mcq, "multiple-choice")
    copier = ImageCopier(out, ctx.resolve)
    records = []
    for item in items:
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
    write_json(out / f"{name}.json", records)
    return {"records": len(records), "left_out_not_mcq": len(ctx.items) - len(items)}

"""VLMEvalKit MCQ TSV (EndoBench's columns + ``l2-category``): base64 images, one option
column per letter, ``l2-category`` = task so stock VLMEvalKit reports per task."""

from __future__ import annotations

import base64
import csv
import string
from pathlib import Path

from .base import EXPORTERS, ExportContext

LETTERS = string.ascii_uppercase


@EXPORTERS.register("vlmeval")
def export_vlmeval(ctx: ExportContext, out: Path) -> dict:
    """Write ``out/<name>.tsv``; returns counts. Questions and options never contain tabs/newlines."""
    items, resolve, name = ctx.items, ctx.resolve, ctx.name
    n_opt = max((len(i.options) for i in items), default=4)
    letters = list(LETTERS[:n_opt])
    columns = ["index", "image", "image_path", "question", *letters, "answer", "category",
               "l2-category", "task", "subtask", "scene", "dataset", "gt"]
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.tsv"
    tmp = path.with_name(f".{path.name}.tmp")

    def clean(text: str | None) -> str:
        return " ".join((text or "").split())

    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
        writer.writerow(columns)
        for index, item in enumerate(items):
            encoded = [base64.b64encode(resolve(ref).read_bytes()).decode("ascii") for ref in item.images]
            suffix = Path(item.images[0]).suffix or ".jpg"
            if len(encoded) == 1:
                image, image_path = encoded[0], f"{name}_{index}{suffix}"
            else:
                image = repr(encoded)
                image_path = repr([f"{name}_{index}_{k}{suffix}" for k in range(len(encoded))])
            options = [clean(item.options[k]) if k < len(item.options) else "" for k in range(n_opt)]
            writer.writerow([index, image, image_path, clean(item.question), *options, item.answer,
                             item.category, item.task, item.task, item.subtask, item.scene or "",
                             item.source, clean(item.gt)])
    tmp.replace(path)
    return {"rows": len(items), "path": path.name}

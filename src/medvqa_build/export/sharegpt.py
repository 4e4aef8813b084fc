"""LLaMA-Factory instruction data (sharegpt format): ``<name>.json``, ``dataset_info.json`` and
``images/`` (copies named by content).

One ``<image>`` placeholder per image, at the start of the human turn, in image order.
MCQ answers are ``"B. polyp"`` (or only the letter with ``answer: letter``); box answers are
written in the recipe's ``convention`` (``abs``, ``norm1000``, ``norm1``, or ``qwen``:
``<|object_ref_start|>gt<|object_ref_end|><|box_start|>(x1,y1),(x2,y2)<|box_end|>``).

``file_name`` and the image paths are relative to the export folder, which is what
LLaMA-Factory resolves them against when its ``dataset_dir`` (and so ``media_dir``) is that
folder (docs/exports.md).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from ..geometry import format_box
from ..records import Item
from ..vocab import COORD_FORMATS, LETTERS, answer_letters
from .base import EXPORTERS, ExportContext
from .common import (
    ImageCopier,
    JsonListWriter,
    check_export_name,
    is_grounding,
    option_block,
    write_json,
)

MCQ_SUFFIX = "Answer with the option's letter from the given choices directly."


def _answer(item: Item, convention: str, size_wh: tuple[int, int], style: str) -> str:
    if is_grounding(item):
        box = format_box(item.answer_bbox, convention, *size_wh)
        if convention == "qwen":
            return f"<|object_ref_start|>{item.gt}<|object_ref_end|>{box}"
        return box
    letters = answer_letters(item.answer)
    if style == "letter":
        return ",".join(letters)
    return "; ".join(f"{a}. {item.options[LETTERS.index(a)]}" for a in letters)


def _prompt(item: Item, convention: str) -> str:
    if is_grounding(item):
        hint = {
            "abs": "in pixels as [x1, y1, x2, y2]",
            "norm1000": "as [x1, y1, x2, y2] in 0-1000",
            "norm1": "as [x1, y1, x2, y2] in 0-1",
            "qwen": "as a box",
        }[convention]
        return f"{item.question}\nAnswer with the bounding box {hint}."
    return f"{item.question}\n{option_block(item.options)}\n{MCQ_SUFFIX}"


@EXPORTERS.register("sharegpt")
def export_sharegpt(ctx: ExportContext, out: Path) -> dict:
    """Options: ``convention`` (box text, default: each item's coord_format or ``abs``),
    ``answer`` (``letter_text`` default, or ``letter``)."""
    name = check_export_name(ctx.name)
    convention = ctx.options.get("convention")
    if convention is not None and convention not in COORD_FORMATS:
        raise UsageError(
            f"sharegpt convention {convention!r} is unknown",
            fix=f"use one of {', '.join(COORD_FORMATS)}",
        )
    style = ctx.options.get("answer", "letter_text")
    copier = ImageCopier(out, ctx.resolve)
    out.mkdir(parents=True, exist_ok=True)
    with JsonListWriter(out / f"{name}.json") as records:  # written record by record
        for item in ctx.items:
            conv = convention or item.coord_format or "abs"
            if "<image>" in item.question or any("<image>" in o for o in item.options):
                raise UsageError(
                    f"item {item.item_id} contains the text '<image>', which LLaMA-Factory "
                    "reads as an image placeholder",
                    fix="change the template or option text",
                )
            images = [copier(ref) for ref in item.images]
            size = copier.size(item.images[-1])
            human = "<image>" * len(images) + _prompt(item, conv)
            records.append(
                {
                    "id": item.item_id,
                    "conversations": [
                        {"from": "human", "value": human},
                        {"from": "gpt", "value": _answer(item, conv, size, style)},
                    ],
                    "images": images,
                    "task": item.task,
                }
            )
    write_json(
        out / "dataset_info.json",
        {
            name: {
                "file_name": f"{name}.json",
                "formatting": "sharegpt",
                "columns": {"messages": "conversations", "images": "images"},
                "tags": {
                    "role_tag": "from",
                    "content_tag": "value",
                    "user_tag": "human",
                    "assistant_tag": "gpt",
                },
            }
        },
    )
    return {"records": records.count, "images": copier.written}

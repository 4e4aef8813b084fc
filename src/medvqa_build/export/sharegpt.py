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

from ..errors import UsageError
from ..geometry import format_box
from ..records import Item
from ..vocab import COORD_FORMATS, LETTERS, answer_letters
from .base import EXPORTERS, Exporter
from .common import check_export_name, is_grounding, option_block

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
class ShareGPT(Exporter):
    """Options: ``convention`` (box text, default: each item's coord_format or ``abs``),
    ``answer`` (``letter_text`` default, or ``letter``)."""

    def start(self) -> None:
        self.name = check_export_name(self.ctx.name)
        self.convention = self.options.get("convention")
        if self.convention is not None and self.convention not in COORD_FORMATS:
            raise UsageError(
                f"sharegpt convention {self.convention!r} is unknown",
                fix=f"use one of {', '.join(COORD_FORMATS)}",
            )
        self.style = self.options.get("answer", "letter_text")
        self.records = self.json_list(f"{self.name}.json")  # written record by record

    def write(self, item: Item) -> None:
        conv = self.convention or item.coord_format or "abs"
        if "<image>" in item.question or any("<image>" in o for o in item.options):
            raise UsageError(
                f"item {item.item_id} contains the text '<image>', which LLaMA-Factory "
                "reads as an image placeholder",
                fix="change the template or option text",
            )
        images = [self.image(ref) for ref in item.images]
        size = self.images.size(item.images[-1])
        human = "<image>" * len(images) + _prompt(item, conv)
        self.records.append(
            {
                "id": item.item_id,
                "conversations": [
                    {"from": "human", "value": human},
                    {"from": "gpt", "value": _answer(item, conv, size, self.style)},
                ],
                "images": images,
                "task": item.task,
            }
        )

    def finish(self) -> dict:
        name = self.name
        self.write_json(
            "dataset_info.json",
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
        return {"records": self.records.count, "images": self.images.written}

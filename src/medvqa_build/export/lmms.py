"""lmms-eval tasks over the HF export: ``<name>_mcq.yaml`` and ``<name>_grounding.yaml`` (when
the build has such items) plus ``utils.py`` (:mod:`.lmms_utils`). Copy the folder into
``lmms_eval/tasks/`` or pass it with ``--include_path``.

``dataset_path`` is the Hub repo id of the pushed HF export (option ``dataset_path``,
default the export name); ``dataset_name`` is the ``all`` config.

Multiple choice reports exact match (``accuracy``) and set ``precision``/``recall``/``f1``;
the tasks with multi-select items are written into ``utils.py``'s ``MULTI_SELECT_TASKS`` so
every letter of a reply counts there. Grounding sets ``process_results_use_image: true``:
lmms-eval drops image columns before ``process_results`` otherwise, and the IoU needs the
image size.
"""

from __future__ import annotations

import json

from ..records import Item
from .base import EXPORTERS, Exporter
from .common import check_export_name, is_grounding, is_mcq, slug, standalone_source

MCQ_POST = "\nAnswer with the option's letter from the given choices directly."
BOX_POST = "\nAnswer with the bounding box of the target as [x1, y1, x2, y2] in pixels."


def _yaml(task: str, dataset_path: str, split: str, kind: str) -> str:
    if kind == "mcq":
        docs, post, results, tokens = "mcq_docs", MCQ_POST, "mcq_process_results", 16
        metrics = [("accuracy", True), ("precision", True), ("recall", True), ("f1", True)]
    else:
        docs, post, results, tokens = "grounding_docs", BOX_POST, "grounding_process_results", 64
        metrics = [("iou", True), ("acc_at_0.3", True), ("acc_at_0.5", True), ("acc_at_0.7", True)]
    lines = [
        f"task: {task}",
        f"dataset_path: {dataset_path}",
        "dataset_name: all",
        f"test_split: {split}",
        "output_type: generate_until",
        f"process_docs: !function utils.{docs}",
        "doc_to_visual: !function utils.doc_to_visual",
        "doc_to_text: !function utils.doc_to_text",
        "doc_to_target: answer" if kind == "mcq" else "doc_to_target: answer_bbox",
        "generation_kwargs:",
        f"  max_new_tokens: {tokens}",
        "  temperature: 0",
        "  do_sample: false",
        f"process_results: !function utils.{results}",
    ]
    if kind == "grounding":
        lines.append("process_results_use_image: true")
    lines.append("metric_list:")
    for metric, higher in metrics:
        lines += [
            f"  - metric: {metric}",
            "    aggregation: mean",
            f"    higher_is_better: {str(higher).lower()}",
        ]
    lines += [
        "lmms_eval_specific_kwargs:",
        "  default:",
        '    pre_prompt: ""',
        f"    post_prompt: {json.dumps(post)}",
        "metadata:",
        "  version: 0.0",
        "",
    ]
    return "\n".join(lines)


KINDS = {"mcq": is_mcq, "grounding": is_grounding}


@EXPORTERS.register("lmms-eval")
class LmmsEval(Exporter):
    """Options: ``dataset_path`` (Hub repo id of the HF export), ``split`` (default ``test``).

    The task files read the HF export's rows: "writing" an item notes its kind (a task file
    per kind present) and whether it is multi-select; an item of no kind is left out."""

    def leave_out(self, item: Item) -> str | None:
        return None if any(keep(item) for keep in KINDS.values()) else "neither choice nor box"

    def start(self) -> None:
        self.name = check_export_name(self.ctx.name)
        self.present: set[str] = set()
        self.multi: set[str] = set()

    def write(self, item: Item) -> None:
        self.present.update(kind for kind, keep in KINDS.items() if keep(item))
        if "," in (item.answer or ""):
            self.multi.add(item.task)

    def finish(self) -> dict:
        name, split = self.name, self.options.get("split", "test")
        dataset_path = self.options.get("dataset_path", name)
        written = []
        for kind in KINDS:
            if kind in self.present:
                fname = f"{slug(name)}_{kind}.yaml"
                self.write_file(fname, _yaml(f"{slug(name)}_{kind}", dataset_path, split, kind))
                written.append(fname)
        utils = standalone_source("lmms_utils.py", {"MULTI_SELECT_TASKS": frozenset(self.multi)})
        self.write_file("utils.py", utils)
        return {"tasks": written, "multi_select_tasks": sorted(self.multi)}

"""Worked example of CONTRIBUTING.md, "Add an exporter": the ``jsonl`` format.

``<name>.jsonl``: one JSON object per multiple-choice item, in build order, each naming its
images, which are copied beside it (``images/<sha256>.<ext>``, each written once). Box-answer
items are left out and counted. To add a format, copy this file to
``src/medvqa_build/export/<format>.py``, rename the format and the class, and add its import line
to ``src/medvqa_build/export/__init__.py``. ``tests/e2e/test_extension_examples.py`` runs this
file as it is (registered for the test only).
"""

import json

from medvqa_build.export.base import EXPORTERS, Exporter
from medvqa_build.records import Item


@EXPORTERS.register("jsonl")
class JsonLines(Exporter):
    """One line per multiple-choice item. The base streams the items, writes the file aside
    and renames it into place, copies the images, and counts what was written and left out."""

    holds = "multiple-choice"  # a build with no such item is refused, not exported empty

    def leave_out(self, item: Item) -> str | None:
        return None if item.options else "not multiple-choice"

    def start(self) -> None:
        self.lines = self.text_file(f"{self.ctx.name}.jsonl", mode="w", encoding="utf-8")

    def write(self, item: Item) -> None:
        record = {
            "id": item.item_id,
            "images": [self.image(ref) for ref in item.images],
            "question": item.question,
            "options": list(item.options),
            "answer": item.answer,
            "source": item.source,  # whose terms the item's images are under
        }
        self.lines.fh.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")

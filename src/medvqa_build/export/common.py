"""Helpers every exporter shares: item kinds, config names, image copies, deterministic writes."""

from __future__ import annotations

import hashlib
import json
import os
import re
import string
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..media.load import check_any_image, export_image_bytes
from ..records import Item
from ..schema import atomic_path

LETTERS = string.ascii_uppercase
# VLMEvalKit switches to circular evaluation for dataset names containing these (smp/misc.py).
CIRCULAR_NAME_MARKERS = ("mmbench", "ccbench", "circular", "mmcr")


def is_grounding(item: Item) -> bool:
    """A box-answer item (no options, ``answer_bbox`` set)."""
    return item.answer_bbox is not None and not item.options


def is_mcq(item: Item) -> bool:
    return bool(item.options)


def answer_letters(answer: str) -> list[str]:
    return [a.strip() for a in answer.split(",") if a.strip()]


def slug(text: str) -> str:
    """A config / file name for a task name: ``"Region Recognition"`` -> ``region_recognition``."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "task"


def task_configs(items: Sequence[Item]) -> dict[str, list[Item]]:
    """One config per task family, keyed by its slug (sorted; two tasks never share a slug)."""
    groups: dict[str, list[Item]] = {}
    owner: dict[str, str] = {}
    for item in items:
        key = slug(item.task)
        if owner.setdefault(key, item.task) != item.task:
            raise UsageError(
                f"tasks {owner[key]!r} and {item.task!r} give the same config name {key!r}",
                fix="rename one of the tasks in the recipe",
            )
        groups.setdefault(key, []).append(item)
    return dict(sorted(groups.items()))


def check_export_name(name: str) -> str:
    """Refuse names that silently change how VLMEvalKit evaluates (recipe.py refuses them too)."""
    low = name.lower()
    hit = next((m for m in CIRCULAR_NAME_MARKERS if m in low), None)
    if hit:
        raise UsageError(
            f"export name {name!r} contains {hit!r}, which switches VLMEvalKit to "
            "circular evaluation",
            fix="choose another export.name",
        )
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise UsageError(
            f"export name {name!r} is not a file name", fix="use letters, digits, '_', '-' and '.'"
        )
    return name


def image_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class ImageCopier:
    """Copy item images into an export folder once each, named by content (stable, deduplicated)."""

    def __init__(self, out: Path, resolve: Callable[[str], Path], folder: str = "images"):
        self.out, self.resolve, self.folder = out, resolve, folder
        self._names: dict[str, str] = {}
        self._sizes: dict[str, tuple[int, int]] = {}

    def __call__(self, ref: str, folder: str | None = None) -> str:
        """The path (relative to ``out``) of the copy of ``ref``."""
        data, suffix = export_image_bytes(self.resolve(ref))
        digest = hashlib.sha256(data).hexdigest()[:20]
        rel = f"{folder or self.folder}/{digest}{suffix}"
        if rel not in self._names.values():
            write_bytes(self.out / rel, data)
        self._names[ref] = rel
        return rel

    def size(self, ref: str) -> tuple[int, int]:
        """``(width, height)`` of an image, from its header."""
        if ref not in self._sizes:
            self._sizes[ref] = check_any_image(self.resolve(ref))
        return self._sizes[ref]


def write_bytes(path: Path, data: bytes) -> None:
    """Write atomically (temp file + rename)."""
    tmp = atomic_path(path)
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, data: Any) -> None:
    """JSON with a fixed layout (indent 2, UTF-8, trailing newline) so equal data = equal bytes."""
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def option_block(options: Iterable[str]) -> str:
    return "\n".join(f"{LETTERS[k]}. {text}" for k, text in enumerate(options))


def require_items(
    items: Sequence[Item], fmt: str, keep: Callable[[Item], bool], what: str
) -> list[Item]:
    """The items a format can hold; refuse an export that would be empty."""
    kept = [i for i in items if keep(i)]
    if items and not kept:
        raise UsageError(
            f"the {fmt} export holds {what} items and this build has none",
            fix=f"remove {fmt!r} from export.formats",
        )
    return kept

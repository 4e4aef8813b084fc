"""Helpers every exporter shares: item kinds, config names, image copies, deterministic writes.

Exporters take their items as a re-iterable (a list, or an on-disk ``ItemTable`` read batch by
batch on each ``for``): they iterate, possibly several times, and keep only small per-item
summaries (counts, ids, names), never the items or their images all at once.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..media.load import check_any_image, export_image_bytes
from ..records import Item
from ..store.atomic import AtomicFile, write_atomic
from ..vocab import LETTERS

# VLMEvalKit switches to circular evaluation for dataset names containing these (smp/misc.py).
CIRCULAR_NAME_MARKERS = ("mmbench", "ccbench", "circular", "mmcr")


def is_grounding(item: Item) -> bool:
    """A box-answer item (no options, ``answer_bbox`` set)."""
    return item.answer_bbox is not None and not item.options


def is_mcq(item: Item) -> bool:
    return bool(item.options)


def standalone_source(module: str, values: dict[str, object]) -> str:
    """The text of the standalone module ``module`` (a file beside this one, shipped inside
    an export) with each top-level ``NAME = <default>`` line of ``values`` set to its value:
    a frozenset or tuple of strings, written sorted."""
    text = (Path(__file__).parent / module).read_text(encoding="utf-8")
    for name, value in values.items():
        line = re.search(rf"^{name} = .*$", text, flags=re.M)
        if line is None:
            raise RuntimeError(f"{module} lost its {name} line")
        items = ", ".join(json.dumps(v) for v in sorted(value))
        if isinstance(value, frozenset | set):
            literal = f"frozenset({{{items}}})" if items else "frozenset()"
        else:
            literal = f"({items},)" if len(value) == 1 else f"({items})"
        text = text[: line.start()] + f"{name} = {literal}" + text[line.end() :]
    return text


def slug(text: str) -> str:
    """A config / file name for a task name: ``"Region Recognition"`` -> ``region_recognition``."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "task"


def task_config(owner: dict[str, str], task: str) -> str:
    """The config name of ``task`` (its slug); ``owner`` (slug -> task, filled as tasks are
    seen) refuses two tasks that give the same name."""
    key = slug(task)
    if owner.setdefault(key, task) != task:
        raise UsageError(
            f"tasks {owner[key]!r} and {task!r} give the same config name {key!r}",
            fix="rename one of the tasks in the recipe",
        )
    return key


def column_values(items: Iterable[Item], name: str) -> Iterable[Any]:
    """One field of every item: a table's column read alone when it has one, else a pass."""
    column = getattr(items, "column", None)
    if callable(column):
        return column(name)
    return (getattr(i, name) for i in items)


def where(items: Iterable[Item], name: str, value: Any) -> Iterable[Item]:
    """The items whose field ``name`` equals ``value``, in order: a table's filtered read
    when it has one (the other rows are never decoded), else a filtered pass."""
    select = getattr(items, "where", None)
    if callable(select):
        return select(name, value)
    return (i for i in items if getattr(i, name) == value)


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


class ImageCopier:
    """Copy item images into an export folder once each, named by content (stable, deduplicated)."""

    def __init__(self, out: Path, resolve: Callable[[str], Path], folder: str = "images"):
        self.out, self.resolve, self.folder = out, resolve, folder
        self._written: set[str] = set()  # relative paths already copied (names, not bytes)
        self._sizes: dict[str, tuple[int, int]] = {}

    def __call__(self, ref: str, folder: str | None = None) -> str:
        """The path (relative to ``out``) of the copy of ``ref``."""
        data, suffix = export_image_bytes(self.resolve(ref))
        digest = hashlib.sha256(data).hexdigest()[:20]
        rel = f"{folder or self.folder}/{digest}{suffix}"
        if rel not in self._written:
            write_atomic(self.out / rel, data)
            self._written.add(rel)
        return rel

    @property
    def written(self) -> int:
        """How many distinct files were copied."""
        return len(self._written)

    def size(self, ref: str) -> tuple[int, int]:
        """``(width, height)`` of an image, from its header."""
        if ref not in self._sizes:
            self._sizes[ref] = check_any_image(self.resolve(ref))
        return self._sizes[ref]


def write_json(path: Path, data: Any) -> None:
    """JSON with a fixed layout (indent 2, UTF-8, trailing newline) so equal data = equal bytes."""
    write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def option_block(options: Iterable[str]) -> str:
    return "\n".join(f"{LETTERS[k]}. {text}" for k, text in enumerate(options))


class JsonListWriter:
    """A JSON list written one element at a time, with the bytes :func:`write_json` gives for
    the whole list (indent 2, UTF-8, trailing newline), atomically (temp file + rename on
    :meth:`close`; the temp file is removed if the writer is dropped by an error)."""

    def __init__(self, path: Path):
        self.path = path
        self.count = 0
        self._file = AtomicFile(path)

    def append(self, value: Any) -> None:
        text = json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")
        self._file.fh.write(("[\n  " if self.count == 0 else ",\n  ").encode("utf-8"))
        self._file.fh.write(text.encode("utf-8"))
        self.count += 1

    def close(self) -> None:
        self._file.fh.write(b"[]\n" if self.count == 0 else b"\n]\n")
        self._file.commit()

    def abort(self) -> None:
        self._file.abort()

    @property
    def closed(self) -> bool:
        return self._file.fh.closed

    def __enter__(self) -> JsonListWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_json_list(path: Path, values: Iterable[Any]) -> int:
    """Stream ``values`` into a JSON list file (same bytes as :func:`write_json` of the list);
    returns how many were written."""
    with JsonListWriter(path) as writer:
        for value in values:
            writer.append(value)
    return writer.count


class Kept:
    """The items a format can hold, as a re-iterable filtered view of the build's items."""

    def __init__(self, items: Iterable[Item], keep: Callable[[Item], bool]):
        self.items, self.keep = items, keep

    def __iter__(self) -> Iterator[Item]:
        return (i for i in self.items if self.keep(i))

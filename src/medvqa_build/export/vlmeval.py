"""VLMEvalKit MCQ TSV: EndoBench's columns plus ``l2-category`` (= task, so stock VLMEvalKit
reports per task), base64 images, parts of at most ``part_size_mb`` with an MD5 list.

Written for VLMEvalKit's reader (``pd.read_csv(sep="\\t")`` with defaults, ``ImageBaseDataset``):

* multi-image rows hold a Python list literal of base64 strings and a list of ``image_path``;
* a repeated image is written once per part; later rows hold the index of that row
  (an ``image`` cell of <= 64 characters is read as another row's index);
* ``image_path`` is unique per row, so two different images never share a path (VLMEvalKit
  keeps the first file written under a path);
* option and text cells that pandas would read as NaN, numbers or booleans are quoted
  (:mod:`.tsv_text`), so the prompt shows exactly the recipe's text;
* an empty ``category`` (which crashes VLMEvalKit's accuracy report) is replaced by the task;
* ``circular: true`` adds rotated copies with ``index = g_index + k * 1_000_000``;
* with multi-select items (answer ``A,C``), ``medvqa_vlmeval.py`` (:mod:`.vlmeval_dataset`):
  a dataset class that scores them by letter sets, where stock VLMEvalKit counts a miss.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import logging
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..media.dicom import is_dicom
from ..media.load import export_image_bytes
from ..records import Item
from ..store.atomic import AtomicFile
from ..vocab import LETTERS, answer_letters
from .base import EXPORTERS, ExportContext, Exporter
from .cells import FormulaCells
from .common import check_export_name, is_mcq, standalone_source
from .tsv_text import TypedColumns

log = logging.getLogger(__name__)
CIRCULAR_STEP = 1_000_000
DATASET_MODULE = "medvqa_vlmeval.py"  # the dataset class for multi-select items
TEXT_COLUMNS = ("question", "category", "l2-category", "task", "subtask", "scene", "dataset", "gt")


@dataclass(frozen=True)
class _Row:
    index: int
    item: Item
    options: tuple[str, ...]
    answer: str


def rotate(options: tuple[str, ...], answer: str, k: int) -> tuple[tuple[str, ...], str]:
    """Options turned ``k`` places (option ``j`` shows option ``j + k``) and the answer's
    letters moved with them: MMBench's circular copies, scored together by ``score``."""
    if k == 0:
        return options, answer
    n = len(options)
    turned = tuple(options[(j + k) % n] for j in range(n))
    letters = sorted(LETTERS[(LETTERS.index(a) - k) % n] for a in answer_letters(answer))
    return turned, ",".join(letters)


def _rotation(index: int, item: Item, k: int) -> _Row:
    """Copy ``k`` of an item (0: the item itself), options turned ``k`` places."""
    options, answer = rotate(item.options, item.answer, k)
    return _Row(index + k * CIRCULAR_STEP, item, options, answer)


def _rotations(index: int, item: Item, circular: bool) -> list[_Row]:
    return [_rotation(index, item, k) for k in range(len(item.options) if circular else 1)]


def _category(item: Item) -> str:
    category = (item.category or "").strip() or (item.task or "").strip()
    if not category:
        raise UsageError(
            f"item {item.item_id} has neither category nor task; VLMEvalKit's accuracy "
            "report fails on an empty category",
            fix="set category in the recipe task",
        )
    return category


def export_suffix(path: Path) -> str:
    return ".png" if is_dicom(path) else (path.suffix.lower() or ".jpg")


class _Images:
    """The base64 length of each image for the plan and its bytes for the rows; nothing is
    kept per image (an export of 10^6 images must not hold a digest for each): a plain file's
    length is its size, and only DICOM conversions (whose PNG size is known once encoded) are
    remembered, in a bounded cache."""

    CACHE = 4096

    def __init__(self, resolve):
        self.resolve = resolve
        self._converted: dict[str, int] = {}  # DICOM ref -> size of its PNG (bounded)

    def data(self, ref: str) -> bytes:
        return export_image_bytes(self.resolve(ref))[0]  # DICOM: pixels only, never its header

    def b64_length(self, ref: str) -> int:
        """The length of the image's base64 text."""
        path = self.resolve(ref)
        if not is_dicom(path):
            size = path.stat().st_size
        elif (size := self._converted.get(ref)) is None:
            if len(self._converted) >= self.CACHE:
                self._converted.clear()  # a dropped size is computed again alike
            size = self._converted[ref] = len(export_image_bytes(path)[0])
        return 4 * ((size + 2) // 3)


class _Md5File:
    """A text file written atomically in UTF-8 while its MD5 is computed."""

    def __init__(self, path: Path):
        self.path = path
        self._file = AtomicFile(path, "w", encoding="utf-8", newline="")
        self.md5 = hashlib.md5()

    def write(self, text: str) -> int:
        self.md5.update(text.encode("utf-8"))
        return self._file.fh.write(text)

    def close(self) -> str:
        self._file.commit()
        return self.md5.hexdigest()

    def abort(self) -> None:
        self._file.abort()

    @property
    def closed(self) -> bool:
        return self._file.fh.closed


def _text_cells(item: Item) -> dict[str, str | None]:
    return {
        "question": item.question,
        "category": _category(item),
        "l2-category": item.task,
        "task": item.task,
        "subtask": item.subtask,
        "scene": item.scene or None,
        "dataset": item.source,
        "gt": item.gt,
    }


@dataclass
class _Part:
    """One TSV part: where it starts (index of its first item), how many rows it gets, and
    which of its columns pandas would read as typed (all its cells seen in the plan)."""

    first: int
    rows: int = 0
    columns: TypedColumns = field(default_factory=TypedColumns)

    def add(self, group: list[_Row]) -> None:
        self.rows += len(group)
        for column, text in _text_cells(group[0].item).items():
            self.columns.add(column, text)
        for row in group:
            for k, option in enumerate(row.options):
                self.columns.add(k, option)


class _PartWriter:
    """Writes one part row by row (each row's base64 made as it is written)."""

    HEADER = ["index", "image", "image_path", "question"]
    TAIL = ["answer", *TEXT_COLUMNS[1:]]

    def __init__(
        self,
        part: _Part,
        images: _Images,
        ctx: ExportContext,
        n_opt: int,
        path: Path,
        formulas: FormulaCells,
    ):
        self.part, self.images, self.ctx, self.n_opt = part, images, ctx, n_opt
        # SHA-256 of an image's bytes -> the index of the row holding it (one per image)
        self.first_row: dict[bytes, int] = {}
        self.written = 0
        self.rewritten = 0  # cells quoted for pandas
        self.formulas = formulas  # cells a spreadsheet would run (export/cells.py)
        self.out = _Md5File(path)
        self.writer = csv.writer(
            self.out, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL
        )
        self.writer.writerow([*self.HEADER, *LETTERS[:n_opt], *self.TAIL])

    @property
    def done(self) -> bool:
        return self.written == self.part.rows

    def write(self, row: _Row) -> None:
        name, images, columns = self.ctx.name, self.images, self.part.columns
        refs = row.item.images
        suffixes = [export_suffix(self.ctx.resolve(r)) for r in refs]
        if len(refs) == 1:
            data = images.data(refs[0])
            digest = hashlib.sha256(data).digest()
            if digest in self.first_row:
                image = str(self.first_row[digest])
            else:
                self.first_row[digest] = row.index
                image = base64.b64encode(data).decode("ascii")
            image_path = f"{name}_{row.index}{suffixes[0]}"
        else:
            image = repr([base64.b64encode(images.data(r)).decode("ascii") for r in refs])
            image_path = repr([f"{name}_{row.index}_{k}{s}" for k, s in enumerate(suffixes)])
        text = _text_cells(row.item)
        for column, value in [*text.items(), *zip(LETTERS, row.options, strict=False)]:
            self.formulas.add(row.index, column, value)
        encoded = {k: columns.encode(k, v) for k, v in text.items()}
        self.rewritten += sum(1 for k, v in text.items() if (v or "") != encoded[k])
        options = []
        for k in range(self.n_opt):
            option = row.options[k] if k < len(row.options) else None
            options.append(columns.encode(k, option))
            self.rewritten += option is not None and options[-1] != option
        self.writer.writerow(
            [
                row.index,
                image,
                image_path,
                encoded["question"],
                *options,
                row.answer,
                *(encoded[c] for c in TEXT_COLUMNS[1:]),
            ]
        )
        self.written += 1

    def close(self) -> str:
        return self.out.close()

    def abort(self) -> None:
        self.out.abort()


def _group_bytes(item: Item, group: list[_Row], images: _Images) -> int:
    """About what the rows of one item (its rotations) take in the TSV."""
    image = sum(images.b64_length(r) for r in item.images)
    return sum(image + 4 * len(row.item.question) + 1024 for row in group)


@EXPORTERS.register("vlmeval")
class VLMEval(Exporter):
    """Write ``<name>.tsv`` (or ``<name>_partK.tsv`` parts) and ``md5sums.txt`` under ``out``.

    Options: ``circular`` (bool, default false), ``part_size_mb`` (default 1000).
    Box-answer items are not MCQ and are left out (counted in the stats).

    A first pass cuts the parts and decides each column's quoting; the items' rows are then
    written as they come, and with ``circular`` each rotation's rows in one more pass.
    """

    holds = "multiple-choice"

    def leave_out(self, item: Item) -> str | None:
        return None if is_mcq(item) else "not multiple-choice"

    def start(self) -> None:
        name = check_export_name(self.ctx.name)
        self.circular = bool(self.options.get("circular", False))
        limit = float(self.options.get("part_size_mb", 1000)) * 1e6
        self.b64 = _Images(self.ctx.resolve)
        self.parts, self.n_opt = _cut_parts(self.ctx.items, self.circular, limit, self.b64)
        n = len(self.parts)
        self.names = [f"{name}.tsv" if n == 1 else f"{name}_part{k}.tsv" for k in range(1, n + 1)]
        self.writers: list[_PartWriter | None] = [None] * n
        self.starts = [part.first for part in self.parts]
        self.md5: dict[str, str] = {}
        self.rewritten = 0
        self.multi: set[str] = set()
        self.formulas = FormulaCells()  # cells a spreadsheet would run (export/cells.py)

    def write(self, item: Item) -> None:
        self._put(self.written, _rotation(self.written, item, 0))
        if "," in (item.answer or ""):
            self.multi.add(item.task)

    def _put(self, index: int, row: _Row) -> None:
        p = bisect_right(self.starts, index) - 1
        if self.writers[p] is None:
            self.writers[p] = self._writer(p)
        self.writers[p].write(row)
        if self.writers[p].done:
            self._close(p)

    def _writer(self, p: int) -> _PartWriter:
        path = self.out / self.names[p]
        writer = _PartWriter(self.parts[p], self.b64, self.ctx, self.n_opt, path, self.formulas)
        self.track(writer)
        return writer

    def _close(self, p: int) -> None:
        self.md5[self.names[p]] = self.writers[p].close()
        self.rewritten += self.writers[p].rewritten

    def finish(self) -> dict:
        for k in range(1, self.n_opt if self.circular else 1):  # a pass per rotation
            for index, item in enumerate(self.kept()):
                if k < len(item.options):
                    self._put(index, _rotation(index, item, k))
        pairs = zip(self.writers, self.parts, strict=True)
        if any((w.written if w else 0) != part.rows for w, part in pairs):
            raise RuntimeError("vlmeval export: the items changed between passes")
        for p in range(len(self.parts)):  # a part with no rows: the header alone
            if self.writers[p] is None:
                self.writers[p] = self._writer(p)
                self._close(p)
        md5 = {n: self.md5[n] for n in self.names}
        self.write_file("md5sums.txt", "".join(f"{h}  {f}\n" for f, h in md5.items()).encode())
        if self.multi:  # stock VLMEvalKit scores "A,C" as a miss: ship a class that does not
            datasets = tuple(n[: -len(".tsv")] for n in self.names)
            values = {"DATASETS": datasets, "MULTI_SELECT_TASKS": self.multi}
            self.write_file(DATASET_MODULE, standalone_source("vlmeval_dataset.py", values))
        if self.rewritten:
            log.info("vlmeval: %d cell(s) quoted so pandas reads them as text", self.rewritten)
        if self.formulas.count:
            log.warning("%s", self.formulas.warning("vlmeval"))
        return {
            **self.formulas.stats(),
            "rows": sum(p.rows for p in self.parts),
            "parts": list(md5),
            "md5": md5,
            "quoted_cells": self.rewritten,
            "multi_select_tasks": sorted(self.multi),
        }


def _cut_parts(items, circular: bool, limit: float, images) -> tuple[list[_Part], int]:
    """The first pass: ``(parts, most options)``, a part ending where the next item's rows
    would pass ``limit`` bytes."""
    parts: list[_Part] = [_Part(0)]
    size = kept = 0
    n_opt = None
    for item in items:
        if not is_mcq(item):
            continue
        index, kept = kept, kept + 1
        n_opt = max(n_opt or 0, len(item.options))
        if n_opt > len(LETTERS):  # refused below, once the largest count is known
            continue
        group = _rotations(index, item, circular)
        group_size = _group_bytes(item, group, images)
        if parts[-1].rows and size + group_size > limit:
            parts.append(_Part(index))
            size = 0
        parts[-1].add(group)
        size += group_size
    n_opt = 4 if n_opt is None else n_opt
    if n_opt > len(LETTERS):
        raise UsageError(f"an item has {n_opt} options; VLMEvalKit option columns are A..Z")
    return parts, n_opt

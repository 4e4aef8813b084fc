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
* ``circular: true`` adds rotated copies with ``index = g_index + k * 1_000_000``.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..media.dicom import is_dicom
from ..media.load import export_image_bytes
from ..records import Item
from ..schema import atomic_path
from .base import EXPORTERS, ExportContext
from .common import LETTERS, answer_letters, check_export_name, is_mcq, require_items, write_bytes
from .tsv_text import encode_column

log = logging.getLogger(__name__)
CIRCULAR_STEP = 1_000_000
REF_MAX_CHARS = 64  # VLMEvalKit: an image cell this short is another row's index
TEXT_COLUMNS = ("question", "category", "l2-category", "task", "subtask", "scene", "dataset", "gt")


@dataclass(frozen=True)
class _Row:
    index: int
    item: Item
    options: tuple[str, ...]
    answer: str


def _rotations(index: int, item: Item, circular: bool) -> list[_Row]:
    rows = [_Row(index, item, item.options, item.answer)]
    n = len(item.options)
    if not circular:
        return rows
    for k in range(1, n):
        options = tuple(item.options[(j + k) % n] for j in range(n))
        letters = sorted(LETTERS[(LETTERS.index(a) - k) % n] for a in answer_letters(item.answer))
        rows.append(_Row(index + k * CIRCULAR_STEP, item, options, ",".join(letters)))
    return rows


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
    """Base64 length and content digest of each image file, kept once per reference; the
    base64 text itself is made again row by row when the part is written, so an export
    never holds all its images in memory."""

    def __init__(self, resolve):
        self.resolve = resolve
        self._info: dict[str, tuple[int, str]] = {}

    def _bytes(self, ref: str) -> bytes:
        return export_image_bytes(self.resolve(ref))[0]  # DICOM: pixels only, never its header

    def info(self, ref: str) -> tuple[int, str]:
        """``(length of the base64 text, content digest)``."""
        if ref not in self._info:
            data = self._bytes(ref)
            self._info[ref] = (4 * ((len(data) + 2) // 3), hashlib.sha256(data).hexdigest())
        return self._info[ref]

    def b64(self, ref: str) -> str:
        return base64.b64encode(self._bytes(ref)).decode("ascii")


class _Md5File:
    """A text file written atomically in UTF-8 while its MD5 is computed."""

    def __init__(self, path: Path):
        self.path, self.tmp = path, atomic_path(path)
        # closed by close() (or by the caller on error): the file outlives this block
        self.fh = open(self.tmp, "w", encoding="utf-8", newline="")  # noqa: SIM115
        self.md5 = hashlib.md5()

    def write(self, text: str) -> int:
        self.md5.update(text.encode("utf-8"))
        return self.fh.write(text)

    def close(self) -> str:
        self.fh.close()
        os.replace(self.tmp, self.path)
        return self.md5.hexdigest()


def _write_part(
    rows: list[_Row], images: _Images, ctx: ExportContext, n_opt: int, path: Path
) -> tuple[str, int]:
    """Write one TSV part row by row; ``(md5 of the file, cells quoted for pandas)``."""
    name = ctx.name
    first_row: dict[str, int] = {}  # content digest -> index of the row holding the base64
    image_cells: list[str | None] = []  # None: the row's own base64, made when written
    path_cells = []
    for row in rows:
        refs = row.item.images
        suffixes = [export_suffix(ctx.resolve(r)) for r in refs]
        if len(refs) == 1:
            digest = images.info(refs[0])[1]
            if digest in first_row:
                image_cells.append(str(first_row[digest]))
            else:
                first_row[digest] = row.index
                image_cells.append(None)
            path_cells.append(f"{name}_{row.index}{suffixes[0]}")
        else:
            image_cells.append(None)
            path_cells.append(repr([f"{name}_{row.index}_{k}{s}" for k, s in enumerate(suffixes)]))
    columns = {
        letter: encode_column([r.options[k] if k < len(r.options) else None for r in rows])
        for k, letter in enumerate(LETTERS[:n_opt])
    }
    text = {
        "question": [r.item.question for r in rows],
        "category": [_category(r.item) for r in rows],
        "l2-category": [r.item.task for r in rows],
        "task": [r.item.task for r in rows],
        "subtask": [r.item.subtask for r in rows],
        "scene": [r.item.scene or None for r in rows],
        "dataset": [r.item.source for r in rows],
        "gt": [r.item.gt for r in rows],
    }
    encoded_text = {k: encode_column(v) for k, v in text.items()}
    rewritten = sum(
        1
        for k, v in text.items()
        for a, b in zip(v, encoded_text[k], strict=True)
        if (a or "") != b
    )
    rewritten += sum(
        1
        for k, letter in enumerate(LETTERS[:n_opt])
        for r, cell in zip(rows, columns[letter], strict=True)
        if k < len(r.options) and cell != r.options[k]
    )
    out = _Md5File(path)
    try:
        writer = csv.writer(out, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
        writer.writerow(
            [
                "index",
                "image",
                "image_path",
                "question",
                *LETTERS[:n_opt],
                "answer",
                "category",
                "l2-category",
                "task",
                "subtask",
                "scene",
                "dataset",
                "gt",
            ]
        )
        for j, row in enumerate(rows):
            refs = row.item.images
            image = image_cells[j]
            if image is None:
                image = (
                    images.b64(refs[0]) if len(refs) == 1 else repr([images.b64(r) for r in refs])
                )
            writer.writerow(
                [
                    row.index,
                    image,
                    path_cells[j],
                    encoded_text["question"][j],
                    *(columns[letter][j] for letter in LETTERS[:n_opt]),
                    row.answer,
                    *(encoded_text[c][j] for c in TEXT_COLUMNS[1:]),
                ]
            )
    except BaseException:
        out.fh.close()
        out.tmp.unlink(missing_ok=True)
        raise
    return out.close(), rewritten


def _row_bytes(row: _Row, images: _Images) -> int:
    return sum(images.info(r)[0] for r in row.item.images) + 4 * len(row.item.question) + 1024


@EXPORTERS.register("vlmeval")
def export_vlmeval(ctx: ExportContext, out: Path) -> dict:
    """Write ``<name>.tsv`` (or ``<name>_partK.tsv`` parts) and ``md5sums.txt`` under ``out``.

    Options: ``circular`` (bool, default false), ``part_size_mb`` (default 1000).
    Box-answer items are not MCQ and are left out (counted in the stats).
    """
    name = check_export_name(ctx.name)
    items = require_items(ctx.items, "vlmeval", is_mcq, "multiple-choice")
    circular = bool(ctx.options.get("circular", False))
    limit = float(ctx.options.get("part_size_mb", 1000)) * 1e6
    n_opt = max((len(i.options) for i in items), default=4)
    if n_opt > len(LETTERS):
        raise UsageError(f"an item has {n_opt} options; VLMEvalKit option columns are A..Z")
    images = _Images(ctx.resolve)
    parts: list[list[_Row]] = [[]]
    size = 0
    for index, item in enumerate(items):
        group = _rotations(index, item, circular)
        group_size = sum(_row_bytes(r, images) for r in group)
        if parts[-1] and size + group_size > limit:
            parts.append([])
            size = 0
        parts[-1].extend(group)
        size += group_size
    out.mkdir(parents=True, exist_ok=True)
    md5, rewritten = {}, 0
    for k, rows in enumerate(parts, start=1):
        if circular:  # originals first, then each rotation, as VLMEvalKit's circular TSVs are
            rows = sorted(rows, key=lambda r: (r.index // CIRCULAR_STEP, r.index))
        fname = f"{name}.tsv" if len(parts) == 1 else f"{name}_part{k}.tsv"
        md5[fname], n = _write_part(rows, images, ctx, n_opt, out / fname)
        rewritten += n
    write_bytes(out / "md5sums.txt", "".join(f"{h}  {f}\n" for f, h in md5.items()).encode())
    if rewritten:
        log.info("vlmeval: %d cell(s) quoted so pandas reads them as text", rewritten)
    return {
        "rows": sum(len(p) for p in parts),
        "items": len(items),
        "parts": list(md5),
        "md5": md5,
        "left_out_not_mcq": len(ctx.items) - len(items),
        "quoted_cells": rewritten,
    }

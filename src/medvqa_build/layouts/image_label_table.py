"""A plain-text table of ``<image> <label>`` rows beside an image folder (SUN-SEG
``Classification/classification.txt``, "the same format as ImageNet" per the SUN-SEG docs).

Releases disagree on how a row names its image (``case1_1/<name>.jpg``, the stem, the bare file
name), so ``keys`` lists the forms tried, in order, for each image.

A row without a label, or with a "no value" marker (``NaN``, ``None``, ...), leaves that image's
label out: the image is kept and the label counted as missing (issue 23). So, with
``unlisted: missing``, is an image the table does not list, and every image when the table is
absent and ``required: false``. An image listed twice with two different labels contradicts
itself and is quarantined.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ImageProblem, SourceError
from ..store.table_text import check_text_table
from .base import MISSING_MARKERS, ScanContext, is_missing


class ImageLabelTableOptions(BaseModel):
    """Where the table is, how a row names its image, and what a missing label is."""

    model_config = ConfigDict(extra="forbid")

    # relative to the root; a list is tried in order and the first file present is read
    file: str | list[str]
    # row key forms tried per image; {sub} = the image's folder below images_dir, {name} = file
    # name, {stem} = name without extension
    keys: list[str] = Field(
        default=["{sub}/{name}", "{sub}/{stem}", "{name}", "{stem}"], min_length=1
    )
    # a label cell holding one of these (or no label cell at all) means "no label given"
    missing_values: list[str] = list(MISSING_MARKERS)
    # the name a left-out label is counted under in the report (labels_missing)
    field: str = "label"
    # an image the table does not list: quarantined, or kept with its label left out
    unlisted: Literal["quarantine", "missing"] = "quarantine"
    # false: a table that is not there leaves every image's label out (counted) instead of
    # stopping the part
    required: bool = True


@dataclass
class ImageLabels:
    """One table read: ``{row key: raw label or None (left out)}`` and the keys listed twice
    with different labels."""

    file: str | None  # the table read, below the root; None when absent (not required)
    rows: dict[str, str | None] = field(default_factory=dict)
    conflicts: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)


def _files(opts: ImageLabelTableOptions) -> list[str]:
    return [opts.file] if isinstance(opts.file, str) else opts.file


def read_image_labels(ctx: ScanContext, opts: ImageLabelTableOptions) -> ImageLabels:
    """The table's rows; a missing required table or a row of more than two fields is a
    SourceError naming it."""
    names = _files(opts)
    path = next((ctx.root / n for n in names if (ctx.root / n).is_file()), None)
    if path is None:
        if not opts.required:
            return ImageLabels(file=None)
        raise SourceError(
            f"{ctx.source}: expected the image label table {' or '.join(map(repr, names))} "
            "under the source root",
            where=str(ctx.root),
            fix="point ROOT at the unpacked dataset (see the source's docs page)",
        )
    ctx.note_table(path, ["image", opts.field])
    labels = ImageLabels(file=ctx.rel(path))
    markers = frozenset(opts.missing_values)
    check_text_table(path, "image label table")
    lines = path.read_text(encoding="utf-8-sig", errors="replace").splitlines()
    for number, line in enumerate(lines, start=1):
        fields = line.split()  # tab-separated per the docs; any whitespace is accepted
        if not fields:
            continue
        if len(fields) > 2:
            raise SourceError(
                f"{ctx.source}: line {number} of the label table has {len(fields)} fields, "
                f"expected '<image> <label>': {line.strip()!r}",
                where=str(path),
            )
        key = fields[0]
        raw = fields[1] if len(fields) == 2 and not is_missing(fields[1], markers) else None
        if key in labels.rows and labels.rows[key] != raw:
            labels.conflicts[key] = (labels.rows[key], raw)
        labels.rows[key] = raw
    return labels


def label_for(labels: ImageLabels, opts: ImageLabelTableOptions, rel_image: Path) -> str | None:
    """The raw label of the image at ``rel_image`` (below images_dir), or None when the table
    leaves it out; ImageProblem when the image is unlisted (``unlisted: quarantine``) or listed
    with two different labels."""
    rel = PurePosixPath(rel_image.as_posix())
    sub = rel.parent.as_posix()
    for form in opts.keys:
        key = form.format(sub=sub, name=rel.name, stem=rel.stem).removeprefix("./")
        if key in labels.conflicts:
            first, second = labels.conflicts[key]
            raise ImageProblem(
                f"listed twice in {labels.file} with different labels {first!r} and {second!r}"
            )
        if key in labels.rows:
            return labels.rows[key]
    if labels.file is None or opts.unlisted == "missing":
        return None
    raise ImageProblem(f"image not listed in {labels.file}")

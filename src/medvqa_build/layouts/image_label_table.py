"""A plain-text table of ``<image> <label>`` rows beside an image folder (SUN-SEG
``Classification/classification.txt``, "the same format as ImageNet" per the SUN-SEG docs).

Releases disagree on how a row names its image (``case1_1/<name>.jpg``, the stem, the bare file
name), so ``keys`` lists the forms tried, in order, for each image.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field

from ..errors import SourceError
from ..media.image import ImageProblem
from .base import ScanContext


class ImageLabelTableOptions(BaseModel):
    """Where the table is and how a row names its image."""

    model_config = ConfigDict(extra="forbid")

    # relative to the root; a list is tried in order and the first file present is read
    file: str | list[str]
    # row key forms tried per image; {sub} = the image's folder below images_dir, {name} = file
    # name, {stem} = name without extension
    keys: list[str] = Field(
        default=["{sub}/{name}", "{sub}/{stem}", "{name}", "{stem}"], min_length=1
    )


def _files(opts: ImageLabelTableOptions) -> list[str]:
    return [opts.file] if isinstance(opts.file, str) else opts.file


def read_image_labels(ctx: ScanContext, opts: ImageLabelTableOptions) -> dict[str, str]:
    """``{image key: raw label}``; a missing table or a row without two fields is a SourceError."""
    names = _files(opts)
    path = next((ctx.root / n for n in names if (ctx.root / n).is_file()), None)
    if path is None:
        raise SourceError(
            f"{ctx.source}: expected the image label table {' or '.join(map(repr, names))} "
            "under the source root",
            where=str(ctx.root),
            fix="point ROOT at the unpacked dataset (see the source's docs page)",
        )
    table: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8-sig", errors="replace").splitlines()
    for number, line in enumerate(lines, start=1):
        fields = line.split()  # tab-separated per the docs; any whitespace is accepted
        if not fields:
            continue
        if len(fields) != 2:
            raise SourceError(
                f"{ctx.source}: line {number} of the label table has {len(fields)} fields, "
                f"expected '<image> <label>': {line.strip()!r}",
                where=str(path),
            )
        table[fields[0]] = fields[1]
    return table


def label_for(table: dict[str, str], opts: ImageLabelTableOptions, rel_image: Path) -> str:
    """The raw label of the image at ``rel_image`` (below images_dir); ImageProblem if unlisted."""
    rel = PurePosixPath(rel_image.as_posix())
    sub = rel.parent.as_posix()
    for form in opts.keys:
        key = form.format(sub=sub, name=rel.name, stem=rel.stem).removeprefix("./")
        if key in table:
            return table[key]
    raise ImageProblem(f"image not listed in {' or '.join(_files(opts))}")

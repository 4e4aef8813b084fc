"""Worked example of CONTRIBUTING.md, "Add a layout": ``file_name_labels``.

``<images_dir>/<image>`` with the class, and optionally the group, in the file name, read by a
regular expression with named groups: ``label`` (the class, through the manifest's label map)
and ``group`` (a video or a patient; frames of one group stay in one split). For example
``bowel_1_score_2_00000001.jpg`` with ``^(?P<group>bowel_\\d+)_score_(?P<label>\\d)_``. A file
name the pattern does not match is quarantined with the pattern named. To add a layout, copy
this file to ``src/medvqa_build/layouts/<name>.py`` and rename the layout and its classes: the
layouts package imports every module in it. ``tests/e2e/test_extension_examples.py`` runs this
file as it is (registered for the test only).
"""

import os
import re
from collections.abc import Iterator
from pathlib import Path

from medvqa_build.layouts.base import (
    LAYOUTS,
    FileCandidate,
    FileLayout,
    LabelProblem,
    LayoutOptions,
    ScanContext,
)
from medvqa_build.layouts.discovery import Alternatives, Expect
from medvqa_build.media.image import check_image
from medvqa_build.records import Sample
from medvqa_build.store.paths import IMAGE_EXTENSIONS, walk_files


class FileNameLabelsOptions(LayoutOptions):
    images_dir: str = "."
    pattern: str  # a regular expression with a ``label`` group, and optionally a ``group`` one
    extensions: list[str] = list(IMAGE_EXTENSIONS)


@LAYOUTS.register("file_name_labels")
class FileNameLabels(FileLayout):
    name = "file_name_labels"
    Options = FileNameLabelsOptions

    def expects(self) -> Alternatives:
        folder = self.options.images_dir
        return [[Expect(folder, "dir")]] if folder not in ("", ".") else []

    def provides(self) -> set[str]:
        return {"labels", "attribute:source_label"}

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate]:
        """Every image below ``images_dir``, in a stable order."""
        base = ctx.require_dir(self.options.images_dir, "images")
        extensions = tuple(e.lower() for e in self.options.extensions)
        for dirpath, name in walk_files(base, extensions):
            yield FileCandidate(ctx.rel(Path(dirpath, name)), (dirpath, name))

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        dirpath, name = candidate.info
        match = re.search(self.options.pattern, name)
        if match is None:
            raise LabelProblem(f"file name does not match {self.options.pattern!r}")
        width, height = check_image(os.path.join(dirpath, name), ctx.verify, ctx.max_pixels)
        raw = match.group("label")
        return ctx.sample(
            candidate.rel,
            width,
            height,
            group_id=match.groupdict().get("group"),  # None: the image is its own group
            labels=(ctx.canonical(raw),),
            attributes={"source_label": raw},
        )

"""``frame_folders``: one folder of frames per video plus per-video annotation tables
(Cholec80 style: ``phase_annotations/videoNN-phase.txt`` with a ``Frame<TAB>Phase`` header,
``tool_annotations/videoNN-tool.txt`` with one 0/1 column per tool)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from ..media.image import check_image
from ..records import QuarantineEntry, Sample
from ..store.paths import walk_files, without_suffix
from ..store.table_text import check_text_table
from .base import (
    LAYOUTS,
    MISSING_MARKERS,
    FileCandidate,
    FileLayout,
    LabelProblem,
    LayoutOptions,
    ScanContext,
    is_missing,
)
from .discovery import Alternatives, expect_paths, template_dir


class FrameFoldersOptions(LayoutOptions):
    frames_dir: str
    frame_regex: str = r"(\d+)$"  # frame index = trailing digits of the file stem
    sep: str = "\t"
    frame_column: str = "Frame"
    phase_table: str | None = None  # e.g. "phase_annotations/{video}-phase.txt"
    phase_column: str = "Phase"
    tool_table: str | None = None  # e.g. "tool_annotations/{video}-tool.txt"
    tools_as_labels: bool = True
    # a phase or tool cell holding one of these was not annotated: that value is left out
    missing_values: list[str] = list(MISSING_MARKERS)


@LAYOUTS.register("frame_folders")
class FrameFolders(FileLayout):
    name = "frame_folders"
    Options = FrameFoldersOptions

    def __init__(self, options: FrameFoldersOptions):
        super().__init__(options)
        self._frame_re = re.compile(options.frame_regex)

    def _table(self, ctx: ScanContext, pattern: str | None, video: str) -> pd.DataFrame | None:
        if pattern is None:
            return None
        path = ctx.root / pattern.format(video=video)
        if not path.is_file():
            return None
        check_text_table(path, "annotation table", self.options.sep)
        table = pd.read_csv(path, sep=self.options.sep, dtype=str, keep_default_na=False)
        ctx.note_table(path, table.columns)
        if self.options.frame_column not in table.columns:
            return pd.DataFrame()
        return table.set_index(table[self.options.frame_column].astype(int))

    def expects(self) -> Alternatives:
        o = self.options
        return [
            expect_paths(o.frames_dir, kind="dir")
            + expect_paths(template_dir(o.phase_table), template_dir(o.tool_table), kind="dir")
        ]

    def provides(self) -> set[str]:
        o = self.options
        out = {"attribute:phase"} if o.phase_table else set()
        if o.tool_table:
            out |= {"attribute:tool"} | ({"labels"} if o.tools_as_labels else set())
        return out

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate | QuarantineEntry]:
        """Every frame file of every video folder, with its frame number and the video's tables
        (read once per video); a file name without a frame number is quarantined here."""
        o = self.options
        base = ctx.require_dir(o.frames_dir, "video frames")
        for video_dir in sorted(p for p in base.iterdir() if p.is_dir()):
            video = video_dir.name
            phases = _FrameRows(self._table(ctx, o.phase_table, video))
            tools = _FrameRows(self._table(ctx, o.tool_table, video))
            folder = None
            for dirpath, file in walk_files(video_dir):
                if dirpath != folder:
                    folder = dirpath
                    prefix = Path(dirpath).relative_to(ctx.root).as_posix() + "/"
                match = self._frame_re.search(without_suffix(file))  # the file's stem
                if match is None:
                    reason = f"no frame number in the file name (regex {o.frame_regex!r})"
                    yield ctx.quarantine(prefix + file, reason)
                    continue
                frame = int(match.group(1))
                yield FileCandidate(prefix + file, (dirpath, file, video, frame, phases, tools))

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        """The frame's phase and tools from its video's tables (a frame the phase table does
        not list is quarantined); a cell left empty drops that value only."""
        o = self.options
        dirpath, file, video, frame, phases, tools = candidate.info
        attributes: dict[str, str] = {"video": video}
        labels: list[str] = []
        left_out: list[str] = []
        markers = frozenset(o.missing_values)
        if o.phase_table is not None:
            if phases.table is None or not phases.has(frame):
                raise LabelProblem(
                    f"no phase for frame {frame} in {o.phase_table.format(video=video)}"
                )
            phase = phases.cell(frame, o.phase_column)
            if is_missing(phase, markers):
                left_out.append(o.phase_column)
            else:
                attributes["phase"] = ctx.canonical(phase)
        if tools.table is not None and tools.has(frame):
            row = tools.row(frame)
            for column in sorted(c for c in tools.table.columns if c != o.frame_column):
                if is_missing(row[column], markers):
                    left_out.append(column)
                    continue
                present = str(row[column]).strip() == "1"
                name = ctx.canonical(column)
                attributes[f"tool:{name}"] = "1" if present else "0"
                if present and o.tools_as_labels:
                    labels.append(name)
        width, height = check_image(os.path.join(dirpath, file), ctx.verify, ctx.max_pixels)
        for column in left_out:  # counted once the frame is known to convert
            ctx.label_missing(column)
        return ctx.sample(
            candidate.rel,
            width,
            height,
            frame=frame,
            labels=tuple(labels),
            attributes=attributes,
            group_id=video,
        )


class _FrameRows:
    """A per-video table indexed by frame, looked up as ``table.loc`` would be but through
    plain lists built once per video (``.loc`` costs tens of microseconds a call). A table
    whose frame index (or a column name) repeats keeps pandas' own lookups."""

    def __init__(self, table: pd.DataFrame | None):
        self.table = table
        self._pos: dict | None = None
        if table is not None and table.index.is_unique and table.columns.is_unique:
            self._pos = dict(zip(table.index.tolist(), range(len(table)), strict=True))
            self._cols = {c: table[c].tolist() for c in table.columns}

    def has(self, frame: int) -> bool:
        return frame in self._pos if self._pos is not None else frame in self.table.index

    def cell(self, frame: int, column: str):
        if self._pos is not None:
            return self._cols[column][self._pos[frame]]
        return self.table.loc[frame, column]

    def row(self, frame: int):
        if self._pos is not None:
            i = self._pos[frame]
            return {c: values[i] for c, values in self._cols.items()}
        return self.table.loc[frame]

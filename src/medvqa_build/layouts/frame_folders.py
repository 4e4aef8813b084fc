"""``frame_folders``: one folder of frames per video plus per-video annotation tables
(Cholec80 style: ``phase_annotations/videoNN-phase.txt`` with a ``Frame<TAB>Phase`` header,
``tool_annotations/videoNN-tool.txt`` with one 0/1 column per tool)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from ..media.image import ImageProblem, check_image
from ..quarantine import QuarantineEntry
from ..records import Sample
from .base import LAYOUTS, LabelProblem, LayoutOptions, ScanContext, walk_files, without_suffix


class FrameFoldersOptions(LayoutOptions):
    frames_dir: str
    frame_regex: str = r"(\d+)$"  # frame index = trailing digits of the file stem
    sep: str = "\t"
    frame_column: str = "Frame"
    phase_table: str | None = None  # e.g. "phase_annotations/{video}-phase.txt"
    phase_column: str = "Phase"
    tool_table: str | None = None  # e.g. "tool_annotations/{video}-tool.txt"
    tools_as_labels: bool = True


@LAYOUTS.register("frame_folders")
class FrameFolders:
    name = "frame_folders"
    shardable = True
    Options = FrameFoldersOptions

    def __init__(self, options: FrameFoldersOptions):
        self.o = options
        self._frame_re = re.compile(options.frame_regex)

    def _table(self, ctx: ScanContext, pattern: str | None, video: str) -> pd.DataFrame | None:
        if pattern is None:
            return None
        path = ctx.root / pattern.format(video=video)
        if not path.is_file():
            return None
        table = pd.read_csv(path, sep=self.o.sep, dtype=str, keep_default_na=False)
        if self.o.frame_column not in table.columns:
            return pd.DataFrame()
        return table.set_index(table[self.o.frame_column].astype(int))

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        base = ctx.require_dir(self.o.frames_dir, "video frames")
        for video_dir in sorted(p for p in base.iterdir() if p.is_dir()):
            video = video_dir.name
            phases = _FrameRows(self._table(ctx, self.o.phase_table, video))
            tools = _FrameRows(self._table(ctx, self.o.tool_table, video))
            folder = None
            for dirpath, file in walk_files(video_dir):
                if dirpath != folder:
                    folder = dirpath
                    prefix = Path(dirpath).relative_to(ctx.root).as_posix() + "/"
                yield ctx.defer(self._sample, ctx, dirpath, prefix, file, video, phases, tools)

    def _sample(
        self, ctx, dirpath: str, prefix: str, file: str, video: str, phases, tools
    ) -> Sample | QuarantineEntry:
        rel = prefix + file
        match = self._frame_re.search(without_suffix(file))  # the file's stem
        if match is None:
            return ctx.quarantine(
                rel, f"no frame number in the file name (regex {self.o.frame_regex!r})"
            )
        frame = int(match.group(1))
        attributes: dict[str, str] = {"video": video}
        labels: list[str] = []
        try:
            if self.o.phase_table is not None:
                if phases.table is None or not phases.has(frame):
                    raise LabelProblem(
                        f"no phase for frame {frame} in {self.o.phase_table.format(video=video)}"
                    )
                attributes["phase"] = ctx.canonical(phases.cell(frame, self.o.phase_column))
            if tools.table is not None and tools.has(frame):
                row = tools.row(frame)
                for column in sorted(c for c in tools.table.columns if c != self.o.frame_column):
                    present = str(row[column]).strip() == "1"
                    name = ctx.canonical(column)
                    attributes[f"tool:{name}"] = "1" if present else "0"
                    if present and self.o.tools_as_labels:
                        labels.append(name)
            width, height = check_image(os.path.join(dirpath, file), ctx.verify)
        except (ImageProblem, LabelProblem) as exc:
            return ctx.quarantine(rel, str(exc))
        key = without_suffix(rel)
        return Sample(
            sample_id=ctx.sample_id(key),
            source=ctx.source,
            image=rel,
            frame=frame,
            width=width,
            height=height,
            modality=ctx.modality,
            scene=ctx.scene,
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

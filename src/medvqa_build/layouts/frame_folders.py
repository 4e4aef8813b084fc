"""``frame_folders``: one folder of frames per video plus per-video annotation tables
(Cholec80 style: ``phase_annotations/videoNN-phase.txt`` with a ``Frame<TAB>Phase`` header,
``tool_annotations/videoNN-tool.txt`` with one 0/1 column per tool)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from ..media.image import ImageProblem, check_image
from ..quarantine import QuarantineEntry
from ..records import Sample
from .base import LAYOUTS, LabelProblem, LayoutOptions, ScanContext, sorted_files


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
            phases = self._table(ctx, self.o.phase_table, video)
            tools = self._table(ctx, self.o.tool_table, video)
            for path in sorted_files(video_dir):
                yield ctx.defer(self._sample, ctx, path, video, phases, tools)

    def _sample(self, ctx, path: Path, video: str, phases, tools) -> Sample | QuarantineEntry:
        rel = ctx.rel(path)
        match = self._frame_re.search(path.stem)
        if match is None:
            return ctx.quarantine(
                rel, f"no frame number in the file name (regex {self.o.frame_regex!r})"
            )
        frame = int(match.group(1))
        attributes: dict[str, str] = {"video": video}
        labels: list[str] = []
        try:
            if self.o.phase_table is not None:
                if phases is None or frame not in phases.index:
                    raise LabelProblem(
                        f"no phase for frame {frame} in {self.o.phase_table.format(video=video)}"
                    )
                attributes["phase"] = ctx.canonical(phases.loc[frame, self.o.phase_column])
            if tools is not None and frame in tools.index:
                row = tools.loc[frame]
                for column in sorted(c for c in tools.columns if c != self.o.frame_column):
                    present = str(row[column]).strip() == "1"
                    name = ctx.canonical(column)
                    attributes[f"tool:{name}"] = "1" if present else "0"
                    if present and self.o.tools_as_labels:
                        labels.append(name)
            width, height = check_image(path, ctx.verify)
        except (ImageProblem, LabelProblem) as exc:
            return ctx.quarantine(rel, str(exc))
        key = path.relative_to(ctx.root).with_suffix("").as_posix()
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

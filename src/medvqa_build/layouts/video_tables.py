"""``video_tables``: whole videos plus per-video annotation tables keyed by frame index
(Cholec80: ``videos/videoNN.mp4``, ``phase_annotations/videoNN-phase.txt`` with a label for
every frame, ``tool_annotations/videoNN-tool.txt`` with one 0/1 column per tool every 25th
frame). One sample per sampled frame; the image is the video and ``frame`` the index in it.

Candidates are the sampled frames listed in the phase table of each video, so a video that
cannot be read yields one quarantine entry per sampled frame (counts add up per frame); a
video whose own tables are missing or unreadable yields one entry for the video file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from ..errors import SourceError
from ..media.video import VideoProblem, frame_problems, video_info
from ..quarantine import QuarantineEntry
from ..records import Sample
from .base import LAYOUTS, LabelProblem, LayoutOptions, ScanContext, sorted_files

VIDEO_EXTENSIONS = (".mp4", ".avi", ".mkv", ".mov", ".mpg", ".mpeg", ".webm")


class VideoTablesOptions(LayoutOptions):
    videos_dir: str = "videos"
    video_regex: str = r"^(.+)$"  # matched on the file stem; group 1 is the video id
    phase_table: str  # e.g. "phase_annotations/{video}-phase.txt"; lists every frame
    phase_column: str = "Phase"
    tool_table: str | None = None  # e.g. "tool_annotations/{video}-tool.txt"
    frame_column: str = "Frame"
    sep: str = "\t"
    frame_step: int = 25  # keep frames whose index is a multiple of this (25 = 1 fps at 25 fps)
    tools_as_labels: bool = True


class _TableProblem(Exception):
    """A video's own annotation table is missing or unreadable (quarantines the video)."""


@LAYOUTS.register("video_tables")
class VideoTables:
    name = "video_tables"
    Options = VideoTablesOptions

    def __init__(self, options: VideoTablesOptions):
        if options.frame_step < 1:
            raise SourceError(f"frame_step must be >= 1, got {options.frame_step}")
        self.o = options
        self._video_re = re.compile(options.video_regex)

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        base = ctx.require_dir(self.o.videos_dir, "videos")
        for path in sorted_files(base, VIDEO_EXTENSIONS):
            match = self._video_re.search(path.stem)
            if match is None:
                yield ctx.quarantine(path, f"video name does not match {self.o.video_regex!r}")
                continue
            yield from self._video(ctx, path, match.group(1))

    def _read(self, ctx: ScanContext, pattern: str, video: str, columns: list[str]) -> pd.DataFrame:
        rel = pattern.format(video=video)
        path = ctx.root / rel
        if not path.is_file():
            raise _TableProblem(f"annotation table {rel} is missing")
        try:
            table = pd.read_csv(path, sep=self.o.sep, dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise _TableProblem(f"annotation table {rel} is unreadable ({exc})") from None
        missing = [c for c in [self.o.frame_column, *columns] if c not in table.columns]
        if missing:
            raise SourceError(
                f"{ctx.source}: table lacks column(s) {missing}; it has {list(table.columns)}",
                where=str(path),
                fix=f"check the separator (manifest says {self.o.sep!r}) and the column names",
            )
        frames = pd.to_numeric(table[self.o.frame_column], errors="coerce")
        if frames.isna().any():
            row = int(frames.isna().to_numpy().nonzero()[0][0]) + 2  # +1 header, +1 one-based
            raise _TableProblem(f"{rel} line {row}: frame is not an integer")
        return table.set_index(frames.astype(int))

    def _video(
        self, ctx: ScanContext, path: Path, video: str
    ) -> Iterator[Sample | QuarantineEntry]:
        o = self.o
        try:
            phases = self._read(ctx, o.phase_table, video, [o.phase_column])
            tools = self._read(ctx, o.tool_table, video, []) if o.tool_table else None
        except _TableProblem as exc:
            yield ctx.quarantine(path, str(exc))
            return
        frames = [f for f in phases.index if f % o.frame_step == 0]
        try:
            n_frames, fps, width, height = video_info(path)
            broken = frame_problems(path, frames) if ctx.verify == "decode" else {}
        except VideoProblem as exc:
            for frame in frames:
                yield ctx.quarantine(path, f"frame {frame}: {exc}")
            return
        for frame in frames:
            if frame >= n_frames:
                reason = f"frame {frame} is past the end of the video ({n_frames} frames)"
                yield ctx.quarantine(path, reason)
            elif frame in broken:
                yield ctx.quarantine(path, broken[frame])
            else:
                yield self._sample(ctx, path, video, frame, (fps, width, height), phases, tools)

    def _sample(self, ctx, path, video, frame, header, phases, tools) -> Sample | QuarantineEntry:
        fps, width, height = header
        raw_phase = str(phases.loc[frame, self.o.phase_column]).strip()
        attributes = {"video": video, "source_label": raw_phase}
        labels: list[str] = []
        try:
            attributes["phase"] = ctx.canonical(raw_phase)
            # Cholec80's tool table may end one sample before the phase table (reference notes
            # §3.1); such frames keep their phase and carry no tool attributes.
            if tools is not None and frame in tools.index:
                row = tools.loc[frame]
                for column in sorted(c for c in tools.columns if c != self.o.frame_column):
                    name = ctx.canonical(column)
                    present = str(row[column]).strip() == "1"
                    attributes[f"tool:{name}"] = "1" if present else "0"
                    if present and self.o.tools_as_labels:
                        labels.append(name)
        except LabelProblem as exc:
            return ctx.quarantine(path, f"frame {frame}: {exc}")
        if fps > 0:
            attributes["time_s"] = f"{frame / fps:.2f}"
        return Sample(
            sample_id=ctx.sample_id(f"{video}/{frame:06d}"),
            source=ctx.source,
            image=ctx.rel(path),
            frame=frame,
            width=width,
            height=height,
            modality=ctx.modality,
            scene=ctx.scene,
            labels=tuple(labels),
            attributes=attributes,
            group_id=video,
        )

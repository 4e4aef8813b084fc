"""``video_tables``: whole videos plus per-video annotation tables keyed by frame index
(Cholec80: ``videos/videoNN.mp4``, ``phase_annotations/videoNN-phase.txt`` with a label for
every frame, ``tool_annotations/videoNN-tool.txt`` with one 0/1 column per tool every 25th
frame). One sample per sampled frame; the image is the video and ``frame`` the index in it.

Candidates are the sampled frames listed in the phase table of each video (in the tool table
when a video has no phase table), so a video that cannot be read yields one quarantine entry
per sampled frame (counts add up per frame); a video whose tables are unreadable, or which has
neither table, yields one entry for the video file.

A label the tables leave out drops that label only and is counted (``ctx.label_missing``): a
phase or tool cell holding a ``missing_values`` marker (empty, NaN, ...), a video without a
phase table (phase), and a sampled frame without a tool row (``tools``; Cholec80's tool
tables end one sample before the last phase row). A frame listed twice with different values
is contradictory and quarantined.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from ..errors import SourceError
from ..media.video import VideoProblem, frame_problems, video_info
from ..records import QuarantineEntry, Sample
from ..store.paths import sorted_files
from ..store.table_text import TableProblem, check_text_table
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
    tool_present: str = "1"  # tool cell values: this one means present, tool_absent absent
    tool_absent: str = "0"
    # a phase or tool cell holding one of these was not annotated: that label is left out
    missing_values: list[str] = list(MISSING_MARKERS)


class _TableProblem(Exception):
    """A video's own annotation table is unreadable (quarantines the video)."""


# (path below the root, table indexed by frame without the frame column, frames listed twice
# with different values), or None when the video has no such table
_Table = tuple[str, pd.DataFrame, set[int]] | None


class _Video:
    """One video as its frames' reads share it: its tables, and its header and (with
    ``verify: decode``) its frames that fail to decode, read once per process on the first
    frame read (a shard that owns none of its frames never opens it)."""

    def __init__(self, path: Path, name: str, frames: list[int], phases: _Table, tools: _Table):
        self.path, self.name, self.frames = path, name, frames
        self.phases, self.tools = phases, tools
        self._facts: tuple[tuple[int, float, int, int], dict[int, str]] | str | None = None

    def facts(self, verify: str) -> tuple[tuple[int, float, int, int], dict[int, str]]:
        """``((n_frames, fps, width, height), {frame: reason})``; raises :class:`VideoProblem`
        (the same one for every frame) when the video cannot be read."""
        if self._facts is None:
            try:
                header = video_info(self.path)
                broken = frame_problems(self.path, self.frames) if verify == "decode" else {}
                self._facts = header, broken
            except VideoProblem as exc:
                self._facts = str(exc)
        if isinstance(self._facts, str):
            raise VideoProblem(self._facts)
        return self._facts


@LAYOUTS.register("video_tables")
class VideoTables(FileLayout):
    name = "video_tables"
    Options = VideoTablesOptions

    def __init__(self, options: VideoTablesOptions):
        if options.frame_step < 1:
            raise SourceError(f"frame_step must be >= 1, got {options.frame_step}")
        super().__init__(options)
        self._video_re = re.compile(options.video_regex)

    def expects(self) -> Alternatives:
        o = self.options
        dirs = (o.videos_dir, template_dir(o.phase_table), template_dir(o.tool_table))
        return [expect_paths(*dirs, kind="dir")]

    def provides(self) -> set[str]:
        out = {"attribute:phase"}
        if self.options.tool_table:
            out |= {"attribute:tool"} | ({"labels"} if self.options.tools_as_labels else set())
        return out

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate | QuarantineEntry]:
        """Every sampled frame of every video, as its tables list them; a video whose name
        does not match, whose tables are unreadable or missing is one quarantine entry."""
        o = self.options
        base = ctx.require_dir(o.videos_dir, "videos")
        for path in sorted_files(base, VIDEO_EXTENSIONS):
            match = self._video_re.search(path.stem)
            if match is None:
                yield ctx.quarantine(path, f"video name does not match {o.video_regex!r}")
                continue
            video = match.group(1)
            try:
                phases = self._read(ctx, o.phase_table, video, [o.phase_column])
                tools = self._read(ctx, o.tool_table, video, []) if o.tool_table else None
            except _TableProblem as exc:
                yield ctx.quarantine(path, str(exc))
                continue
            listing = phases or tools
            if listing is None:
                reason = f"annotation table {o.phase_table.format(video=video)} is missing"
                yield ctx.quarantine(path, reason)
                continue
            frames = [f for f in dict.fromkeys(listing[1].index) if f % o.frame_step == 0]
            state = _Video(path, video, frames, phases, tools)
            rel = ctx.rel(path)
            for frame in frames:
                yield FileCandidate(rel, (state, frame))

    def _read(self, ctx: ScanContext, pattern: str, video: str, columns: list[str]) -> _Table:
        """The video's table indexed by frame, or ``None`` when the file is not there."""
        o = self.options
        rel = pattern.format(video=video)
        path = ctx.root / rel
        if not path.is_file():
            return None
        try:
            check_text_table(path, "annotation table", o.sep)
            table = pd.read_csv(path, sep=o.sep, dtype=str, keep_default_na=False)
        except TableProblem as exc:
            raise _TableProblem(str(exc)) from None
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise _TableProblem(f"annotation table {rel} is unreadable ({exc})") from None
        ctx.note_table(path, table.columns)
        missing = [c for c in [o.frame_column, *columns] if c not in table.columns]
        if missing:
            raise SourceError(
                f"{ctx.source}: table lacks column(s) {missing}; it has {list(table.columns)}",
                where=str(path),
                fix=f"check the separator (manifest says {o.sep!r}) and the column names",
            )
        frames = pd.to_numeric(table[o.frame_column], errors="coerce")
        if frames.isna().any():
            row = int(frames.isna().to_numpy().nonzero()[0][0]) + 2  # +1 header, +1 one-based
            raise _TableProblem(f"{rel} line {row}: frame is not an integer")
        table[o.frame_column] = frames.astype(int)
        table = table[~table.duplicated()]  # a row repeated verbatim counts once
        table = table.set_index(o.frame_column)
        return rel, table, set(table.index[table.index.duplicated()])

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample | QuarantineEntry:
        """The frame's sample: quarantined when its video cannot be read there (every entry
        names the video and the frame), else labelled from the video's tables."""
        video, frame = candidate.info
        try:
            (n_frames, fps, width, height), broken = video.facts(ctx.verify)
        except VideoProblem as exc:
            return ctx.quarantine(candidate.rel, f"frame {frame}: {exc}")
        if frame >= n_frames:
            reason = f"frame {frame} is past the end of the video ({n_frames} frames)"
            return ctx.quarantine(candidate.rel, reason)
        if frame in broken:
            return ctx.quarantine(candidate.rel, broken[frame])
        attributes = {"video": video.name}
        try:
            labels, left_out = self._labels(ctx, video, frame, attributes)
        except LabelProblem as exc:
            return ctx.quarantine(candidate.rel, f"frame {frame}: {exc}")
        for field in left_out:  # counted once the frame is known to convert
            ctx.label_missing(field)
        if fps > 0:
            attributes["time_s"] = f"{frame / fps:.2f}"
        return ctx.sample(
            candidate.rel,
            width,
            height,
            key=f"{video.name}/{frame:06d}",
            group_id=video.name,
            frame=frame,
            labels=tuple(labels),
            attributes=attributes,
        )

    def _labels(
        self, ctx: ScanContext, video: _Video, frame: int, attributes: dict[str, str]
    ) -> tuple[list[str], list[str]]:
        """Set the frame's phase and tool attributes; the tools present and the labels the
        tables leave out. Raises :class:`LabelProblem` for a contradictory or unknown value."""
        o = self.options
        phases, tools = video.phases, video.tools
        labels: list[str] = []
        left_out: list[str] = []
        markers = frozenset(o.missing_values)
        for table in (phases, tools):
            if table is not None and frame in table[2]:
                raise LabelProblem(f"listed twice in {table[0]} with different values")
        listed = phases is not None and frame in phases[1].index
        raw_phase = str(phases[1].at[frame, o.phase_column]).strip() if listed else ""
        if not listed or is_missing(raw_phase, markers):
            left_out.append(o.phase_column)
        else:
            attributes["source_label"] = raw_phase
            attributes["phase"] = ctx.canonical(raw_phase)
        if tools is not None and frame in tools[1].index:
            labels = self._tools(ctx, tools, frame, attributes, markers, left_out)
        elif o.tool_table:
            left_out.append("tools")  # no tool row for this frame: presence unknown
        return labels, left_out

    def _tools(self, ctx, tools, frame, attributes, markers, left_out) -> list[str]:
        """Set ``tool:<name>`` = 0/1 for each tool cell of the frame (a missing cell goes to
        ``left_out``); the tools present."""
        o = self.options
        rel, table, _ = tools
        row = table.loc[frame]
        present: list[str] = []
        for column in sorted(table.columns):
            value = str(row[column]).strip()
            if is_missing(value, markers):
                left_out.append(column)
                continue
            if value not in (o.tool_present, o.tool_absent):
                raise LabelProblem(
                    f"{column} = {value!r} in {rel} is neither {o.tool_present!r} nor "
                    f"{o.tool_absent!r}"
                )
            name = ctx.canonical(column)
            attributes[f"tool:{name}"] = "1" if value == o.tool_present else "0"
            if value == o.tool_present and o.tools_as_labels:
                present.append(name)
        return present

"""``nifti_pairs``: image and label NIfTI files paired by name, per case folder or flat
(BraTS ``<case>_flair.nii`` .. ``<case>_seg.nii``, ACDC ``patientNNN_frameMM.nii.gz`` +
``_gt``, CAMUS ``patientNNNN_2CH_ED.nii.gz`` + ``_gt``, AbdomenCT-1K ``Case_NNNNN_0000`` +
``Mask/Case_NNNNN``).

``images_glob`` finds one anchor file per case (or per frame/view); ``label_replace`` rewrites
its relative path into the label file's, and ``label_alternatives`` into other places the
owners' releases put it (the first file present wins: BraTS 2020 case 355's misnamed
segmentation, AbdomenCT-1K masks unpacked without a ``Mask/`` folder); ``sequences`` rewrites
it into each MR sequence of the same case (one sample per sequence per slice, same slice index,
so same-case cross-sequence pairs line up); named groups of ``image_regex`` become attributes;
``info_file`` adds ``key: value`` lines of a per-case text file (its name may use the regex
groups); ``phase_from_info`` names the frame whose number an info key (ACDC ``ED``/``ES``)
gives; ``case_tables`` adds columns of per-case CSV tables (BraTS ``name_mapping.csv``).

An info line or table cell holding a "no value" marker (``missing_values``), a case a table
does not list, and a frame no info key names leave that attribute out of the case's samples
and are counted (issue 23); a case listed twice in a table with different values contradicts
itself and is quarantined.
"""

from __future__ import annotations

import csv
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..errors import ImageProblem, SourceError
from ..records import QuarantineEntry, Sample
from ..store.table_text import check_text_table
from .base import (
    LAYOUTS,
    MISSING_MARKERS,
    FileCandidate,
    FileLayout,
    ScanContext,
    attribute_caps,
    is_missing,
)
from .discovery import Alternatives, Expect
from .volume_slices import (
    VOLUME_PROVIDES,
    CaseVolumes,
    VolumeSliceOptions,
    read_slice,
    slice_candidates,
)


class CaseTable(BaseModel):
    """A table of one row per case beside the cases (BraTS ``survival_info.csv``)."""

    model_config = ConfigDict(extra="forbid")

    # below the root; {dir} = the anchor's folder, {parent} = the folder holding that folder
    file: str
    key_column: str  # the column naming the case (compared with the 'case' regex group)
    columns: list[str]  # kept as attributes under their own names
    sep: str = ","


class NiftiPairsOptions(VolumeSliceOptions):
    images_glob: str  # relative to the root, e.g. "**/BraTS20_Training_*_flair.nii"
    image_regex: str = r"(?P<case>[^/]+?)\.nii(\.gz)?$"  # needs a 'case' group
    label_replace: tuple[str, str]  # (regex, replacement) on the anchor's relative path
    # further (regex, replacement) pairs tried in order when label_replace's file is absent
    label_alternatives: list[tuple[str, str]] = []
    # said after "<label> is missing" (e.g. that the owners hold some labels back)
    unlabelled_note: str = ""
    sequences: dict[str, str] = {}  # sequence name -> replacement of sequence_regex
    sequence_regex: str = ""
    labels: dict[int, str]  # label value -> raw structure name (as the owners document it)
    modality: str | None = None  # default: the manifest part's modality
    group: str = "case"  # regex group that names the patient
    # e.g. "{dir}/Info.cfg" (ACDC); named groups of image_regex fill in too:
    # "{dir}/Info_{view}.cfg" (CAMUS, one file per view)
    info_file: str | None = None
    phase_from_info: dict[str, str] = {}  # regex group -> info keys whose value it may equal
    case_tables: list[CaseTable] = []
    # an info value or table cell holding one of these means "not available"
    missing_values: list[str] = list(MISSING_MARKERS)


class _Contradiction(Exception):
    """A case a table lists twice with different values (a quarantine reason)."""


@LAYOUTS.register("nifti_pairs")
class NiftiPairs(FileLayout):
    name = "nifti_pairs"
    counts_cheaply = False  # candidates come from reading each label volume
    Options = NiftiPairsOptions

    def __init__(self, options: NiftiPairsOptions):
        super().__init__(options)
        self._markers = frozenset(options.missing_values)

    def expects(self) -> Alternatives:
        return [[Expect(self.options.images_glob)]]

    def provides(self) -> set[str]:
        o = self.options
        columns = [c for t in o.case_tables for c in t.columns]
        return VOLUME_PROVIDES | attribute_caps([*(o.sequences and ["sequence"]), *columns])

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate | QuarantineEntry]:
        """The slices of every anchor ``images_glob`` finds, in path order; an anchor whose
        name does not match, whose label or sequence file is missing or that a case table
        contradicts is one quarantine entry in its place."""
        o = self.options
        anchors = sorted(
            p for p in ctx.root.glob(o.images_glob) if p.is_file() and not p.name.startswith("._")
        )
        if not anchors:
            raise SourceError(
                f"{ctx.source}: no image volume matches {o.images_glob!r} under the source root",
                where=str(ctx.root),
                fix="point ROOT at the unpacked dataset (see the source's docs page)",
            )
        tables = _CaseTables(ctx, self._markers)
        info_keys: set[str] = set()
        pattern = re.compile(o.image_regex)
        for anchor in anchors:
            case = self._case(ctx, anchor, pattern, tables, info_keys)
            if isinstance(case, QuarantineEntry):
                yield case
            else:
                yield from slice_candidates(ctx, o, case)

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        """One sequence of one slice (the label volume was read by ``candidates``)."""
        return read_slice(ctx, candidate)

    def _case(
        self,
        ctx: ScanContext,
        anchor: Path,
        pattern: re.Pattern,
        tables: _CaseTables,
        info_keys: set[str],
    ) -> CaseVolumes | QuarantineEntry:
        """One anchor's case (its files, info and table values), or why it has none."""
        o = self.options
        rel = ctx.rel(anchor)
        found = pattern.search(rel)
        if found is None or "case" not in found.groupdict():
            return ctx.quarantine(rel, f"file name does not match {o.image_regex!r}")
        groups = {k: v for k, v in found.groupdict().items() if v is not None}
        label = self._label(ctx, rel)
        images = self._images(ctx, rel)
        missing = [p for p in [label, *(p for p, _ in images.values())] if not p.is_file()]
        if missing:
            note = f" ({o.unlabelled_note})" if missing[0] == label and o.unlabelled_note else ""
            return ctx.quarantine(rel, f"{ctx.rel(missing[0])} is missing{note}")
        attributes = {k: v for k, v in groups.items() if k != "case"}
        info, left_out = self._info(ctx, anchor, groups, info_keys)
        attributes.update(info)
        try:
            values, table_left_out = tables.values(o.case_tables, rel, groups["case"])
        except _Contradiction as exc:
            return ctx.quarantine(rel, str(exc))
        attributes.update(values)
        stem = re.sub(r"\.nii(\.gz)?$", "", Path(rel).name)
        return CaseVolumes(
            case=groups["case"] if o.sequences else stem,
            images=images,
            label=label,
            labels=o.labels,
            modality=o.modality or ctx.modality,
            group_id=groups.get(o.group, groups["case"]),
            attributes=attributes,
            missing=tuple(left_out + table_left_out),
        )

    def _label(self, ctx: ScanContext, rel: str) -> Path:
        """The label file: the first of label_replace and label_alternatives that exists
        (label_replace's when none does, so the reason names the usual place)."""
        paths = [
            ctx.root / re.sub(pattern, repl, rel)
            for pattern, repl in [self.options.label_replace, *self.options.label_alternatives]
        ]
        return next((p for p in paths if p.is_file()), paths[0])

    def _images(self, ctx: ScanContext, rel: str) -> dict[str, tuple[Path, int | None]]:
        if not self.options.sequences:
            return {"": (ctx.root / rel, None)}
        return {
            name: (ctx.root / re.sub(self.options.sequence_regex, repl, rel), None)
            for name, repl in self.options.sequences.items()
        }

    def _info(
        self, ctx: ScanContext, anchor: Path, groups: dict[str, str], keys_seen: set[str]
    ) -> tuple[dict[str, str], list[str]]:
        """The info file's ``key: value`` lines, and the keys left out (empty or a marker; the
        phase when no info key names the frame)."""
        o = self.options
        if o.info_file is None:
            return {}, []
        path = Path(o.info_file.format(**{**groups, "dir": anchor.parent.as_posix()}))
        info: dict[str, str] = {}
        left_out: list[str] = []
        if path.is_file():
            check_text_table(path, "info file")
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                key, sep, value = line.partition(":")
                if not sep or not key.strip():
                    continue
                if is_missing(value, self._markers):
                    left_out.append(key.strip())
                else:
                    info[key.strip()] = value.strip()
            seen_here = set(info) | set(left_out)
            if not seen_here <= keys_seen:  # noted once per new key, not once per file
                keys_seen |= seen_here
                ctx.note_table(Path(o.info_file), sorted(keys_seen))
        for group, phase_keys in o.phase_from_info.items():
            number = re.sub(r"\D", "", groups.get(group, ""))
            for key in phase_keys.split(","):
                if number and info.get(key, "").isdigit() and int(info[key]) == int(number):
                    info["phase"] = key
            if number and "phase" not in info:
                left_out.append("phase")
        return info, left_out


class _CaseTables:
    """The case tables of one scan, each read once."""

    def __init__(self, ctx: ScanContext, markers: frozenset[str]):
        self.ctx = ctx
        self._markers = markers
        self._tables: dict[str, dict[str, dict[str, str | None]] | None] = {}
        self._conflicts: dict[str, dict[str, str]] = {}

    def values(
        self, case_tables: list[CaseTable], rel: str, case: str
    ) -> tuple[dict[str, str], list[str]]:
        """The case's cells of every case table, and the columns left out (a marker, an empty
        cell, a case the table does not list, a table that is not there)."""
        values: dict[str, str] = {}
        left_out: list[str] = []
        folder = posixpath.dirname(rel) or "."
        for table in case_tables:
            where = posixpath.normpath(
                table.file.format(dir=folder, parent=posixpath.dirname(folder) or ".")
            )
            rows = self._read(table, where)
            if rows is not None and case in self._conflicts.get(where, {}):
                raise _Contradiction(
                    f"{case} is listed twice in {where} with different values "
                    f"({self._conflicts[where][case]})"
                )
            row = (rows or {}).get(case) or {}
            for column in table.columns:
                value = row.get(column)
                if value is None:
                    left_out.append(column)
                else:
                    values[column] = value
        return values, left_out

    def _read(self, table: CaseTable, where: str) -> dict[str, dict[str, str | None]] | None:
        """``{case: {column: value or None}}`` of one table, read once; None when absent."""
        ctx = self.ctx
        if where in self._tables:
            return self._tables[where]
        try:
            path = ctx.safe_path(where)
        except ImageProblem as exc:
            raise SourceError(
                f"{ctx.source}: case table {table.file!r} leaves the source root ({exc})",
                where=str(ctx.root),
                fix="case_tables paths are relative to the source root",
            ) from None
        if not path.is_file():
            self._tables[where] = None
            return None
        check_text_table(path, "case table", table.sep)
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle, delimiter=table.sep)
            header = [c.strip() for c in reader.fieldnames or []]
            lacking = [c for c in [table.key_column, *table.columns] if c not in header]
            if lacking:
                raise SourceError(
                    f"{ctx.source}: {where} has no column(s) {', '.join(lacking)} "
                    f"(columns: {', '.join(header)})",
                    where=str(path),
                    fix="check the manifest's case_tables against the owners' table",
                )
            ctx.note_table(path, header)
            rows: dict[str, dict[str, str | None]] = {}
            conflicts: dict[str, str] = {}
            for raw in reader:
                cells = {(k or "").strip(): v for k, v in raw.items()}
                key = (cells.get(table.key_column) or "").strip()
                if is_missing(key, self._markers):
                    continue
                row = {
                    c: None
                    if is_missing(cells.get(c), self._markers)
                    else (cells.get(c) or "").strip()
                    for c in table.columns
                }
                if key in rows and rows[key] != row:
                    conflicts[key] = f"{rows[key]} and {row}"
                rows[key] = row
        self._tables[where] = rows
        self._conflicts[where] = conflicts
        return rows

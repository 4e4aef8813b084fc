"""What every layout shares: the scan context, the :class:`FileLayout` base and the registry.

A layout's ``scan`` yields, for every candidate file it finds, exactly one
:class:`~medvqa_build.records.Sample` or one :class:`~medvqa_build.records.QuarantineEntry`,
so ``found = converted + quarantined``. :class:`FileLayout` owns that loop; a layout says
how its candidates are found and how one is read.
"""

from __future__ import annotations

import csv
import os
import zipfile
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ImageProblem, SourceError, describe_validation_error
from ..media.image import DEFAULT_MAX_PIXELS
from ..records import QuarantineEntry, Sample
from ..registry import Registry
from ..store.memory import budget_reason
from ..store.paths import contained_path, not_a_file, path_problem, without_suffix
from .discovery import Expect


class LabelProblem(Exception):
    """A raw label string that the manifest's label map does not know."""


# What reading a malformed dataset-supplied file raises inside a layout (a cell that is not a
# number, an entry of the wrong type, bytes that are not UTF-8, a cut XML or XLSX file): a
# problem of the data, never a reason to end the build with a traceback. ValueError covers
# UnicodeDecodeError, json.JSONDecodeError and pandas' ParserError/EmptyDataError; SyntaxError
# covers xml.etree's ParseError.
MALFORMED: tuple[type[BaseException], ...] = (
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    OverflowError,
    SyntaxError,
    csv.Error,
    zipfile.BadZipFile,
    OSError,
)


def malformed_text(exc: BaseException) -> str:
    """``Type: first line of the message`` (a library's message may span lines)."""
    lines = str(exc).strip().splitlines()
    first = lines[0][:300] if lines else ""
    return f"{exc.__class__.__name__}: {first}" if first else exc.__class__.__name__


# cells that mean "no value" in the owners' label tables, whatever the dataset: a layout adds
# the markers its dataset's documentation names (e.g. "-1", "not assessed") in its options
MISSING_MARKERS = ("", "nan", "NaN", "NAN", "NA", "N/A", "n/a", "null", "NULL", "None", "none")


_DEFAULT_MARKERS = frozenset(MISSING_MARKERS)


def is_missing(value: object, markers: Iterable[str] = _DEFAULT_MARKERS) -> bool:
    """Whether a table cell holds no value (``None``, a float NaN or one of ``markers``;
    pass a frozenset when calling once per cell)."""
    if value is None:
        return True
    if isinstance(value, float) and value != value:
        return True
    if not isinstance(markers, frozenset | set):
        markers = set(markers)
    return str(value).strip() in markers


@dataclass
class ScanContext:
    """Where and how one layout part is scanned."""

    source: str
    root: Path
    part: str
    modality: str
    scene: str | None
    label_map: dict[str, str] = field(default_factory=dict)
    verify: str = "header"
    # pixels per image (recipe key max_pixels): a header claiming more is quarantined, undecoded
    max_pixels: int | None = DEFAULT_MAX_PIXELS
    # this process handles candidates i with i % shard_count == shard_index (see defer)
    shard_index: int = 0
    shard_count: int = 1
    candidates_seen: int = field(default=0, init=False, repr=False)
    # labels a table left empty or marked "not assessed": field -> count (see label_missing)
    labels_missing: Counter = field(default_factory=Counter, init=False, repr=False)
    # choices a layout made for the data that the report should show (e.g. which channel of a
    # 4-D volume was sliced): note -> count
    notes: Counter = field(default_factory=Counter, init=False, repr=False)
    _missing_here: bool = field(default=False, init=False, repr=False)
    # label tables read (path below root -> columns), for `medvqa-build inspect`
    tables: dict[str, list[str]] = field(default_factory=dict, init=False, repr=False)
    # folders below root found free of symbolic links during this scan (see contained_path)
    _link_free: set[str] = field(default_factory=set, init=False, repr=False)

    def defer(self, fn, *args, **kwargs):
        """Do one candidate's work (``fn(*args)`` -> Sample or QuarantineEntry) here, or return
        None when another shard owns it. Shardable layouts route every yield through this, so
        candidate ``i`` is the ``i``-th call in every process and its owner is ``i % n``."""
        index = self.candidates_seen
        self.candidates_seen += 1
        if self.shard_count > 1 and index % self.shard_count != self.shard_index:
            return None
        return fn(*args, **kwargs)

    def label_missing(self, name: str, n: int = 1) -> None:
        """Count a label the dataset left out for the current candidate (an empty cell,
        ``NaN``, a "not assessed" marker): the sample keeps its other labels."""
        self.labels_missing[name] += n
        self._missing_here = True

    def note_table(self, path: Path, columns) -> None:
        """Record a label table the layout read and its columns (shown by ``inspect``)."""
        rel = self.rel(path) if path.is_absolute() and path.is_relative_to(self.root) else path
        self.tables[str(rel)] = [str(c) for c in columns]

    def take_missing_labels(self) -> bool:
        """Whether the candidate just yielded had labels left out (and reset for the next)."""
        here, self._missing_here = self._missing_here, False
        return here

    def canonical(self, raw: str) -> str:
        """Map a raw label through the manifest's label map (identity when the map is empty)."""
        raw = str(raw).strip()
        if not self.label_map:
            return raw
        if raw in self.label_map:
            return self.label_map[raw]
        raise LabelProblem(f"label {raw!r} is not in the manifest's label_map")

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def safe_path(self, rel: str | Path) -> Path:
        """``root / rel`` for a path read from a table or annotation file.

        A dataset's tables are input, not code: a value that is absolute, climbs out with
        ``..`` or names a symbolic link whose target lies outside the root raises
        :class:`ImageProblem` (so the row is quarantined with that reason).
        """
        return contained_path(self.root, rel, self._link_free)

    def why_absent(self, rel: str, folder: str) -> str:
        """Why a file a table lists (``rel`` below the root) was not found among ``folder``'s
        files: a path that leaves the root (``../``), a special file, or no such file."""
        problem = path_problem(self.root, rel)
        if problem is not None:
            return problem
        if os.path.lexists(self.root / rel):
            return f"{rel!r} {not_a_file(self.root / rel)}"
        return f"no such file under {folder!r}"

    def sample_id(self, key: str) -> str:
        return f"{self.source}:{key}"

    def sample(
        self,
        rel: str,
        width: int,
        height: int,
        *,
        key: str | None = None,
        group_id: str | None = None,
        modality: str | None = None,
        **fields: Any,
    ) -> Sample:
        """The :class:`Sample` of ``rel`` (an image path below the root) in this part: its id
        is ``<source>:<key>`` (default: ``rel`` without its suffix), its group the key unless
        given, its modality and scene the part's; ``fields`` are the other Sample fields
        (labels, attributes, regions, split, frame, slice)."""
        key = without_suffix(rel) if key is None else key
        return Sample(
            sample_id=self.sample_id(key),
            source=self.source,
            image=rel,
            width=width,
            height=height,
            modality=modality or self.modality,
            scene=self.scene,
            group_id=key if group_id is None else group_id,
            **fields,
        )

    def quarantine(self, file: str | Path, reason: str) -> QuarantineEntry:
        if isinstance(file, Path) and file.is_absolute():
            file = self.rel(file) if file.is_relative_to(self.root) else str(file)
        return QuarantineEntry(file=str(file), reason=reason, source=self.source)

    def _manifest_path(self, rel: str, what: str) -> Path:
        """A manifest's folder or file option, refused when it leaves the source root."""
        try:
            return contained_path(self.root, rel)
        except ImageProblem as exc:
            raise SourceError(
                f"{self.source}: the {what} path {rel!r} leaves the source root ({exc})",
                where=str(self.root),
                fix="manifest paths are relative to the source root; remove '..' or the "
                "leading '/'",
            ) from None

    def require_dir(self, rel: str, what: str) -> Path:
        path = self._manifest_path(rel, what)
        if not path.is_dir():
            raise SourceError(
                f"{self.source}: expected the {what} folder {rel!r} under the source root",
                where=str(path),
                fix="point ROOT at the unpacked dataset (see the source's docs page)",
            )
        return path

    def require_file(self, rel: str, what: str) -> Path:
        path = self._manifest_path(rel, what)
        if not path.is_file():
            raise SourceError(
                f"{self.source}: expected the {what} file {rel!r} under the source root",
                where=str(path),
                fix="point ROOT at the unpacked dataset (see the source's docs page)",
            )
        return path


class Layout(Protocol):
    """A generic on-disk layout, configured by its validated ``Options``.

    ``expects`` is what a part needs under the source root to be there (alternatives of
    :class:`~medvqa_build.layouts.discovery.Expect`: root discovery and partial downloads rest
    on it); ``provides`` what its samples carry (capabilities, see
    :mod:`medvqa_build.tasks.requirements`), so a recipe's tasks are checked against the
    sources before anything is converted.
    """

    name: ClassVar[str]
    # True when every candidate's work goes through ScanContext.defer (parallel convert)
    shardable: ClassVar[bool]

    def expects(self) -> Sequence[Sequence[Expect]]: ...

    def provides(self) -> set[str]: ...

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]: ...


def attribute_caps(names: Iterable[str] | None) -> set[str]:
    """``attribute:<name>`` capabilities for attribute names (see :meth:`Layout.provides`)."""
    return {f"attribute:{n}" for n in names or ()}


@dataclass(frozen=True)
class FileCandidate:
    """One thing a :class:`FileLayout` found: the image path below the root (what a
    quarantine entry names) and what its ``read`` needs to know of it."""

    rel: str
    info: Any = None


class FileLayout(ABC):
    """Base of the layouts: finding candidates and reading one is theirs, the loop is here.

    Every candidate goes through :meth:`ScanContext.defer` (so convert can shard the work
    and ``inspect`` can count without reading), a per-file problem (:class:`ImageProblem`,
    :class:`LabelProblem`) becomes a quarantine entry naming the candidate and the reason,
    and :meth:`ScanContext.sample` builds the sample. ``candidates`` may also yield a
    :class:`QuarantineEntry` for something it can tell is bad without reading it (a file
    no table lists): it keeps its place in the scan order.
    """

    name: ClassVar[str]
    shardable: ClassVar[bool] = True
    # False where finding the candidates reads the data itself (label volumes): ``inspect``
    # then stops after its limit instead of counting them all
    counts_cheaply: ClassVar[bool] = True
    Options: ClassVar[type[LayoutOptions]]

    def __init__(self, options: LayoutOptions):
        self.options = options

    @abstractmethod
    def expects(self) -> Sequence[Sequence[Expect]]:
        """What the part needs under the source root (see :mod:`.discovery`)."""

    @abstractmethod
    def provides(self) -> set[str]:
        """What its samples carry (see :mod:`medvqa_build.tasks.requirements`)."""

    @abstractmethod
    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate | QuarantineEntry]:
        """Every candidate of the part, in a stable order; tables are read here, once."""

    @abstractmethod
    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample | QuarantineEntry:
        """One candidate's sample; raise :class:`ImageProblem` or :class:`LabelProblem` (or
        return a quarantine entry) when it cannot be one."""

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry | None]:
        """Every candidate, deferred. A malformed table or index file that ``candidates``
        reads (the whole part depends on it) is one :class:`SourceError` line, not a
        traceback; the layouts name the file and field where they check it themselves."""
        candidates = self.candidates(ctx)
        while True:
            try:
                candidate = next(candidates)
            except StopIteration:
                return
            except MALFORMED as exc:
                raise SourceError(
                    f"{ctx.source}: the {self.name} layout cannot read its annotation files "
                    f"({malformed_text(exc)})",
                    where=str(ctx.root),
                    fix=f"the files are damaged or not the release's format: compare them with "
                    f"docs/sources/{ctx.source}.md, or download them again",
                ) from None
            yield ctx.defer(self._read_one, ctx, candidate)

    def _read_one(self, ctx: ScanContext, candidate) -> Sample | QuarantineEntry:
        """One candidate's sample, or its quarantine entry: a per-file problem, or a malformed
        annotation entry for this file (only the samples it describes are lost)."""
        if isinstance(candidate, QuarantineEntry):
            return candidate
        try:
            return self.read(ctx, candidate)
        except (ImageProblem, LabelProblem) as exc:
            return ctx.quarantine(candidate.rel, str(exc))
        except MALFORMED as exc:
            text = malformed_text(exc).replace(f"{ctx.root}/", "")  # no absolute path
            return ctx.quarantine(candidate.rel, f"malformed annotation or file ({text})")
        except MemoryError:  # past the worker's budget (store.memory.worker_budget)
            return ctx.quarantine(candidate.rel, budget_reason())


class LayoutOptions(BaseModel):
    """Base of each layout's options: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


LAYOUTS: Registry[type] = Registry("layout")


def make_layout(name: str, options: dict[str, Any], where: str) -> Layout:
    cls = LAYOUTS.get(name, where=where)
    try:
        opts = cls.Options.model_validate(options or {})
    except ValidationError as exc:
        raise SourceError(
            f"bad options for layout {name!r}: {describe_validation_error(exc)}", where=where
        ) from None
    return cls(opts)

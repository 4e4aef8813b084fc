"""The exporter interface: one build context in, one output folder out, byte-identical per
recipe.

An export format is an :class:`Exporter` subclass registered in ``EXPORTERS``, in the spirit of
datatrove's ``DiskWriter``: the base streams the items (one pass, never a list of them), asks
the format which items it leaves out and why (:meth:`Exporter.leave_out`), hands it each kept
item (:meth:`Exporter.write`, the one method a format must write), owns the files (atomic:
written aside and renamed into place, removed if the export fails), the image copies (named by
content, each written once), the licence of what was written, and returns the counts: items
written and items left out per reason. A format that needs a planning pass first (shard or part
cuts) makes it in :meth:`Exporter.start` over :meth:`Exporter.kept`; one that writes per-format
summaries (cards, task files, indexes) writes them in :meth:`Exporter.finish`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from ..errors import UsageError
from ..manifest import SourceManifest
from ..records import Item
from ..registry import Registry
from ..store.atomic import AtomicFile, write_atomic
from .card import LICENCE_FILE, licence_file, licence_metadata
from .common import ImageCopier, JsonListWriter, Kept, write_json


@dataclass(frozen=True)
class ExportContext:
    """Everything an exporter may use; no exporter reads the build directory by itself."""

    # Re-iterable: a list, or an on-disk ``tables.ItemTable`` read batch by batch on each
    # ``for``. Exporters iterate it (several times if they must) and keep small per-item
    # summaries only, never every item (or every image) at once.
    items: Iterable[Item]
    resolve: Callable[[str], Path]  # image reference -> file
    name: str  # export name from the recipe (file names, dataset name)
    recipe_yaml: str
    manifests: dict[str, SourceManifest]
    validation: dict[str, Any] = field(default_factory=dict)  # {"problems": n, "failed": bool}
    options: dict[str, Any] = field(default_factory=dict)  # recipe export.options[<format>]


class _Abortable(Protocol):
    def abort(self) -> None: ...


class Exporter(ABC):
    """One export of one build: ``Format(ctx, out).run()`` writes the folder ``out`` and
    returns its stats (the format's own, then ``written``, ``left_out`` and ``sources``)."""

    # what the format holds, when it holds only some items: an export that would be empty
    # while the build has items is refused ("the <format> export holds <holds> items ...")
    holds: ClassVar[str | None] = None
    image_folder: ClassVar[str] = "images"  # where :meth:`image` copies images

    def __init__(self, ctx: ExportContext, out: Path):
        self.ctx, self.out, self.options = ctx, Path(out), ctx.options
        self.images = ImageCopier(self.out, ctx.resolve, self.image_folder)
        self.written = 0
        self.left_out: Counter[str] = Counter()
        self.sources: set[str] = set()  # of the items written: what the licence covers
        self._files: list[JsonListWriter | AtomicFile] = []  # committed by the base
        self._tracked: list[_Abortable] = []  # the format's own writers, aborted on failure

    # -- what a format implements --------------------------------------------------------
    def leave_out(self, item: Item) -> str | None:
        """Why the format cannot hold ``item`` (counted under that reason), or None."""
        return None

    def start(self) -> None:
        """Work before the first item: planning passes over :meth:`kept`, files to open."""
        return None

    @abstractmethod
    def write(self, item: Item) -> None:
        """Write one kept item (items come in build order)."""

    def finish(self) -> dict[str, Any]:
        """Work after the last item (summaries, cards); returns the format's own stats."""
        return {}

    def abort(self) -> None:
        """Drop what the format opened by itself (the base drops the files it opened)."""
        return None

    # -- what the base gives it ----------------------------------------------------------
    def kept(self) -> Kept:
        """The items the format holds, a re-iterable filtered view (for planning passes)."""
        return Kept(self.ctx.items, lambda item: self.leave_out(item) is None)

    def image(self, ref: str, folder: str | None = None) -> str:
        """The path, relative to the export folder, of the copy of image ``ref``."""
        return self.images(ref, folder)

    def json_list(self, rel: str) -> JsonListWriter:
        """A JSON list file written element by element; closed (renamed into place) when the
        export finishes, removed if it fails."""
        writer = JsonListWriter(self.out / rel)
        self._files.append(writer)
        return writer

    def text_file(self, rel: str, **kw) -> AtomicFile:
        """A file written aside (``AtomicFile`` modes) and committed when the export finishes."""
        f = AtomicFile(self.out / rel, **kw)
        self._files.append(f)
        return f

    def track(self, writer: _Abortable) -> None:
        """A writer the format made (and closes) itself, aborted if the export fails."""
        self._tracked.append(writer)

    def write_file(self, rel: str, data: bytes | str) -> None:
        write_atomic(self.out / rel, data)

    def write_json(self, rel: str, data: Any) -> None:
        write_json(self.out / rel, data)

    def licence(self) -> dict[str, str]:
        """The card licence fields of the sources written (``license``, or ``other`` with a
        name and ``license_link``)."""
        return licence_metadata(self.ctx.manifests, sorted(self.sources))

    def write_licence_file(self) -> bool:
        """``LICENSE.md`` when the licence is ``other`` (what ``license_link`` points to)."""
        if self.licence()["license"] != "other":
            return False
        used = sorted(self.sources)
        self.write_file(LICENCE_FILE, licence_file(self.ctx.manifests, used, self.ctx.name))
        return True

    # -- the run -------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self._refuse_empty()
        self.out.mkdir(parents=True, exist_ok=True)
        try:
            self.start()
            for item in self.ctx.items:
                reason = self.leave_out(item)
                if reason is not None:
                    self.left_out[reason] += 1
                    continue
                self.write(item)
                self.written += 1
                self.sources.add(item.source)
            stats = self.finish()
            for f in self._files:
                _commit(f)
        except BaseException:
            for f in [*self._files, *self._tracked]:
                f.abort()  # a no-op for one already committed
            self.abort()
            raise
        return {
            **stats,
            "written": self.written,
            "left_out": dict(sorted(self.left_out.items())),
            "sources": sorted(self.sources),
        }

    def _refuse_empty(self) -> None:
        """Read up to the first item kept: an export with none of a build with items is an
        error, not an empty folder."""
        if self.holds is None:
            return
        seen = False
        for item in self.ctx.items:
            if self.leave_out(item) is None:
                return
            seen = True
        if seen:
            fmt = EXPORTERS.name_of(type(self)) or type(self).__name__
            raise UsageError(
                f"the {fmt} export holds {self.holds} items and this build has none",
                fix=f"remove {fmt!r} from export.formats",
            )


def _commit(f: JsonListWriter | AtomicFile) -> None:
    """Commit a file the format left open (it may have closed it itself, earlier)."""
    if isinstance(f, AtomicFile):
        if not f.fh.closed:
            f.commit()
    elif not f.closed:
        f.close()


EXPORTERS: Registry[type[Exporter]] = Registry("export format")


def export(fmt: str, ctx: ExportContext, out: Path, *, where: str | None = None) -> dict[str, Any]:
    """Write format ``fmt`` of ``ctx`` into ``out``; its stats (``written``, ``left_out``)."""
    entry = EXPORTERS.get(fmt, where=where)
    if not (isinstance(entry, type) and issubclass(entry, Exporter)):
        raise TypeError(
            f"export format {fmt!r} is registered as {entry!r}, not an Exporter subclass "
            "(see CONTRIBUTING.md, 'Add an exporter')"
        )
    return entry(ctx, out).run()

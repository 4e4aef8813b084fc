"""Root discovery: which folder is a source's root, and which of its parts are there.

Users point ROOT at whatever folder they have: the folder an archive unpacked to, the folder
holding it, or a download folder one level above that, sometimes with the extra
``<name>/<name>/`` wrapper that some unzip tools add. Every layout declares what its part
needs under the root (:meth:`expects`, a list of alternatives of :class:`Expect`), and one rule
here turns ROOT into the root the manifest's paths are relative to:

1. Candidates, nearest first: ROOT itself and, when ROOT is itself a folder the manifest names
   (``kvasir-dataset-v2`` for Kvasir), the folder above it; then ROOT's sub-folders; then
   theirs. The first level with a candidate holding any part wins.
2. A folder whose only entry is a folder of the same name is a wrapper, not the data: the
   anchor is looked for inside it instead.
3. Two candidates on the winning level are ambiguous: one line names both.

A part is *found* when every path of one of its alternatives exists; a source with at least
one found part converts, and the others are reported as missing with what they lack.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SourceError

# entries an unzip tool or a file manager leaves beside the data
_NOISE = ("__MACOSX", ".DS_Store", "Thumbs.db", "desktop.ini")
MAX_SUBFOLDERS = 256  # sub-folders of one folder looked at (a download folder, not an image folder)
# the archive a folder was unpacked from, often left beside what it made (GastroVision's zip
# holds a zip of the same name; ``unzip x.zip -d x`` leaves ``x/x.zip`` next to ``x/x/``)
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".7z", ".rar")


def _skipped(name: str) -> bool:
    """Entries that are never data: hidden files, macOS resource forks and unzip leftovers."""
    return name.startswith(".") or name in _NOISE


@dataclass(frozen=True)
class Expect:
    """One thing a part needs under its root.

    ``path`` is relative to the root: a folder or file (``kind``), or a glob (``*``, ``?``,
    ``**``). With ``name_regex``, ``path`` is a folder that must appear at any depth below the
    root inside a folder whose name matches the regex (EndoVis ``seq_N/left_frames``).
    """

    path: str
    kind: str = "any"  # "dir", "file" or "any"
    name_regex: str | None = None

    def describe(self) -> str:
        if self.name_regex:
            return f"<folder matching {self.name_regex}>/{self.path}/"
        return self.path + ("/" if self.kind == "dir" else "")

    @property
    def literal_prefix(self) -> tuple[str, ...]:
        """The leading folder names of ``path`` that hold no wildcard."""
        if self.name_regex:
            return ()
        parts = []
        for part in self.path.replace("\\", "/").split("/"):
            if part in ("", ".") or any(c in part for c in "*?["):
                break
            parts.append(part)
        return tuple(parts)


Alternatives = Sequence[Sequence[Expect]]  # any one alternative, all of its Expects


def expect_paths(*paths: str | None, kind: str = "any") -> list[Expect]:
    """Expects for the given relative paths, leaving out ``None`` and the root itself."""
    return [Expect(p, kind) for p in paths if p and p.strip("/") not in ("", ".")]


def template_dir(template: str | None) -> str | None:
    """The folder part of a per-item path template before its first ``{placeholder}``
    (``phase_annotations/{video}-phase.txt`` -> ``phase_annotations``), or None."""
    if not template:
        return None
    head = template.split("{", 1)[0]
    return head.rpartition("/")[0] or None


def _is_wrapper(path: Path) -> bool:
    """A folder holding nothing but one folder of its own name (``x/x/``), and perhaps the
    archive it came from. Stops at the first entry that rules it out: an image folder of
    10^5 files is not listed whole (root discovery runs in every convert shard)."""
    folders = 0
    try:
        with os.scandir(path) as entries:
            for e in entries:
                if _skipped(e.name):
                    continue
                if _is_dir(e):
                    folders += 1
                    if folders > 1 or e.name != path.name:
                        return False
                elif not e.name.lower().endswith(ARCHIVE_SUFFIXES):
                    return False
    except OSError:
        return False
    return folders == 1


def _is_dir(entry: os.DirEntry) -> bool:
    """A folder (a link loop or an unreadable entry is not one)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _walk(root: Path):
    """``os.walk`` in sorted order, never into hidden folders or ``__MACOSX`` (whose
    resource-fork copies repeat the data's folder names)."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not _skipped(d))
        yield dirpath, dirnames, filenames


def _exists(root: Path, expect: Expect) -> bool:
    if expect.name_regex:
        pattern = re.compile(expect.name_regex)
        for dirpath, _, _ in _walk(root):
            here = Path(dirpath)
            if here != root and pattern.search(here.name) and (here / expect.path).is_dir():
                return True
        return False
    if any(c in expect.path for c in "*?["):
        matches = glob.iglob(expect.path, root_dir=root, recursive=True)
        return any(not any(_skipped(p) for p in Path(m).parts) for m in matches)
    path = root / expect.path
    if expect.kind == "dir":
        return path.is_dir() and not _is_wrapper(path)
    if expect.kind == "file":
        return path.is_file()
    return path.exists() and not (path.is_dir() and _is_wrapper(path))


@dataclass(frozen=True)
class PartSpec:
    """What root discovery needs to know of one layout part."""

    name: str
    alternatives: Alternatives
    required: bool = False


@dataclass(frozen=True)
class PartPresence:
    name: str
    found: bool
    lacking: tuple[str, ...] = ()  # of the nearest alternative, when not found
    matched: tuple[Expect, ...] = ()  # the alternative found


def part_presence(root: Path, spec: PartSpec) -> PartPresence:
    """Whether ``spec`` is found under ``root``; if not, what its nearest alternative lacks."""
    if not spec.alternatives:
        return PartPresence(spec.name, True)
    best: tuple[str, ...] | None = None
    for alternative in spec.alternatives:
        lacking = tuple(e.describe() for e in alternative if not _exists(root, e))
        if not lacking:
            return PartPresence(spec.name, True, matched=tuple(alternative))
        if best is None or len(lacking) < len(best):
            best = lacking
    return PartPresence(spec.name, False, best or ())


@dataclass
class RootResolution:
    """The root a source's manifest paths are relative to, and what was found there."""

    source: str
    given: Path
    root: Path
    parts: list[PartPresence] = field(default_factory=list)

    @property
    def found(self) -> list[str]:
        return [p.name for p in self.parts if p.found]

    @property
    def missing(self) -> dict[str, str]:
        return {p.name: "not found: " + ", ".join(p.lacking) for p in self.parts if not p.found}

    def line(self) -> str:
        """One line for the console: where ROOT led and which parts are there."""
        where = str(self.root) if self.root == self.given else f"{self.given} -> {self.root}"
        text = f"{self.source}: root {where}; parts found: {', '.join(self.found)}"
        if self.missing:
            text += "; missing: " + "; ".join(f"{k} ({v})" for k, v in self.missing.items())
        return text

    def to_dict(self) -> dict:
        return {
            "given": str(self.given),
            "root": str(self.root),
            "found": self.found,
            "missing": self.missing,
        }


def _subfolders(folder: Path) -> list[Path]:
    """The folders below ``folder``; a wrapper (``x/x/``) brings the folder inside it too, on
    the same level (the data may start in either)."""
    try:
        entries = sorted(
            (e for e in os.scandir(folder) if _is_dir(e) and not _skipped(e.name)),
            key=lambda e: e.name,
        )
    except OSError:
        return []
    out = []
    for entry in entries[:MAX_SUBFOLDERS]:
        path = Path(entry.path)
        out.append(path)
        while _is_wrapper(path):  # rule 2: x/x/ is looked through, it is not a level
            path = path / path.name
            out.append(path)
    return out


def _ancestors_named(
    given: Path, specs: Iterable[PartSpec], archive_folders: Sequence[str]
) -> list[Path]:
    """Folders above ``given`` whose manifest path ends at ``given``: ROOT pointed at the
    unpacked folder (``kvasir-dataset-v2``, or a folder an archive of the manifest unpacks
    to) or a folder inside a manifest path (``segmented-images/images``)."""
    out: list[Path] = [given.parent] if given.name in archive_folders else []
    for spec in specs:
        for alternative in spec.alternatives:
            for expect in alternative:
                prefix = expect.literal_prefix
                for k in range(len(prefix), 0, -1):
                    tail = prefix[:k]
                    if given.parts[-k:] == tail and len(given.parts) > k:
                        out.append(given.parents[k - 1])
    return list(dict.fromkeys(out))


def resolve_root(
    source: str,
    given: str | os.PathLike,
    specs: Sequence[PartSpec],
    fix: str,
    archive_folders: Sequence[str] = (),
) -> RootResolution:
    """The root of ``source`` for the user's ``given`` folder (see the module docstring).

    ``archive_folders`` are the folders the owners' archives unpack to (the manifest's
    ``archives``): such a folder is data, so the root is the folder holding it.

    Raises :class:`SourceError` (one line) when no part is found anywhere it looked, when a
    required part is missing, or when two candidate folders hold the data.
    """
    given = Path(given).expanduser().resolve()
    archives = frozenset(archive_folders)
    levels = [[given, *_ancestors_named(given, specs, archives)]]
    children = _subfolders(given)
    levels.append(children)
    levels.append([g for c in children for g in _subfolders(c)])
    looked: list[Path] = []
    for level in levels:
        hits = []
        for candidate in dict.fromkeys(level):
            looked.append(candidate)
            if (hit := _hit(source, given, candidate, specs)) is not None:
                hits.append(hit)
        hits = [a for a in hits if not any(_holds(a, b, archives) for b in hits if b is not a)]
        if len(hits) > 1:
            a, b = hits[0], hits[1]
            raise SourceError(
                f"{source}: ROOT holds the data twice: {a.root} (parts {', '.join(a.found)}) "
                f"and {b.root} (parts {', '.join(b.found)})",
                where=str(given),
                fix="pass the one folder you want converted",
            )
        if hits:
            return _check_required(_deepest(hits[0], specs, archives), specs)
    raise _nothing_found(source, given, specs, looked, fix)


def _nothing_found(
    source: str, given: Path, specs: Sequence[PartSpec], looked: list[Path], fix: str
) -> SourceError:
    """One line: what was looked for and where; or, when a folder holds part of a part (a
    table without its images), what that folder lacks."""
    for candidate in looked:
        for spec in specs:
            presence = part_presence(candidate, spec)
            total = min((len(a) for a in spec.alternatives), default=0)
            if 0 < len(presence.lacking) < total:
                return SourceError(
                    f"{source}: part {spec.name!r} is incomplete in {candidate}: "
                    f"{', '.join(presence.lacking)} not found",
                    where=str(given),
                    fix=fix,
                )
    wanted = "; ".join(
        f"{s.name}: " + " or ".join(", ".join(e.describe() for e in alt) for alt in s.alternatives)
        for s in specs
    )
    return SourceError(
        f"{source}: found none of its parts ({wanted}) in ROOT, the folder above it or "
        f"{len(looked) - 1} folder(s) below it",
        where=str(given),
        fix=fix,
    )


def _hit(source: str, given: Path, candidate: Path, specs) -> RootResolution | None:
    presence = [part_presence(candidate, s) for s in specs]
    return (
        RootResolution(source, given, candidate, presence)
        if any(p.found for p in presence)
        else None
    )


def _holds(outer: RootResolution, inner: RootResolution, archives: frozenset[str]) -> bool:
    """Whether ``outer`` finds the data only through ``inner``, a folder inside it (a manifest
    that accepts both ``images/`` and ``CVC-300/images/`` sees CVC-300 twice), or ``outer``
    is an archive's folder and ``inner`` the folder holding it."""
    if outer.root.name in archives and inner.root == outer.root.parent:
        return set(inner.found) >= set(outer.found)
    return (
        inner.root != outer.root
        and inner.root.is_relative_to(outer.root)
        and inner.root.name not in archives
        and set(inner.found) >= set(outer.found)
    )


def _deep_matches(root: Path, expect: Expect) -> list[tuple[str, ...]]:
    """Where a deep expect (a folder name pattern at any depth, or a glob starting with a
    wildcard) matches below ``root``: each match's path parts."""
    if expect.name_regex:
        pattern = re.compile(expect.name_regex)
        found = []
        for dirpath, dirnames, _ in _walk(root):
            here = Path(dirpath)
            if here != root and pattern.search(here.name) and (here / expect.path).is_dir():
                found.append(here.relative_to(root).parts)
                dirnames[:] = []  # a sequence does not nest another
        return found
    matches = glob.iglob(expect.path, root_dir=root, recursive=True)
    return [Path(m).parts for m in matches if not any(_skipped(p) for p in Path(m).parts)]


def _step(root: Path, expect: Expect, archives: frozenset[str]) -> tuple[str, ...]:
    """The sub-folders of ``root`` that every match of ``expect`` goes through before the
    data starts (empty: the data starts in ``root``).

    A manifest path ``CVC-300/images`` steps into ``CVC-300``. A deep match steps to the
    folder holding the archive folder it lies in (``MICCAI_BraTS2020_TrainingData``), or,
    for named sequence folders, into the one folder above them all that is not a sequence.
    """
    if not expect.name_regex and expect.literal_prefix:
        prefix = expect.literal_prefix
        return prefix[:1] if len(prefix) > 1 and prefix[0] not in archives else ()
    matches = _deep_matches(root, expect)
    if not matches:
        return ()
    pinned = {
        next((parts[:i] for i, name in enumerate(parts[:-1]) if name in archives), None)
        for parts in matches
    }
    if len(pinned) == 1 and None not in pinned:
        return pinned.pop()
    if expect.name_regex and None in pinned:
        heads = {parts[0] if len(parts) > 1 else None for parts in matches}
        head = heads.pop() if len(heads) == 1 else None
        if head is not None and head not in archives:
            return (head,)
    return ()


def _deepest(
    hit: RootResolution, specs: Sequence[PartSpec], archives: frozenset[str]
) -> RootResolution:
    """The same data's innermost root: while every matched path goes through the same
    sub-folders, and they hold the same parts themselves, step into them, so sample ids do not
    depend on which of the accepted shapes (or which folder above the data) the user passed.
    A folder an archive unpacks to is data: the root stays the folder holding it."""
    while True:
        steps = {_step(hit.root, e, archives) for p in hit.parts if p.found for e in p.matched}
        if len(steps) != 1 or () in steps:
            return hit
        inner = _hit(hit.source, hit.given, hit.root.joinpath(*steps.pop()), specs)
        if inner is None or not set(inner.found) >= set(hit.found):
            return hit
        hit = inner


def _check_required(resolution: RootResolution, specs: Sequence[PartSpec]) -> RootResolution:
    missing = resolution.missing
    required = [s.name for s in specs if s.required and s.name in missing]
    if required:
        raise SourceError(
            f"{resolution.source}: required part(s) {', '.join(required)} missing "
            f"({'; '.join(missing[n] for n in required)})",
            where=str(resolution.root),
            fix="unpack that part of the download into the same folder",
        )
    return resolution

"""The shared stage cache: a stage output addressed by its fingerprint, kept outside any one
build folder, so a second build folder over the same download reuses it (issue 35.2).

A stage opts in with ``shared_cache = True`` (convert: its fingerprint covers the manifest,
the root's path and files (names, sizes, times), the verify mode, the pixel limit and the
code of the stage and of the layouts it runs). Layout::

    <cache>/stages/<stage>/<key>-<fingerprint>/   the output's files and its _SUCCESS.json

where ``<cache>`` is ``$MEDVQA_STAGE_CACHE``, else ``$MEDVQA_CACHE``, else
``$XDG_CACHE_HOME/medvqa_build`` (``~/.cache/medvqa_build``); ``MEDVQA_STAGE_CACHE=off``
turns it off. Entries are written to a temp folder and renamed into place, marker last, so a
killed run leaves no entry that is read. A fetch touches the entry's marker, so its time is the
entry's last use: :func:`prune` deletes entries unused for a given number of days
(``medvqa-build clean --shared-cache --older-than DAYS``). Files are hard links where the
filesystem allows (no second copy of the bytes), copies elsewhere. A cache that cannot be
written is skipped with a log line: it never fails a build.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MARKER = "_SUCCESS.json"


def cache_root() -> Path | None:
    """The shared stage cache's folder, None when turned off."""
    explicit = os.environ.get("MEDVQA_STAGE_CACHE")
    if explicit:
        return None if explicit.lower() in ("off", "0", "none", "false") else Path(explicit)
    if os.environ.get("MEDVQA_CACHE"):
        return Path(os.environ["MEDVQA_CACHE"]) / "stages"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "medvqa_build" / "stages"


def entry(stage: str, key: str, fp: str) -> Path | None:
    root = cache_root()
    return None if root is None else root / stage / f"{key}-{fp}"


def _link_tree(src: Path, dst: Path, skip: str | None = None) -> None:
    def link(a: str, b: str) -> None:
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    ignore = shutil.ignore_patterns(skip) if skip else None
    shutil.copytree(src, dst, copy_function=link, ignore=ignore, dirs_exist_ok=True)


def fetch(stage: str, key: str, fp: str, into: Path) -> dict | None:
    """Fill ``into`` with the cached output of ``fp`` (its marker left out); its marker data,
    or None when there is no complete entry."""
    at = entry(stage, key, fp)
    if at is None:
        return None
    try:
        data = json.loads((at / MARKER).read_text())
        if data.get("fingerprint") != fp:
            return None
        _link_tree(at, into, skip=MARKER)
    except (OSError, ValueError):
        return None
    with contextlib.suppress(OSError):
        os.utime(at / MARKER)  # its last use, for prune
    log.info("%s %s: from the shared cache %s", stage, key, at)
    return data


def store(stage: str, key: str, fp: str, final: Path) -> None:
    """Keep a finished output in the shared cache (nothing when an entry exists already)."""
    at = entry(stage, key, fp)
    if at is None or (at / MARKER).is_file():
        return
    tmp = None
    try:
        at.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp-{os.getpid()}-", dir=at.parent))
        _link_tree(final, tmp, skip=MARKER)
        shutil.copy2(final / MARKER, tmp / MARKER)  # a copy: the build folder's may change
        if (at / MARKER).is_file():  # another build stored it meanwhile
            return
        shutil.rmtree(at, ignore_errors=True)  # an incomplete entry of a killed run
        os.replace(tmp, at)
        tmp = None
    except OSError as exc:
        log.warning("shared stage cache not written (%s); the build goes on", exc)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


@dataclass(frozen=True)
class Entry:
    """One shared-cache entry: where, its size, and when a build last stored or used it."""

    path: Path
    bytes: int
    last_used: float


def entries(root: Path | None = None) -> list[Entry]:
    """Every complete entry under the cache (``<root>/<stage>/<key>-<fingerprint>``), oldest
    use first. Hard links shared with build folders count in full: deleting the entry frees
    them only where no build folder still links them."""
    root = cache_root() if root is None else root
    found = []
    if root is None or not root.is_dir():
        return found
    for marker in sorted(root.glob(f"*/*/{MARKER}")):
        folder = marker.parent
        size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        found.append(Entry(folder, size, marker.stat().st_mtime))
    return sorted(found, key=lambda e: (e.last_used, str(e.path)))


def prune(older_than_days: float, *, dry_run: bool = False, root: Path | None = None):
    """Delete the entries no build has stored or used for ``older_than_days`` days (0: all);
    the deleted (or, with ``dry_run``, deletable) entries."""
    cutoff = time.time() - older_than_days * 86400
    stale = [e for e in entries(root) if e.last_used <= cutoff]
    if not dry_run:
        for e in stale:
            # the marker first: a half-deleted entry is never read
            (e.path / MARKER).unlink(missing_ok=True)
            shutil.rmtree(e.path, ignore_errors=True)
    return stale

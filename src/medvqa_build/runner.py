"""Content-addressed, atomic stage outputs: each stage's folder is named by a hash of its
inputs and config; it is built in a temp folder and renamed into place with a completion
marker, so an interrupted run leaves nothing half-written and a rerun reuses finished stages.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import __version__
from .memory import release_freed_memory
from .recipe import fingerprint
from .schema import _umask, atomic_path

log = logging.getLogger(__name__)

MARKER = "_SUCCESS.json"
# Bump when a stage's output format changes. Logic changes are caught by code_fingerprint (a
# hash of the library's own files), which every stage fingerprint includes.
STAGE_VERSIONS = {
    "materialize": 1,
    "convert": 2,
    "embed": 2,
    "curate": 1,
    "generate": 1,
    "render": 1,
    "validate": 1,
    "export": 1,
}


@dataclass(frozen=True)
class StageResult:
    name: str
    path: Path
    fingerprint: str
    stats: dict[str, Any]
    reused: bool


def crash_point(where: str) -> None:
    """Test hook: ``MEDVQA_CRASH_AT=<where>`` SIGKILLs the build here (a stage name: its
    files are in the temp folder, not yet renamed; ``publish``: an export is half-replaced).
    tests/hardening/test_crash_resume.py uses it to prove a rerun recovers byte-identically."""
    if os.environ.get("MEDVQA_CRASH_AT") == where:
        os.kill(os.getpid(), signal.SIGKILL)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``path`` through a temp file + rename: readers see the old or the new file."""
    tmp = atomic_path(path)
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def stage_fingerprint(name: str, inputs: Any) -> str:
    return fingerprint(name, STAGE_VERSIONS[name], __version__, code_fingerprint(), inputs)


# the library's files whose content can change what a stage writes
_CODE_SUFFIXES = (".py", ".yaml", ".yml", ".json", ".html", ".txt", ".md")


@lru_cache(maxsize=4)
def code_fingerprint(package_dir: str | None = None) -> str:
    """A hash of the library's own files (code, manifests, templates), once per process.

    Stage outputs are reused only when it matches: a build folder made by another version of
    the code (an upgrade, a local edit, a checkout of another commit) is rebuilt, not read back
    with outputs the current code would no longer write. The version number alone does not
    change with every edit of an installed checkout."""
    root = Path(package_dir) if package_dir else Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.suffix in _CODE_SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def stage_done(build_dir: Path, name: str, key: str, inputs: Any) -> bool:
    """Whether ``run_stage`` with these arguments would reuse a finished output."""
    fp = stage_fingerprint(name, inputs)
    marker = build_dir / "stages" / name / f"{key}-{fp[:16]}" / MARKER
    return marker.is_file() and json.loads(marker.read_text()).get("fingerprint") == fp


def run_stage(
    build_dir: Path,
    name: str,
    key: str,
    inputs: Any,
    build: Callable[[Path], dict[str, Any]],
) -> StageResult:
    """Reuse ``build_dir/stages/<name>/<key>-<fp>`` if complete, else build it atomically."""
    fp = stage_fingerprint(name, inputs)
    final = build_dir / "stages" / name / f"{key}-{fp[:16]}"
    marker = final / MARKER
    if marker.is_file():
        data = json.loads(marker.read_text())
        if data.get("fingerprint") == fp:
            log.info("%s %s: reused %s", name, key, final)
            return StageResult(name, final, fp, data.get("stats", {}), True)
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(final.parent, key)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp-{_HOST}-{os.getpid()}-", dir=final.parent))
    tmp.chmod(0o777 & ~_umask())
    try:
        stats = build(tmp)
        release_freed_memory()  # what this stage freed does not count towards the next one
        crash_point(name)
        (tmp / MARKER).write_text(
            json.dumps(
                {"stage": name, "key": key, "fingerprint": fp, "stats": stats},
                indent=2,
                sort_keys=True,
            )
            + "\n"
        )
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return StageResult(name, final, fp, stats, False)


_HOST = socket.gethostname().replace("/", "_")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _killed(temp: Path) -> bool:
    """Whether a stage's temp folder (``.<key>.tmp-<host>-<pid>-...``) was left by a process
    of this host that no longer exists; one of another host of a shared filesystem, whose
    processes cannot be seen from here, never counts as killed."""
    prefix = f".tmp-{_HOST}-"
    at = temp.name.find(prefix)
    if at < 0:
        return False
    pid = temp.name[at + len(prefix) :].split("-", 1)[0]
    return pid.isdigit() and not _alive(int(pid))


def _remove_orphans(parent: Path, key: str) -> None:
    """Delete temp folders of this stage left by killed runs (:func:`_killed`). A running
    build's folder (or one on another host of a shared filesystem) is never touched."""
    for d in parent.glob(f".{key}.tmp-*"):
        if _killed(d):
            log.info("removing %s, left by a run that was killed", d)
            shutil.rmtree(d, ignore_errors=True)


def running_stage_temps(build_dir: Path) -> list[Path]:
    """The work folders of stages being built in ``build_dir`` now: made by a live process on
    this host, or on another host (whose processes cannot be seen from here)."""
    return [d for d in sorted(Path(build_dir).glob("stages/*/.*.tmp-*")) if not _killed(d)]


def tree_fingerprint(root: Path) -> str:
    """Cheap content proxy of a folder: relative paths, sizes and mtimes of every file."""
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            st = path.stat()
            entries.append((path.relative_to(root).as_posix(), st.st_size, st.st_mtime_ns))
    return fingerprint(entries)

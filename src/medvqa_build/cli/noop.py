"""A no-op rerun of ``medvqa-build run`` that loads nothing of the pipeline (issue 28).

After a run finishes, ``DIR/.noop.json`` records what the run depended on — a key over the
recipe's bytes, the overrides and flags that change outputs, the environment variables that
reach the build, the working folder, the interpreter and every file of the package and its
manifests — and what it left: the tree fingerprints (paths, sizes, mtimes) of the source roots
and of the build folder, and the lines a rerun prints. A rerun whose key and fingerprints all
match prints those lines and writes the report a real rerun would write; it imports only this
module, so it costs a process start and a walk of the roots. Anything else (a recipe edit, a
touched file, an edited module) runs the build, which reuses its finished stages as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path

from .._version import __version__
from ..store.atomic import write_atomic

RECORD = ".noop.json"
REPORT = "report.json"
_PACKAGE = Path(__file__).resolve().parents[1]
# files of the build folder that a replay may rewrite or that hold the record itself
_OWN = {RECORD, REPORT}
_NAME = re.compile(r"""^name:[ \t]*(["']?)([A-Za-z0-9][A-Za-z0-9._-]*)\1[ \t]*(#.*)?$""", re.M)
_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def output_dir(recipe: str | os.PathLike, output: str | None, overrides: list[str]) -> Path | None:
    """The build folder ``run`` will write, when it can be told without parsing the recipe:
    ``-o``, or ``build/<name>`` from a plain top-level ``name:`` line. None means: no fast path."""
    if output:
        return Path(output)
    if any(o.split("=", 1)[0].strip() == "name" for o in overrides):
        return None
    try:
        found = _NAME.findall(Path(recipe).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None
    return Path("build") / found[0][1] if len(found) == 1 else None


def run_key(recipe: str | os.PathLike, overrides: list[str], flags: dict) -> str | None:
    """What a run's outputs depend on besides the roots, as one hash; None if the recipe cannot
    be read (the real run then says why)."""
    try:
        text = Path(recipe).read_bytes()
    except OSError:
        return None
    names = {"HOME"} | {k for k in os.environ if k.startswith("MEDVQA_")}
    names |= set(_VAR.findall(text.decode("utf-8", "replace")))
    parts = {
        "version": __version__,
        "python": [sys.executable, sys.version],
        "cwd": os.getcwd(),
        "recipe": [str(Path(recipe).resolve()), hashlib.sha256(text).hexdigest()],
        "overrides": list(overrides),
        "flags": flags,
        "env": {k: os.environ.get(k) for k in sorted(names)},
        "code": _code_digest(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _code_digest() -> str:
    """Every file of the package and of the manifest folders, by content."""
    folders = [_PACKAGE, _PACKAGE.parents[1] / "manifests"]
    folders += [Path(p) for p in os.environ.get("MEDVQA_MANIFESTS", "").split(os.pathsep) if p]
    digest = hashlib.sha256()
    for folder in folders:
        for path, _, _ in _files(folder):
            if path.suffix != ".pyc":
                digest.update(f"{path}\0".encode() + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _files(folder: Path, skip: set[str] = frozenset()):
    """``(path, size, mtime_ns)`` of every file under ``folder``, in a stable order; top-level
    names in ``skip`` and ``__pycache__`` folders are left out."""
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        top = Path(dirpath) == folder
        for name in sorted(filenames):
            if top and name in skip:
                continue
            path = Path(dirpath) / name
            try:
                st = path.stat()
            except OSError:
                continue
            yield path, st.st_size, st.st_mtime_ns


def _tree(folder: Path, skip: set[str] = frozenset()) -> str | None:
    """A stat-level fingerprint of a folder (None when it does not exist)."""
    if not folder.is_dir():
        return None
    rows = [(str(p.relative_to(folder)), size, mtime) for p, size, mtime in _files(folder, skip)]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def forget(out: Path) -> None:
    """Drop the record before a real run: a run that stops half-way leaves none."""
    (out / RECORD).unlink(missing_ok=True)


def record(out: Path, key: str, lines: list[str], roots: list[Path], rerun_report: str) -> None:
    """Write ``DIR/.noop.json`` after a finished run: ``lines`` and ``rerun_report`` are what a
    rerun that reuses every stage prints and writes as ``report.json``."""
    roots = sorted({str(Path(r).resolve()) for r in roots})
    data = {
        "key": key,
        "lines": lines,
        "roots": {r: _tree(Path(r)) for r in roots},
        "report": rerun_report,
        "reports": [_sha(out / REPORT), hashlib.sha256(rerun_report.encode()).hexdigest()],
        "build": _tree(out, _OWN),
    }
    write_atomic(out / RECORD, json.dumps(data, indent=1) + "\n")


def replay(out: Path, key: str) -> list[str] | None:
    """The lines to print if ``run`` with ``key`` would rebuild nothing, after writing the
    report that run would write; None when anything it depends on changed."""
    try:
        data = json.loads((out / RECORD).read_text(encoding="utf-8"))
        fresh = data["key"] == key and data["build"] == _tree(out, _OWN)
        fresh = fresh and all(_tree(Path(r)) == fp for r, fp in data["roots"].items())
        if not fresh or _sha(out / REPORT) not in data["reports"]:
            return None
        if _sha(out / REPORT) != data["reports"][1]:
            write_atomic(out / REPORT, data["report"])
        return list(data["lines"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None

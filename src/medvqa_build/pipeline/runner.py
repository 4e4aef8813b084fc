"""Content-addressed, atomic stage outputs: each stage's folder is named by a hash of its
inputs and config; it is built in a temp folder and renamed into place with a completion
marker, so an interrupted run leaves nothing half-written and a rerun reuses finished stages.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from .._version import __version__
from ..recipe import fingerprint
from ..stages.base import Stage, StageResult
from ..store.atomic import crash_point, umask
from ..store.memory import release_freed_memory
from . import shared

log = logging.getLogger(__name__)

MARKER = "_SUCCESS.json"


def stage_fingerprint(stage: Stage, inputs: Any, plugins: Iterable[str] = ()) -> str:
    """The content address of one stage output: the stage, its version, the library version,
    the stage's own code (:func:`code_fingerprint`), the code of the plug-ins it runs
    (``plugins``: module names, :meth:`~medvqa_build.stages.base.Stage.plugins`) and its
    inputs."""
    parts = [stage.name, stage.version, __version__, code_fingerprint(type(stage).__module__)]
    used = {m: code_fingerprint(m) for m in sorted(set(plugins))}
    return fingerprint(*parts, inputs, used) if used else fingerprint(*parts, inputs)


@lru_cache(maxsize=256)
def code_fingerprint(module: str) -> str:
    """A hash of the code of ``module`` and of every module it imports, directly or not, read
    as syntax trees without docstrings: a stage's outputs are reused only while the code that
    writes them is unchanged, and an edited comment or docstring (or a module the stage never
    imports) rebuilds nothing.

    An import made only to register plug-ins (``from . import hf as _hf`` in a registry's
    ``__init__``: the name is never used) is not followed, so a stage does not depend on every
    plug-in of a registry it looks one up in; the plug-ins it runs are added by the stage
    (:func:`stage_fingerprint`)."""
    digest = hashlib.sha256()
    for name in sorted(_closure(module)):
        digest.update(name.encode() + b"\0" + _code_digest(name))
    return digest.hexdigest()


_PACKAGE = Path(__file__).resolve().parents[1]


def _module_path(name: str) -> Path | None:
    """The file of a package module; of another module (a plug-in registered from outside the
    package), the file it was imported from."""
    if name.split(".")[0] != _PACKAGE.name:
        origin = getattr(sys.modules.get(name), "__file__", None)
        return Path(origin) if origin and origin.endswith(".py") else None
    rel = Path(*name.split(".")[1:])
    for path in (_PACKAGE / rel / "__init__.py", (_PACKAGE / rel).with_suffix(".py")):
        if path.is_file():
            return path
    return None


@lru_cache(maxsize=512)
def _tree(name: str) -> ast.Module | None:
    path = _module_path(name)
    return ast.parse(path.read_text(encoding="utf-8")) if path is not None else None


def _closure(module: str) -> set[str]:
    """``module`` and the package modules it imports, transitively (imports inside
    functions included: they run with the stage too), but not the modules imported only to
    register them (:func:`_used_names`)."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen or _tree(name) is None:
            continue
        seen.add(name)
        is_pkg = _module_path(name).name == "__init__.py"
        used = _used_names(name)
        for node in ast.walk(_tree(name)):
            if isinstance(node, ast.ImportFrom):
                todo += _targets(name, is_pkg, node, used)
            elif isinstance(node, ast.Import):
                todo += [a.name for a in node.names if a.name.startswith("medvqa_build")]
    return seen


@lru_cache(maxsize=512)
def _used_names(name: str) -> frozenset[str]:
    """The names a module reads (and lists in ``__all__``): an imported name outside it was
    imported for the import's side effect alone, a registration."""
    names: set[str] = set()
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            and isinstance(node.value, ast.List | ast.Tuple)
        ):
            names |= {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    return frozenset(names)


def _targets(name: str, is_pkg: bool, node: ast.ImportFrom, used: frozenset[str]) -> list[str]:
    if node.level == 0:
        base = node.module or ""
        if not base.startswith("medvqa_build"):
            return []
    else:
        parts = name.split(".") if is_pkg else name.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
        base = ".".join(parts + ([node.module] if node.module else []))
    names = [a.name for a in node.names if node.module or (a.asname or a.name) in used]
    return [base] + [f"{base}.{n}" for n in names]


def _registers_only(node: ast.stmt, used: frozenset[str]) -> bool:
    """``from . import hf as _hf`` with ``_hf`` never read: an import for its side effect,
    registering a plug-in, which is followed only by the stages that run the plug-in."""
    return (
        isinstance(node, ast.ImportFrom)
        and node.module is None
        and all((a.asname or a.name) not in used for a in node.names)
    )


@lru_cache(maxsize=512)
def _code_digest(name: str) -> bytes:
    """The module's syntax tree without docstrings (comments are not in the tree) and
    without its registration imports (an unused plug-in's line in its registry)."""
    tree = copy.deepcopy(_tree(name))
    tree.body = [s for s in tree.body if not _registers_only(s, _used_names(name))]
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).digest()


def stage_done(
    build_dir: Path, stage: Stage, key: str, inputs: Any, plugins: Iterable[str] = ()
) -> bool:
    """Whether ``run_stage`` with these arguments would reuse a finished output."""
    fp = stage_fingerprint(stage, inputs, plugins)
    marker = build_dir / "stages" / stage.name / f"{key}-{fp[:16]}" / MARKER
    return marker.is_file() and json.loads(marker.read_text()).get("fingerprint") == fp


def run_stage(
    build_dir: Path,
    stage: Stage,
    key: str,
    inputs: Any,
    build: Callable[[Path], dict[str, Any]],
    plugins: Iterable[str] = (),
) -> StageResult:
    """Reuse ``build_dir/stages/<name>/<key>-<fp>`` if complete, else build it atomically;
    ``plugins``: the modules of the plug-ins the key runs (:func:`stage_fingerprint`)."""
    name = stage.name
    fp = stage_fingerprint(stage, inputs, plugins)
    final = build_dir / "stages" / name / f"{key}-{fp[:16]}"
    marker = final / MARKER
    if marker.is_file():
        data = json.loads(marker.read_text())
        if data.get("fingerprint") == fp:
            log.info("%s %s: reused %s", name, key, final)
            seconds, cached = data.get("seconds"), bool(data.get("cached"))
            return StageResult(name, final, fp, data.get("stats", {}), True, seconds, cached)
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(final.parent, key)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp-{_HOST}-{os.getpid()}-", dir=final.parent))
    tmp.chmod(0o777 & ~umask())
    use_shared = getattr(stage, "shared_cache", False)
    try:
        start = time.perf_counter()
        cached = shared.fetch(name, key, fp, tmp) if use_shared else None
        if cached is not None:  # built by another build folder over the same inputs
            stats, extra = cached["stats"], {"cached": True}
        else:
            stats, extra = build(tmp), {}
            release_freed_memory()  # what this stage freed does not count towards the next one
        seconds = round(time.perf_counter() - start, 3)
        crash_point(name)
        record = {"stage": name, "key": key, "fingerprint": fp, "stats": stats, "seconds": seconds}
        (tmp / MARKER).write_text(json.dumps(record | extra, indent=2, sort_keys=True) + "\n")
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    # the stats as a rerun reads them back from the marker (same types, same key order), so a
    # report written from a fresh build and from a reused one are the same bytes
    data = json.loads((final / MARKER).read_text())
    if use_shared and not data.get("cached"):
        shared.store(name, key, fp, final)
    return StageResult(name, final, fp, data["stats"], False, data["seconds"], bool(extra))


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

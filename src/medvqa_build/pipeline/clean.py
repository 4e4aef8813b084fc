"""Stage folders a build no longer uses: every run whose inputs changed (recipe, data, code)
writes new ``DIR/stages/<stage>/<key>-<fingerprint>`` folders beside the old ones, which stay
as a cache. At 10^5-10^6 images a render stage is gigabytes, so a build folder that is tuned
run after run fills the disk. :func:`stale_stages` names the folders the last finished run did
not use; :func:`clean_build` deletes them (``medvqa-build clean DIR``)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import MedvqaError
from .build_dir import BuildDir
from .runner import running_stage_temps


class CleanError(MedvqaError):
    """The build folder cannot be cleaned safely; nothing was deleted."""


@dataclass(frozen=True)
class Stale:
    """One stage folder the last run did not use, and the bytes deleting it frees."""

    path: Path
    bytes: int


def kept_stages(build_dir: str | os.PathLike) -> set[Path]:
    """The stage folders the last finished run used (:meth:`BuildDir.kept_stages`)."""
    folder = BuildDir(build_dir)
    if not (folder.path / "report.json").is_file() or not (folder.path / "build.json").is_file():
        raise CleanError(
            "no finished build here (report.json and build.json are written when a run ends)",
            where=str(folder.path),
            fix="finish a `medvqa-build run` into this folder first; clean keeps what it used",
        )
    try:
        return folder.kept_stages()
    except (ValueError, KeyError, TypeError) as exc:
        raise CleanError(
            f"cannot read the stages of the last run ({exc})",
            where=str(folder.path / "report.json"),
            fix="run the build again to rewrite report.json",
        ) from exc


def stale_stages(build_dir: str | os.PathLike, *, sizes: bool = True) -> list[Stale]:
    """The stage folders of ``build_dir`` that the last finished run did not use, by path
    (``sizes=False``: without walking them, size 0)."""
    out = Path(build_dir).resolve()
    kept = kept_stages(out)
    stale = []
    for stage in sorted(p for p in (out / "stages").glob("*") if p.is_dir()):
        for folder in sorted(stage.iterdir()):
            # hidden folders are a running (or killed) build's work: the runner clears those
            if folder.name.startswith(".") or not folder.is_dir() or folder.resolve() in kept:
                continue
            stale.append(Stale(folder, _size(folder) if sizes else 0))
    return stale


def clean_build(build_dir: str | os.PathLike, *, dry_run: bool = False) -> list[Stale]:
    """Delete the stage folders the last finished run did not use (none with ``dry_run``);
    return them. Refuses while a build is running in the folder."""
    out = Path(build_dir).resolve()
    live = running_stage_temps(out)
    if live:
        raise CleanError(
            f"a build is running in this folder ({live[0].relative_to(out)})",
            where=str(out),
            fix="wait for it to finish, then clean",
        )
    stale = stale_stages(out)
    if not dry_run:
        for s in stale:
            shutil.rmtree(s.path)
    return stale


def _size(folder: Path) -> int:
    """Bytes that deleting ``folder`` frees: its files not hard-linked elsewhere (an export
    copied out of a stage folder by a hard link keeps its data)."""
    total = 0
    for dirpath, _, files in os.walk(folder):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if st.st_nlink == 1:
                total += st.st_size
    return total

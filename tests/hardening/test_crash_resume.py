"""Crash-safe resume: a build SIGKILLed during convert, embed, render, export or while an
export is being published, then rerun, gives exports byte-identical to an uninterrupted
build; and no partial output is ever visible under its final name.

The kill is injected through ``MEDVQA_CRASH_AT`` (``runner.crash_point``): the stage's files
are all in its temp folder and about to be renamed, the latest moment a crash can hurt.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ..conftest import REPO

SMALL = [
    "--set",
    "sources.0.generate.n_images=30",
    "--set",
    "sources.0.generate.n_videos=1",
    "--set",
    "sources.0.generate.frames_per_video=8",
    "--set",
    "quota_scale=0.2",
]


def _run(out: Path, crash_at: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEDVQA_CRASH_AT": crash_at or ""}
    cmd = [
        sys.executable,
        "-m",
        "medvqa_build",
        "run",
        str(REPO / "recipes" / "demo.yaml"),
        "-o",
        str(out),
        *SMALL,
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)


def _stage_dirs_complete(out: Path) -> list[str]:
    """Final-named stage folders without their marker (there must be none)."""
    bad = []
    for stage in sorted((out / "stages").glob("*")):
        for d in stage.iterdir():
            if not d.name.startswith(".") and not (d / "_SUCCESS.json").is_file():
                bad.append(d.relative_to(out).as_posix())
    return bad


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reference")
    seen: list[tuple[str, frozenset[str]]] = []
    stop = threading.Event()

    def watch() -> None:  # what a reader polling the build folder can ever observe
        while not stop.is_set():
            for fmt in ("hf", "vlmeval"):
                folder = out / fmt
                try:
                    files = frozenset(
                        p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()
                    )
                except (FileNotFoundError, OSError):
                    continue
                if files:
                    seen.append((fmt, files))
            time.sleep(0.002)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    done = _run(out)
    stop.set()
    watcher.join()
    assert done.returncode == 0, done.stderr[-2000:]
    final = {
        fmt: frozenset(
            p.relative_to(out / fmt).as_posix() for p in (out / fmt).rglob("*") if p.is_file()
        )
        for fmt in ("hf", "vlmeval")
    }
    partial = [(fmt, files) for fmt, files in seen if files != final[fmt]]
    assert not partial, f"a published export was visible incomplete: {partial[:1]}"
    return out


@pytest.mark.parametrize("crash_at", ["convert", "embed", "render", "export", "publish"])
def test_killed_build_resumes_byte_identical(reference, tmp_path, crash_at):
    out = tmp_path / "build"
    killed = _run(out, crash_at)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr[-2000:])
    assert not _stage_dirs_complete(out)
    if crash_at != "publish":
        assert not (out / "checksums.sha256").exists()
    for fmt in ("hf", "vlmeval"):  # absent or whole: never a half-built folder
        assert not (out / fmt).exists() or crash_at == "publish"
    left = sorted(p.name for p in (out / "stages").glob("*/.*.tmp-*"))
    if crash_at != "publish":
        assert left, "the killed stage left its temp folder"
    rerun = _run(out)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert not _stage_dirs_complete(out)
    # the rerun removed what the killed run left behind
    assert not list((out / "stages").glob("*/.*.tmp-*"))
    expected = (reference / "checksums.sha256").read_text()
    assert (out / "checksums.sha256").read_text() == expected
    for line in expected.splitlines():  # and the files really have those bytes
        digest, rel = line.split("  ", 1)
        import hashlib

        assert hashlib.sha256((out / rel).read_bytes()).hexdigest() == digest, rel
    report = json.loads((out / "report.json").read_text())
    assert report  # the report of the resumed run is whole JSON


def test_publish_over_an_older_export_is_atomic(tmp_path):
    """Replacing a published export: readers see the old tree or the new one, never a mix."""
    from medvqa_build.stages.export import publish as _publish

    stage, dest = tmp_path / "stage", tmp_path / "hf"
    (stage / "data").mkdir(parents=True)
    (stage / "data" / "new.parquet").write_bytes(b"new")
    (stage / "_SUCCESS.json").write_text("{}")
    (dest / "data").mkdir(parents=True)
    (dest / "data" / "old.parquet").write_bytes(b"old")
    _publish(stage, dest)
    assert sorted(p.name for p in dest.rglob("*") if p.is_file()) == ["new.parquet"]
    assert not list(tmp_path.glob(".hf.*"))

"""A rerun removes the temp folders of killed runs, and only those (runner._remove_orphans)."""

import subprocess
import sys

from medvqa_build.pipeline import runner
from medvqa_build.stages.render import Render


def test_only_dead_local_runs_lose_their_temp_folders(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    dead_pid = int(dead.stdout)
    parent = tmp_path / "stages" / "render"
    parent.mkdir(parents=True)
    killed = parent / f".items.tmp-{runner._HOST}-{dead_pid}-abc"
    running = parent / f".items.tmp-{runner._HOST}-{runner.os.getpid()}-def"
    elsewhere = parent / f".items.tmp-some-other-host-{dead_pid}-ghi"
    other_key = parent / f".items2.tmp-{runner._HOST}-{dead_pid}-jkl"
    for d in (killed, running, elsewhere, other_key):
        (d / "images").mkdir(parents=True)

    result = runner.run_stage(tmp_path, Render(), "items", {"x": 1}, lambda d: {})

    assert result.path.is_dir() and not result.reused
    assert not killed.exists()
    assert running.exists() and elsewhere.exists() and other_key.exists()

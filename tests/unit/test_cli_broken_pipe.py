"""A reader that goes away (`medvqa-build sources | head -1`) stops the command quietly, as a
shell tool does: no BrokenPipeError traceback on the terminal."""

import os
import subprocess
import sys


def test_a_closed_stdout_pipe_is_no_traceback():
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "medvqa_build.cli", "sources"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    proc.stdout.close()  # the reader is gone before the first line is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141  # 128 + SIGPIPE, what a shell reports
    assert "Traceback" not in err and "BrokenPipeError" not in err, err

"""The CLI in a subprocess under a memory and a time ceiling, for the hostile corpus.

Each case must end within :data:`TIME_S` seconds having held at most :data:`RESIDENT_BYTES`
resident (the peak of the process and the workers it waited for, from ``wait4``). The
address space is capped too (:data:`ADDRESS_SPACE_BYTES`), so a reader that trusts a header
fails fast in CI instead of swapping the machine.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from ..conftest import REPO

RESIDENT_BYTES = 1 << 30  # 1 GiB resident per case (issue 33)
ADDRESS_SPACE_BYTES = 6 << 30  # virtual: the interpreter with numpy/arrow maps ~2 GiB idle
TIME_S = 120


@dataclass
class Bounded:
    """What one bounded CLI run gave."""

    returncode: int
    stdout: str
    stderr: str
    max_resident: int  # bytes
    seconds: float

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("error: ")]


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def bounded_cli(*args: str | os.PathLike, env: dict | None = None) -> Bounded:
    """``medvqa-build ARGS`` in a fresh interpreter, asserted under the ceilings (no traceback,
    peak resident memory, time)."""
    environ = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1", **(env or {})}
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "medvqa_build", *map(str, args)],
            stdout=out,
            stderr=err,
            env=environ,
            preexec_fn=_cap,
        )
        status, usage = _wait(proc)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    result = Bounded(
        os.waitstatus_to_exitcode(status),
        stdout,
        stderr,
        int(usage.ru_maxrss) * 1024,  # Linux reports kilobytes
        time.monotonic() - start,
    )
    assert result.max_resident <= RESIDENT_BYTES, (result.max_resident, args, stderr[-2000:])
    assert "Traceback" not in stderr, stderr[-3000:]
    return result


def _wait(proc: subprocess.Popen):
    """The child's exit status and resource usage (``wait4``: its own peak, and that of the
    workers it waited for), killing it past :data:`TIME_S`."""
    deadline = time.monotonic() + TIME_S
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
            return status, usage
        if time.monotonic() > deadline:
            proc.kill()
            os.wait4(proc.pid, 0)
            proc.returncode = -9
            raise AssertionError(f"over {TIME_S} s: {proc.args}")
        time.sleep(0.05)

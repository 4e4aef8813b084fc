"""A no-op rerun of the demo against its cold build, each a whole ``medvqa-build`` process, as a
user times them (``time medvqa-build run recipes/demo.yaml`` twice); plus what ``--help``
imports.

    python benchmarks/bench_noop_rerun.py [--reruns 5]

Cold: an empty build folder and embedding cache. Rerun: the same command again; the first
rerun and the best of ``--reruns`` are both reported. Prints ratios (goal <= 0.05); asserts
nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "medvqa_build"]


def _timed(args: list[str], env: dict) -> tuple[float, str]:
    t = time.perf_counter()
    done = subprocess.run(CLI + args, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t, done.stdout


def _import_ms(env: dict) -> float:
    """Cumulative import time of ``python -X importtime -m medvqa_build --help``, in ms."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *CLI[1:], "--help"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = re.findall(r"^import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", done.stderr, re.M)
    return sum(int(us) for us, name in rows if not name.startswith(" ")) / 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reruns", type=int, default=5, help="reruns after the cold build")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-noop-") as tmp:
        env = dict(os.environ, MEDVQA_CACHE=str(Path(tmp) / "cache"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's Python keeps its bytecode
        out = str(Path(tmp) / "demo")
        run = ["run", str(REPO / "recipes" / "demo.yaml"), "-o", out, "-q"]
        cold, _ = _timed(run, env)
        reruns = []
        for _ in range(args.reruns):
            elapsed, printed = _timed(run, env)
            assert "nothing rebuilt" in printed, printed
            reruns.append(elapsed)
        help_s, _ = _timed(["--help"], env)
        imports = _import_ms(env)
        shutil.rmtree(out, ignore_errors=True)
    print(f"cold build {cold:.2f} s; reruns {', '.join(f'{r:.3f}' for r in reruns)} s")
    print(f"--help {help_s:.3f} s, of which imports {imports:.0f} ms (python -X importtime)")
    what = "no-op rerun / cold build, demo, whole process"
    print(f"RATIO {what} = {min(reruns) / cold:.4f}  (goal <= 0.05)")
    print(f"RATIO first {what} = {reruns[0] / cold:.4f}  (goal <= 0.05)")


if __name__ == "__main__":
    main()

"""Run every ``benchmarks/bench_*.py``, collect the ratios they print, write ``results.md``.

    python benchmarks/run_all.py                 # small sizes: a few minutes on 2 cores
    python benchmarks/run_all.py --full          # each script's own defaults (about an hour
                                                 # on 2 cores; kNN as a full 100k self pass)
    python benchmarks/run_all.py --only knn,render --logs /tmp/bench-logs
    python benchmarks/run_all.py --reuse --logs /tmp/bench-logs   # re-collect saved outputs

The scripts run one after another (never in parallel: they time themselves), each in its own
process. A script reports a ratio on a line ``RATIO <what> = <value>  (goal >= x)``; the older
scripts' own lines are read with the patterns below. ``results.md`` holds the machine, one
table of ratios against the issue's goals, and every script's full output.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata as md
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Small sizes for the default run; --full passes only what is listed in FULL.
QUICK: dict[str, list[str]] = {
    "cap_cost": ["--cases", "spine-class,demo-class", "--caps", "5"],
    "convert": ["--images", "500"],
    "embed": ["--model", "ViT-S-32", "--n", "128", "--repeats", "2"],
    "gpu_embed": ["--n", "256", "--repeats", "2"],
    "knn": ["--sk-queries", "2000", "--repeats", "1"],  # 100k self pass; sklearn on 2k, x50
    "memory": ["--convert-sizes", "1000,10000", "--build-sizes", "200,2000"],
    "neighbor_memory": ["--sizes", "3000,30000", "--queries", "300", "--memory-mib", "16"],
    "noop_rerun": ["--reruns", "5"],
    "offline_embed": ["--images", "300", "--repeats", "5"],
    "raw_scaling": ["--sizes", "600,1200", "--unique", "100", "--skip-all"],
    "rebuild": ["--images", "500"],
    "render": ["--images", "30", "--repeat", "2"],
    "scaling": ["--sizes", "300,1000,3000"],
}
FULL: dict[str, list[str]] = {}

GENERIC = re.compile(r"^RATIO (?P<what>.+?) = (?P<value>-?[0-9.]+)\s*(?P<rest>.*)$")
GOAL = re.compile(r"goal (?P<op>>=|<=) (?P<bound>[0-9.]+)")


def _legacy(name: str, out: str) -> list[tuple[str, float, str]]:
    """Ratios from the scripts that predate the ``RATIO`` line."""
    rows = []
    if name == "embed":
        head = re.search(r"^model (\S+)", out, re.M)
        m = re.search(r"embed, overlapped .*ratio to forward ([0-9.]+)", out)
        if m:
            model = head.group(1) if head else "?"
            rows.append((f"embed stage / raw forward (CPU, {model})", float(m.group(1)), ">= 0.9"))
    elif name == "knn":
        head = re.search(r"^(\d+) x (\d+) .*?(\d+) queries", out, re.M)
        what = f"{head.group(1)} x {head.group(2)}, {head.group(3)} queries" if head else ""
        m = re.search(
            r"faiss flat \(build\+q\).*speed-up x([0-9.]+)\s+recall@\d+ vs sklearn ([0-9.]+)", out
        )
        if m:
            rows.append(
                (
                    f"kNN faiss flat (build incl.) vs sklearn brute, {what}, recall {m.group(2)}",
                    float(m.group(1)),
                    ">= 10",
                ),
            )
        m = re.search(
            r"auto -> (\w+).*speed-up x([0-9.]+) \(incl\. build\).*recall@\d+ ([0-9.]+)", out
        )
        if m:
            rows.append(
                (
                    f"kNN auto ({m.group(1)}, build incl.) vs sklearn brute, {what}, "
                    f"recall {m.group(3)}",
                    float(m.group(2)),
                    ">= 10",
                ),
            )
    elif name == "render":
        levels = re.findall(r"^(\w+)\s+[0-9.]+\s+([0-9.]+)$", out, re.M)
        for level, ratio in levels:
            rows.append((f"render+encode / cv2 decode+encode, {level}", float(ratio), ">= 0.8"))
    return rows


def collect(name: str, out: str) -> list[tuple[str, float, str]]:
    rows = []
    for line in out.splitlines():
        m = GENERIC.match(line.strip())
        if m:
            goal = GOAL.search(m.group("rest"))
            bound = f"{goal.group('op')} {goal.group('bound')}" if goal else ""
            rows.append((m.group("what"), float(m.group("value")), bound))
    return rows or _legacy(name, out)


def met(value: float, goal: str) -> str:
    if not goal:
        return "–"
    op, bound = goal.split()
    ok = value >= float(bound) if op == ">=" else value <= float(bound)
    return "yes" if ok else "**no**"


def _version(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "not installed"


def machine() -> list[str]:
    cpu = platform.processor() or "?"
    ram = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram = f"{int(line.split()[1]) / (1 << 20):.1f} GiB"
                break
    except OSError:
        pass
    try:
        gpu = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=True,
            ).stdout.strip()
            or "none"
        )
    except (OSError, subprocess.SubprocessError):
        gpu = "none"
    libs = ", ".join(
        f"{d} {_version(d)}"
        for d in (
            "torch",
            "faiss-cpu",
            "open_clip_torch",
            "numpy",
            "opencv-python-headless",
            "pillow",
            "pyarrow",
            "scikit-learn",
        )
    )
    return [
        f"- CPU: {cpu}, {os.cpu_count()} cores; RAM {ram}; GPU: {gpu}",
        f"- OS: {platform.platform()}; Python {platform.python_version()}",
        f"- Libraries: {libs}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="each script's default (large) sizes")
    ap.add_argument("--only", help="comma-separated names, e.g. knn,render (bench_ prefix off)")
    ap.add_argument("--logs", type=Path, help="save each script's output here as <name>.log")
    ap.add_argument("--reuse", action="store_true", help="read outputs from --logs, run nothing")
    ap.add_argument("--out", type=Path, default=HERE / "results.md")
    args = ap.parse_args()
    if args.reuse and not args.logs:
        ap.error("--reuse needs --logs")

    scripts = sorted(HERE.glob("bench_*.py"))
    names = [p.stem.removeprefix("bench_") for p in scripts]
    if args.only:
        wanted = set(args.only.split(","))
        scripts = [p for p, n in zip(scripts, names, strict=True) if n in wanted]
        names = [n for n in names if n in wanted]
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)

    outputs: dict[str, tuple[str, float, int]] = {}
    for path, name in zip(scripts, names, strict=True):
        log = args.logs / f"{name}.log" if args.logs else None
        if args.reuse:
            if log is None or not log.is_file():
                print(f"{name}: no saved output {log}", file=sys.stderr)
                continue
            outputs[name] = (log.read_text(), float("nan"), 0)
            continue
        extra = FULL.get(name, []) if args.full else QUICK.get(name, [])
        cmd = [sys.executable, str(path), *extra]
        print(f"running {' '.join(cmd[1:])}", flush=True)
        start = time.perf_counter()
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            cwd=HERE.parent,
            check=False,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        seconds = time.perf_counter() - start
        out = proc.stdout + (f"\n[stderr tail]\n{proc.stderr[-2000:]}" if proc.returncode else "")
        outputs[name] = (out, seconds, proc.returncode)
        if log is not None:
            log.write_text(out)
        print(f"  {name}: exit {proc.returncode} in {seconds:.0f} s", flush=True)

    table = []
    for name, (out, _, _) in outputs.items():
        table += [(name, what, value, goal) for what, value, goal in collect(name, out)]

    lines = [
        "# Benchmark results",
        "",
        f"Written by `benchmarks/run_all.py{' --full' if args.full else ''}` on "
        f"{dt.datetime.now().strftime('%Y-%m-%d %H:%M')}. Ratios are measured side by side in "
        "one run on one machine; absolute timings are not comparable across machines.",
        "",
        "## Machine",
        "",
        *machine(),
        "",
        "## Ratios",
        "",
        "| script | ratio | value | goal | met |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| bench_{name} | {what} | {value:.3f} | {goal or '–'} | {met(value, goal)} |"
        for name, what, value, goal in table
    ]
    lines += ["", "## Outputs", ""]
    for name, (out, seconds, code) in outputs.items():
        took = "" if seconds != seconds else f", {seconds:.0f} s, exit {code}"
        lines += [f"### bench_{name}{took}", "", "```", out.rstrip(), "```", ""]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines[lines.index("## Ratios") : lines.index("## Outputs")]))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""Cost against the raw download at a fixed benchmark size (issue 35): the demo recipe with its
own quotas (280 items) over synthetic-endo trees of growing size.

    python benchmarks/bench_raw_scaling.py                      # 5k and 50k stills (~10 min)
    python benchmarks/bench_raw_scaling.py --sizes 5000,50000,500000
    python benchmarks/bench_raw_scaling.py --mask-every 5  # 16 % of the stills segmented

Per size, each in a fresh process with empty caches (cold):

- ``capped``: the build as shipped (the embed stage embeds what generation can use);
- ``all``: the same recipe with the caps lifted (``library_size: all``, ``embed_candidates:
  all``): every labelled still embedded, the library the whole class; the baseline of what a
  cap costs, in time and in hardness (the ``visual_class`` row of the difficulty report);
- ``second``: the capped build into a new folder over the same download, caches warm: convert
  comes from the shared stage cache.

Prints wall seconds (the build call and the whole process), the per-stage seconds of
``report.json``, peak RSS, samples embedded, and the ratios the issue's goals are about. Asserts
nothing. Timings are noisy on a shared machine: compare ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scaled_demo import DEMO_RECIPE, clear, peak_rss_mib, write_scaled_endo

VISUAL_TASK = 1  # tasks.1 of recipes/demo.yaml: lesion-type-hard, visual_class


def overrides(root: Path, cache: Path, mode: str) -> list[str]:
    out = ["sources.0.generate=null", f"sources.0.root={root}", f"embedding_cache={cache}"]
    if mode == "all":
        p = f"tasks.{VISUAL_TASK}.negatives.params"
        out += [f"{p}.library_size=all", f"{p}.embed_candidates=all"]
    return out


def child(root: Path, work: Path, cache: Path, mode: str) -> dict:
    """One cold build in this process (the caches under ``cache``)."""
    os.environ["MEDVQA_STAGE_CACHE"] = str(cache / "stages")
    from medvqa_build.api import build, load_recipe

    recipe = load_recipe(DEMO_RECIPE, overrides(root, cache / "embeddings", mode))
    start = time.perf_counter()
    result = build(recipe, work, progress=False, force_export=True)  # problems are counted
    seconds = time.perf_counter() - start
    report = result.report
    diff = {k: v for k, v in report["difficulty"].items() if "visual_class" in k}
    return {
        "seconds": seconds,
        "peak_rss_mib": peak_rss_mib(),
        "stages": report["seconds_per_stage"],
        "embedded": report.get("embedded", {}).get("embedded"),
        "samples": report.get("embedded", {}).get("samples"),
        "items": report["items"],
        "problems": report["validation"].get("problems"),
        "difficulty": diff,
        "checksums": (work / "checksums.sha256").read_text(),
    }


def run_child(root: Path, work: Path, cache: Path, mode: str) -> dict:
    """One build in a fresh process: its report, wall seconds, and CPU seconds (user + system
    of the process and the convert workers it started: on a shared machine the CPU time, not
    the wall time, says what the build cost)."""
    cmd = [sys.executable, __file__, "--child", str(root), str(work), str(cache), mode]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_seconds"] = seconds
    out["cpu_seconds"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out["load"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return out


STAGES = ("convert", "embed", "generate", "render", "validate", "export")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="5000,50000", help="comma-separated still counts")
    ap.add_argument("--unique", type=int, default=500, help="distinct stills rendered")
    ap.add_argument("--skip-all", action="store_true", help="leave out the caps-lifted builds")
    ap.add_argument("--skip-second", action="store_true", help="leave out the second-folder builds")
    ap.add_argument(
        "--mask-every",
        type=int,
        default=1,
        help="keep the mask of every N-th lesion still only (1: all, 80 %% of the stills; "
        "5: 16 %%, about EndoBench's share of segmented images)",
    )
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        root, work, cache, mode = args.child
        print(json.dumps(child(Path(root), Path(work), Path(cache), mode)))
        return
    sizes = sorted(int(s) for s in args.sizes.split(","))
    rows: dict[tuple[int, str], dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-raw-scaling-") as tmp:
        for n in sizes:
            base = Path(tmp) / str(n)
            root = write_scaled_endo(
                base / "root", n, unique=args.unique, mask_every=args.mask_every
            )
            for mode in ("capped",) if args.skip_all else ("capped", "all"):
                cache = base / f"cache-{mode}"
                rows[n, mode] = run_child(root, base / f"out-{mode}", cache, mode)
                print(f"  {n:>7d} {mode:<6s} {rows[n, mode]['seconds']:8.1f} s", flush=True)
                if mode == "capped" and not args.skip_second:  # same download, caches warm
                    rows[n, "second"] = run_child(root, base / "out-second", cache, "capped")
                    print(f"  {n:>7d} second {rows[n, 'second']['seconds']:8.1f} s", flush=True)
            clear(base)
    share = masked_share(args.mask_every)
    print(f"stills with a mask: {share:.0%} (--mask-every {args.mask_every})")
    report(sizes, rows)


def masked_share(mask_every: int) -> float:
    """The share of stills with a mask file: 4 of synthetic-endo's 5 findings have one."""
    from medvqa_build.sources.synthetic_endo import FINDINGS

    return (len(FINDINGS) - 1) / len(FINDINGS) / mask_every


def report(sizes: list[int], rows: dict) -> None:
    print(
        f"{'stills':>8s} {'mode':<7s} {'build s':>8s} {'proc s':>7s} {'cpu s':>7s} {'load':>5s} "
        f"{'peak MiB':>9s} {'embedded':>9s} " + " ".join(f"{s[:8]:>8s}" for s in STAGES)
    )
    for (n, mode), r in sorted(rows.items()):
        cells = " ".join(f"{(r['stages'].get(s) or 0):8.2f}" for s in STAGES)
        print(
            f"{n:8d} {mode:<7s} {r['seconds']:8.1f} {r['process_seconds']:7.1f} "
            f"{r['cpu_seconds']:7.1f} {r['load'] or 0:5.1f} "
            f"{r['peak_rss_mib']:9.0f} {r['embedded'] or 0:9d} {cells}"
        )
    for (n, mode), r in sorted(rows.items()):
        if mode != "second":
            for task, d in r["difficulty"].items():
                print(
                    f"difficulty {n} {mode}: {task} distractor_truth_sim "
                    f"{d.get('distractor_truth_sim')} image_distractor_sim "
                    f"{d.get('image_distractor_sim')} ncc_accuracy {d.get('ncc_accuracy')}"
                )
    for (n, mode), r in sorted(rows.items()):
        if r.get("problems"):
            print(f"validation problems at {n} {mode}: {r['problems']} (exported with --force)")
    for n in sizes:
        if (n, "second") in rows:
            same = rows[n, "capped"]["checksums"] == rows[n, "second"]["checksums"]
            print(f"exports of the second folder at {n} equal the first: {same}")
    small, large = sizes[0], sizes[-1]
    if small == large:
        return
    factor = large / small
    a, b = rows[small, "capped"], rows[large, "capped"]
    cold_ratio = b["seconds"] / a["seconds"]
    print(f"RATIO cold build {large}/{small} (x{factor:.0f} raw) = {cold_ratio:.3f}  (goal <= 2.5)")
    cpu_ratio = b["cpu_seconds"] / a["cpu_seconds"]
    print(f"RATIO cold build CPU seconds {large}/{small} = {cpu_ratio:.3f}  (load-independent)")
    conv = (b["stages"].get("convert") or 0) / max(a["stages"].get("convert") or 1e-9, 1e-9)
    print(f"RATIO convert {large}/{small} = {conv:.3f}")
    emb = (b["stages"].get("embed") or 0) / max(a["stages"].get("embed") or 1e-9, 1e-9)
    print(f"RATIO embed {large}/{small} = {emb:.3f}  (goal <= 1.5)")
    rss = b["peak_rss_mib"] / a["peak_rss_mib"]
    print(f"RATIO peak RSS {large}/{small} = {rss:.3f}  (goal <= 1.3)")
    for n in sizes:
        if (n, "second") not in rows:
            continue
        cold = rows[n, "capped"]["stages"].get("convert") or 0
        warm = max(rows[n, "second"]["stages"].get("convert") or 0, 0.001)  # ms resolution
        print(
            f"RATIO convert cold / second folder at {n} = {cold / warm:.1f}  "
            f"(goal >= 10; {warm:.3f} s)"
        )
    per_embedded = (b["stages"].get("embed") or 0) / max(b["embedded"] or 1, 1)
    print(f"embed ms per embedded image at {large} (offline embedder): {per_embedded * 1e3:.2f}")
    if (large, "all") not in rows:
        return
    fa, fb = rows[small, "all"], rows[large, "all"]
    print(
        f"RATIO with caps lifted ('all'): cold build {large}/{small} = "
        f"{fb['seconds'] / fa['seconds']:.3f}, embed = "
        f"{(fb['stages'].get('embed') or 0) / max(fa['stages'].get('embed') or 1e-9, 1e-9):.3f}"
    )


if __name__ == "__main__":
    main()

"""Peak memory (RSS high-water mark, one fresh process per measurement) at 10x data.

    python benchmarks/bench_memory.py   # convert, convert+generate 10k vs 100k; build 1k vs 10k
    python benchmarks/bench_memory.py --convert-sizes 10000,100000 --build-sizes 10000,100000

A whole build of 100k synthetic stills takes about half an hour on 2 cores, so by default the
whole build is measured at 1k vs 10k and convert + generate (the stages whose memory follows
the sample count) at 10k vs 100k. Prints peak RSS, the interpreter + imports baseline, and the
growth ratio of both the peak and the peak above the baseline (goal <= 1.3x for 10x data).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from scaled_demo import clear, measure_in_child, write_scaled_endo


def _measure_all(plan: dict[str, list[int]], unique: int, tmp: Path) -> dict[str, list[dict]]:
    """Each size's tree is written once and measured in every mode that uses that size."""
    rows: dict[str, list[dict]] = {mode: [] for mode in plan}
    for n in sorted({n for sizes in plan.values() for n in sizes}):
        root = write_scaled_endo(tmp / f"root-{n}", n, unique=unique, n_videos=0)
        for mode, sizes in plan.items():
            if n not in sizes:
                continue
            work = tmp / f"{mode}-{n}"
            rows[mode].append(measure_in_child(mode, root, n, work))
            clear(work)
            r = rows[mode][-1]
            after = ", ".join(f"{name} {peak:.0f}" for name, _, _, peak in r["stages"])
            print(
                f"  {mode:17s} {n:>7d}: {r['seconds']:7.1f} s, peak {r['peak_rss_mib']:7.0f} MiB"
                f"  (high-water mark after each stage, MiB: {after})",
                flush=True,
            )
        clear(root)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--convert-sizes", default="10000,100000")
    ap.add_argument("--build-sizes", default="1000,10000")
    ap.add_argument("--unique", type=int, default=500, help="distinct stills rendered")
    args = ap.parse_args()

    plan = {
        mode: sorted(int(s) for s in sizes.split(","))
        for mode, sizes in (
            ("convert", args.convert_sizes),
            ("convert+generate", args.convert_sizes),
            ("build", args.build_sizes),
        )
        if sizes
    }
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        results = list(_measure_all(plan, args.unique, Path(tmp)).items())

    print(
        f"{'mode':17s} {'stills':>8s} {'seconds':>8s} {'baseline':>9s} {'peak MiB':>9s} "
        f"{'above base':>10s}"
    )
    for mode, rows in results:
        for r in rows:
            print(
                f"{mode:17s} {r['n_images']:8d} {r['seconds']:8.1f} {r['baseline_rss_mib']:9.0f} "
                f"{r['peak_rss_mib']:9.0f} {r['peak_rss_mib'] - r['baseline_rss_mib']:10.0f}"
            )
    for mode, rows in results:
        a, b = rows[0], rows[-1]
        data = b["n_images"] / a["n_images"]
        peak = b["peak_rss_mib"] / a["peak_rss_mib"]
        above = (b["peak_rss_mib"] - b["baseline_rss_mib"]) / max(
            1.0, a["peak_rss_mib"] - a["baseline_rss_mib"]
        )
        print(
            f"RATIO peak RSS growth, {mode} {a['n_images']}->{b['n_images']} "
            f"(x{data:.0f} data) = {peak:.3f}  (goal <= 1.3; above-baseline growth x{above:.2f})"
        )


if __name__ == "__main__":
    main()

"""End-to-end build time of the scaled demo recipe at several sizes: how cost grows.

    python benchmarks/bench_scaling.py                       # 1k, 3k, 10k stills (minutes)
    python benchmarks/bench_scaling.py --sizes 10000,50000,100000   # the issue's sizes (hours
                                                                    # on 2 cores)

Each size: a fresh synthetic-endo tree (``scaled_demo.py``), quotas scaled with the data,
a cold build in its own process. Prints seconds, ms per sample, the per-stage split, and
the growth exponent b of cost ~ n^b between sizes (1.0 = linear). Asserts nothing.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from scaled_demo import clear, growth_exponent, measure_in_child, write_scaled_endo


def _short(stage: str) -> str:
    name, _, key = stage.partition(":")
    return (key if name == "export" else name)[:9]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,3000,10000", help="comma-separated still counts")
    ap.add_argument("--unique", type=int, default=500, help="distinct stills rendered")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-scaling-") as tmp:
        for n in sizes:
            base = Path(tmp) / str(n)
            root = write_scaled_endo(base / "root", n, unique=args.unique)
            rows.append(measure_in_child("build", root, n, base / "work"))
            clear(base)
            r = rows[-1]
            print(f"  {n:>7d} stills: {r['seconds']:8.1f} s", flush=True)

    stage_names = list(dict.fromkeys(name for r in rows for name, *_ in r["stages"]))
    print(
        f"{'stills':>8s} {'total s':>9s} {'ms/sample':>10s} {'peak MiB':>9s}  "
        + " ".join(f"{_short(s):>9s}" for s in stage_names)
    )
    for r in rows:
        per = {name: sec for name, sec, *_ in r["stages"]}
        cells = " ".join(f"{per.get(s, 0):9.1f}" for s in stage_names)
        print(
            f"{r['n_images']:8d} {r['seconds']:9.1f} {1000 * r['seconds'] / r['n_images']:10.2f} "
            f"{r['peak_rss_mib']:9.0f}  {cells}"
        )
    for a, b in zip(rows, rows[1:], strict=False):
        print(
            f"{a['n_images']} -> {b['n_images']}: x{b['n_images'] / a['n_images']:.1f} data, "
            f"x{b['seconds'] / a['seconds']:.2f} time, exponent "
            f"{growth_exponent(a['n_images'], a['seconds'], b['n_images'], b['seconds']):.2f}"
        )
    first, last = rows[0], rows[-1]
    per_first = first["seconds"] / first["n_images"]
    per_last = last["seconds"] / last["n_images"]
    print(
        f"RATIO time per sample {last['n_images']} / {first['n_images']} = "
        f"{per_last / per_first:.3f}  (1.0 = linear cost)"
    )
    exponent = growth_exponent(
        first["n_images"], first["seconds"], last["n_images"], last["seconds"]
    )
    print(f"RATIO build cost growth exponent = {exponent:.3f}  (1.0 = linear)")


if __name__ == "__main__":
    main()

"""Convert throughput as ratios to a bare directory walk that reads what convert must read.

    python benchmarks/bench_convert.py [--images 2000] [--repeats 5]
    python benchmarks/bench_convert.py --source kvasir --root DIR [--mask-dir masks]

Two trees are written from one synthetic-endo instance (``--images`` stills, 4 videos of 50
frames), and each is timed against its own baseline over the same files:

* header-only (the issue's goal): every JPEG of the instance hard-linked ``--copies`` times
  into a Kvasir v2 class-folder tree (``kvasir``, layout ``class_folders``: no masks).
  Baseline: ``os.walk`` + ``PIL.Image.open(path).size`` of every image (the floor any
  converter that checks sizes pays).
* masks: synthetic-endo itself (label table with binary PNG masks that convert decodes and
  RLE-encodes, plus frame folders). Baseline: the walk with a header read of every image and a
  full decode (``cv2.imdecode``) of every mask file instead of its header.

Convert runs as the stage a user runs (``convert_source``: scan, Parquet shards, merge) with
``--workers 1`` and ``--workers 2``. The baselines run in one process, so the ``--workers 2``
ratios compare 2 processes with 1 (what a user gets from the stage on this 2-core machine),
and they include the process pool's start. Baseline and converts are timed interleaved,
``--repeats`` times; ratios are of the medians (time of the baseline / time of convert over
the same tree). The stage's fixed cost (a convert of an 8-image tree) is printed too: it
weighs on small trees. No assertions: the machines are shared and noisy, so only same-run
ratios mean anything.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from medvqa_build.sources import get_source
from medvqa_build.stages.convert import convert_source

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".gif", ".webp"}


def walk(root: Path) -> int:
    n = 0
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            os.stat(os.path.join(dirpath, name))
            n += 1
    return n


def walk_headers(root: Path, mask_dir: Path | None = None) -> int:
    """The baseline: every image file in the tree opened once for its size (header only);
    with ``mask_dir``, the files below it are decoded instead (what reading a mask costs)."""
    masks = str(mask_dir) + os.sep if mask_dir is not None else None
    n = 0
    for dirpath, _, filenames in os.walk(root):
        is_mask = masks is not None and (dirpath + os.sep).startswith(masks)
        for name in filenames:
            if os.path.splitext(name)[1].lower() not in IMAGE_SUFFIXES:
                continue
            path = os.path.join(dirpath, name)
            if is_mask:
                cv2.imdecode(np.fromfile(path, np.uint8), cv2.IMREAD_UNCHANGED)
            else:
                with Image.open(path) as img:
                    img.size  # noqa: B018  (the header read is the point)
            n += 1
    return n


def class_folder_tree(src: Path, dst: Path, classes: list[str], copies: int = 1) -> int:
    """Every JPEG under ``src`` hard-linked ``copies`` times (copied where links fail) into
    ``dst/kvasir-dataset-v2/<class>/``, classes dealt round-robin."""
    files = sorted(p for p in src.rglob("*.jpg"))
    for k in range(copies):
        for i, path in enumerate(files):
            folder = dst / "kvasir-dataset-v2" / classes[i % len(classes)]
            folder.mkdir(parents=True, exist_ok=True)
            target = folder / f"{k}_{i:06d}_{path.name}"
            try:
                os.link(path, target)
            except OSError:
                target.write_bytes(path.read_bytes())
    return len(files) * copies


def timed(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds of each function, run interleaved (one round = each once, in order)."""
    for fn in fns.values():  # warm the page cache and the imports
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for key, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def convert_fn(source: str, root: Path, out: Path, workers: int, verify: str = "header"):
    """The stage as ``medvqa-build convert`` runs it; the counts of the last run are kept."""

    def run() -> dict:
        run.counts = convert_source(
            source, root, out, verify=verify, progress=False, workers=workers
        )
        return run.counts

    return run


def measure(
    title: str,
    source: str,
    root: Path,
    out: Path,
    repeats: int,
    mask_dir: Path | None,
    decode: bool,
) -> dict[str, float]:
    n_img = walk_headers(root, mask_dir)
    base = "walk+header reads" + ("+mask decode" if mask_dir is not None else "")
    fns = {
        base: lambda: walk_headers(root, mask_dir),
        "convert --workers 1": convert_fn(source, root, out, 1),
        "convert --workers 2": convert_fn(source, root, out, 2),
    }
    if decode:
        fns["convert --verify decode --workers 1"] = convert_fn(source, root, out, 1, "decode")
    t = timed(fns, repeats)
    found = fns["convert --workers 1"].counts["found"]
    print(f"{title}: {source} at {root.name}, {n_img} image files, {found} candidate samples")
    print(f"  {base:36s} {n_img / t[base]:9.0f} images/s   (baseline, 1 process)")
    ratios = {}
    for key in fns:
        if key == base:
            continue
        ratios[key] = t[base] / t[key]
        note = "   (2 processes)" if "workers 2" in key else ""
        print(f"  {key:36s} {found / t[key]:9.0f} samples/s  ratio {ratios[key]:.3f}{note}")
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", help="with --root: measure this source only")
    parser.add_argument("--root", help="the source's root (default: generated trees)")
    parser.add_argument("--mask-dir", help="with --root: folder (below ROOT) of mask files")
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--copies", type=int, default=4, help="hard links of each JPEG in the header-only tree"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out" / "samples.parquet"
        out.parent.mkdir()
        if args.root:
            root = Path(args.root).resolve()
            mask_dir = root / args.mask_dir if args.mask_dir else None
            r = measure("tree", args.source, root, out, args.repeats, mask_dir, True)
            what = f"{args.source}" + (", with masks" if mask_dir else "")
            for key, value in r.items():
                print(f"RATIO {what}: {key} / baseline = {value:.3f}  (no goal)")
            return
        from medvqa_build.sources.synthetic_endo import write_synthetic_endo

        syn = write_synthetic_endo(
            Path(tmp) / "syn", n_images=args.images, n_videos=4, frames_per_video=50
        )
        classes = sorted(get_source("kvasir").manifest.label_map)
        class_folder_tree(syn, Path(tmp) / "kvasir", classes, args.copies)
        tiny = Path(tmp) / "tiny"  # one image per class: what the stage costs besides files
        for cls, path in zip(classes, sorted((syn / "images").glob("*.jpg")), strict=False):
            (tiny / "kvasir-dataset-v2" / cls).mkdir(parents=True)
            os.link(path, tiny / "kvasir-dataset-v2" / cls / path.name)
        fixed = timed(
            {"1": convert_fn("kvasir", tiny, out, 1), "2": convert_fn("kvasir", tiny, out, 2)},
            args.repeats,
        )
        n_files = walk(syn)
        t_stat = timed({"walk+stat": lambda: walk(syn)}, args.repeats)["walk+stat"]
        print(f"synthetic-endo: {n_files} files; walk+stat {n_files / t_stat:.0f} files/s")
        print(
            f"convert of a {len(classes)}-image tree (the stage's fixed cost): "
            f"{fixed['1'] * 1000:.0f} ms with --workers 1, {fixed['2'] * 1000:.0f} ms with 2"
        )
        head = measure("header-only", "kvasir", Path(tmp) / "kvasir", out, args.repeats, None, True)
        masks = measure("masks", "synthetic-endo", syn, out, args.repeats, syn / "masks", False)
        w1, w2 = "convert --workers 1", "convert --workers 2"
        dec = "convert --verify decode --workers 1"
        print(
            f"RATIO convert header-only (class folders, 1 worker) / walk+header reads"
            f" = {head[w1]:.3f}  (goal >= 0.5)"
        )
        print(
            f"RATIO convert header-only (class folders, --workers 2: 2 processes) / walk+header"
            f" reads (1 process) = {head[w2]:.3f}  (no goal: 2 processes against 1)"
        )
        print(
            f"RATIO convert with masks (synthetic-endo, 1 worker) / walk+header reads+mask decode"
            f" = {masks[w1]:.3f}  (no goal)"
        )
        print(
            f"RATIO convert with masks (synthetic-endo, --workers 2: 2 processes) / walk+header"
            f" reads+mask decode (1 process) = {masks[w2]:.3f}  (no goal: 2 processes against 1)"
        )
        print(
            f"RATIO convert header-only --verify decode (1 worker) / walk+header reads"
            f" = {head[dec]:.3f}  (no goal)"
        )


if __name__ == "__main__":
    main()

"""Render-stage throughput per prompt level as a ratio to the bare codec, in the same run.

Run: ``python benchmarks/bench_render.py [--images 60] [--scale 1] [--rounds 3] [--repeat 3]
[--clock cpu|wall]``. Not a test: nothing here asserts a time.

Items are built as the generate stage builds them (a planned shape carrying the converted
region's box and RLE mask; ``multi`` = the lesion box plus a second box in another colour) on
the converted synthetic-endo source, and rendered as the stage's workers render them, a chunk
of up to ``stages.render.CHUNK`` items at a time (``stages.render._render_chunk``): read the
source files, plan the marks and check the stroke buffers (contours), then decode, draw, check
pixel alignment, encode and write each file.

The baseline does the I/O that no prompt level can avoid, with bare cv2 on the same files:
read + decode (to RGB), encode as JPEG q92 (from BGR), write the file the same way.

Columns: ``stage`` = the chunk as the build runs it (``image`` on a plain JPEG/PNG at native
size does nothing at all: the source file is published as it is; ``coord`` decodes, records
and checks but encodes nothing); ``encoded`` = one item at a time, planned after decoding
(``render_in_place``), always encoding and writing the image, as the stage does for a video
frame, a slice or a DICOM.
A ratio is baseline time / level time, each level timed right after the baseline in every
round (median of the rounds): 1.0 = the prompt costs nothing beyond the codec; the goal is
>= 0.8. ``--clock cpu`` (default) times this process's CPU, which other busy processes on
the machine disturb less than elapsed time.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from medvqa_build.api import load_source, make_synthetic
from medvqa_build.media.encode import encode_image
from medvqa_build.media.load import load_ref_rgb
from medvqa_build.media.refs import resolve_image, source_ref, split_fragment
from medvqa_build.recipe import RenderSpec
from medvqa_build.records import DrawnShape, Item, Region
from medvqa_build.render import Mark, Style, prompt_levels
from medvqa_build.render.alignment import check_alignment, check_strokes
from medvqa_build.render.base import render_in_place
from medvqa_build.stages.render import CHUNK, RenderJob, _render_chunk
from medvqa_build.store.atomic import write_atomic

SOURCE = "synthetic-endo"
QUALITY = 92
KIND = {"box": "box", "contour": "contour", "mask": "mask", "point": "point", "coord": "text"}


def _shape(kind: str, region: Region, color: str) -> DrawnShape:
    # as tasks/base.py TaskGenerator.prompt_shapes plans it
    return DrawnShape(0, kind, region.label, color, bbox=region.bbox, mask=region.mask)


def _item(sample, level: str, index: int) -> Item:
    region = sample.regions[0]
    if level == "image":
        shapes: tuple[DrawnShape, ...] = ()
    elif level == "multi":  # as tasks/region_recognition.py plans it: boxes only
        x1, y1, x2, y2 = region.bbox
        w, h = x2 - x1, y2 - y1
        other = (sample.width - w - 1, 1.0, sample.width - 1.0, 1.0 + h)
        shapes = (
            DrawnShape(0, "box", region.label, "green", bbox=region.bbox),
            DrawnShape(0, "box", "other", "red", bbox=other),
        )
    else:
        shapes = (_shape(KIND[level], region, "green"),)
    return Item(
        f"{level}-{index:05d}",
        "B",
        "C",
        "T",
        "S",
        sample.source,
        (sample.sample_id,),
        (source_ref(sample.source, sample.image),),
        "What is in the region {box}?" if level == "coord" else "What is marked?",
        ("a", "b"),
        "A",
        "a",
        prompt_level=level,
        prompt_geometry=shapes,
        coord_format="abs" if level == "coord" else None,
    )


def _baseline(items: list[Item], job: RenderJob, paths: list[Path]) -> None:
    for item, path in zip(items, paths, strict=True):
        bgr = cv2.imdecode(np.fromfile(str(path), np.uint8), cv2.IMREAD_COLOR)
        rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        ok, buf = cv2.imencode(
            ".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, QUALITY]
        )
        write_atomic(job.out / f"images/{item.item_id}_0.jpg", buf.tobytes())


def _stage(items: list[Item], job: RenderJob) -> None:
    for start in range(0, len(items), CHUNK):  # in chunks, as the stage's workers take them
        chunk = items[start : start + CHUNK]
        for item, done in zip(chunk, _render_chunk((chunk, job)), strict=True):
            if done.item is None or done.problems:
                raise SystemExit(f"{item.item_id} did not render cleanly: {done}")


def _encoded(items: list[Item], job: RenderJob) -> None:
    """render_one's steps (no resize), always encoding the image."""
    style = Style(thickness_px=job.spec.thickness_px)
    for item in items:
        base, fragment = split_fragment(item.images[0])
        clean = load_ref_rgb(resolve_image(base, job.roots), fragment)
        marks = [
            Mark(Region(s.label or "", bbox=s.bbox, mask=s.mask), s.color or "red")
            for s in item.prompt_geometry
        ]
        drawn = render_in_place(item.prompt_level, clean, marks, style, root=job.roots[item.source])
        result = drawn.result
        if drawn.strokes:  # drawn into stroke buffers (contours): checked on them
            problems = check_strokes(
                drawn.before, result.image, drawn.strokes, item.item_id, origin=drawn.origin
            )
        else:
            problems = check_alignment(
                drawn.before,
                result.image,
                result.shapes,
                item.item_id,
                decoded=result.decoded or None,
                origin=drawn.origin,
            )
        if problems:
            raise SystemExit(f"{item.item_id}: alignment problems")
        data = encode_image(result.image, "jpeg", QUALITY)
        write_atomic(job.out / f"images/{item.item_id}_0.jpg", data)


def _upscale(root: Path, scale: float) -> None:
    """Scale the generated images (cubic, JPEG q95) and masks (nearest) by ``scale``: the
    codec's cost grows with the area, an outline's with the perimeter."""
    for path in (root / "images").glob("*.jpg"):
        image = cv2.imread(str(path), cv2.IMREAD_COLOR)
        big = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
        cv2.imwrite(str(path), big, [cv2.IMWRITE_JPEG_QUALITY, 95])
    for path in (root / "masks").glob("*.png"):
        mask = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
        cv2.imwrite(str(path), cv2.resize(mask, None, fx=scale, fy=scale, interpolation=0))


def _seconds(fn, repeat: int, clock) -> float:
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=60)
    parser.add_argument(
        "--scale", type=float, default=1.0, help="scale the ~350 px synthetic images first"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per round (best kept)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median kept)")
    parser.add_argument(
        "--clock",
        choices=["cpu", "wall"],
        default="cpu",
        help="cpu: this process's CPU time (steady on a shared machine; the default); "
        "wall: elapsed time",
    )
    args = parser.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    # one thread: OpenCV hands a large colour conversion (the baseline's two cvtColor calls)
    # to its thread pool, whose workers spin afterwards; on an idle machine that spinning
    # counted as the baseline's CPU time and made every level look ~1.5x cheaper than wall
    # time showed (contour 0.92 against 0.59)
    cv2.setNumThreads(1)
    # tmpfs where there is one: ext4 flushes a file renamed over an existing one (the repeats
    # here; the stage writes new files), which would time the disk, not the stage
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as tmp:
        root = make_synthetic(
            SOURCE, Path(tmp) / "src", n_images=args.images * 5 // 4 + 5, n_videos=0
        )
        if args.scale != 1:
            _upscale(root, args.scale)
        samples = [s for s in load_source(SOURCE, root).samples if s.regions][: args.images]
        n = len(samples)
        job = RenderJob(
            roots={SOURCE: root}, out=Path(tmp) / "out", spec=RenderSpec(jpeg_quality=QUALITY)
        )
        levels = {lv: [_item(s, lv, i) for i, s in enumerate(samples)] for lv in prompt_levels()}
        # each level is timed right after the baseline in every round, so drifting machine load
        # hits both alike; a level's ratio is the median of its rounds' ratios
        base, stage, encoded = [], {lv: [] for lv in levels}, {lv: [] for lv in levels}
        paths = [root / s.image for s in samples]
        for _ in range(args.rounds):
            for lv, items in levels.items():
                t_base = _seconds(lambda it=items: _baseline(it, job, paths), args.repeat, clock)
                t_stage = _seconds(lambda it=items: _stage(it, job), args.repeat, clock)
                t_enc = _seconds(lambda it=items: _encoded(it, job), args.repeat, clock)
                base.append(t_base)
                stage[lv].append((t_base / t_stage, t_stage))
                encoded[lv].append((t_base / t_enc, t_enc))
        print(
            f"{n} synthetic-endo images of about {samples[0].width}x{samples[0].height} px "
            f"({args.clock} time); baseline read + cv2 decode + "
            f"encode (JPEG q{QUALITY}) + write: {n / statistics.median(base):.1f} img/s"
        )
        print(
            f"{'level':8s} {'stage img/s':>12s} {'ratio':>6s} {'encoded img/s':>14s} {'ratio':>6s}"
        )
        for lv in levels:
            sr, st = (statistics.median(v) for v in zip(*stage[lv], strict=True))
            er, et = (statistics.median(v) for v in zip(*encoded[lv], strict=True))
            stage_cols = f"{n / st:12.1f} {sr:6.2f}" if sr < 50 else f"{'(no work)':>19s}"
            print(f"{lv:8s} {stage_cols} {n / et:14.1f} {er:6.2f}")
        size = f"{samples[0].width}px"
        for lv in levels:
            sr = statistics.median(r for r, _ in stage[lv])
            er = statistics.median(r for r, _ in encoded[lv])
            value = er if sr >= 50 else sr  # "no work": the stage publishes the source file
            print(
                f"RATIO render+encode / cv2 decode+encode, {lv}, {size} = {value:.3f}  "
                "(goal >= 0.8)"
            )


if __name__ == "__main__":
    main()

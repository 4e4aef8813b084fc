"""Shared by the build benchmarks: a large synthetic-endo tree written fast, the demo recipe
scaled to it with ``--set``-style overrides, per-stage wall times, and peak memory.

Not a benchmark itself (no ``bench_`` prefix, so ``run_all.py`` skips it).

``write_scaled_endo`` renders ``unique`` distinct stills with ``write_synthetic_endo`` (about
20 ms each on one core, too slow for 10^5 images) and writes the rest as copies whose JPEG
carries a distinct comment segment: the bytes, and so content hashes and embedding-cache
keys, are unique per file, the pixels repeat. Masks are hard links. Decode, header reads,
hashing, embedding and rendering therefore cost what they cost on distinct files of the same
size; only the pixel statistics repeat (every ``unique``-th image looks the same).
"""

from __future__ import annotations

import contextlib
import csv
import os
import resource
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEMO_RECIPE = REPO / "recipes" / "demo.yaml"
DEMO_STILLS = 150  # n_images of recipes/demo.yaml; the still-image quotas scale from it
VIDEO_TASKS = {"surgical-phase"}  # quotas over video frames, which do not scale


def _with_comment(jpeg: bytes, text: str) -> bytes:
    """The same JPEG with a COM segment right after SOI (decoders ignore it)."""
    payload = text.encode()
    seg = b"\xff\xfe" + (len(payload) + 2).to_bytes(2, "big") + payload
    return jpeg[:2] + seg + jpeg[2:]


def write_scaled_endo(
    root: Path,
    n_images: int,
    *,
    unique: int = 500,
    n_videos: int = 0,
    frames_per_video: int = 24,
    seed: int = 0,
    mask_every: int = 1,
) -> Path:
    """A synthetic-endo tree of ``n_images`` stills (``unique`` of them rendered, see above).

    ``mask_every`` > 1 keeps the mask of only every such lesion still (the k-th still that
    has one, k = 0, mask_every, 2 * mask_every, ...): a download where a few images are
    segmented and most are only labelled (HyperKvasir, or EndoBench's sources together)."""
    from medvqa_build.sources.synthetic_endo import FINDINGS, write_synthetic_endo

    unique = min(n_images, unique - unique % len(FINDINGS) or len(FINDINGS))
    write_synthetic_endo(
        root, n_images=unique, n_videos=n_videos, frames_per_video=frames_per_video, seed=seed
    )
    images, masks = root / "images", root / "masks"
    has_mask = [(masks / f"img_{j:05d}.png").exists() for j in range(unique)]
    # the lesion stills (those whose finding has a mask) that keep it: every mask_every-th
    kept = np.cumsum([has_mask[i % unique] for i in range(n_images)]) % mask_every == 1 % mask_every
    dropped = [i for i in range(min(unique, n_images)) if has_mask[i] and not kept[i]]
    if n_images <= unique:
        _drop_masks(masks, dropped)
        return root
    base = [(images / f"img_{i:05d}.jpg").read_bytes() for i in range(unique)]
    rows = []
    for i in range(n_images):
        stem = f"img_{i:05d}"
        j = i % unique  # same finding: unique is a multiple of len(FINDINGS)
        if i >= unique:
            (images / f"{stem}.jpg").write_bytes(_with_comment(base[j], f"copy {i}"))
            if has_mask[j] and kept[i]:
                os.link(masks / f"img_{j:05d}.png", masks / f"{stem}.png")
        patient = f"P{i // 3:05d}"
        split = "test" if (i // 3) % 5 == 0 else "train"
        rows.append(
            {
                "image": stem,
                "finding": FINDINGS[i % len(FINDINGS)],
                "patient_id": patient,
                "split": split,
            }
        )
    with open(root / "labels.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["image", "finding", "patient_id", "split"])
        writer.writeheader()
        writer.writerows(rows)
    _drop_masks(masks, dropped)  # the rendered stills' own, once the copies have linked theirs
    return root


def _drop_masks(masks: Path, stills: list[int]) -> None:
    for i in stills:
        (masks / f"img_{i:05d}.png").unlink()


def scaled_overrides(root: Path, n_images: int, cache: Path, formats: str | None = None):
    """``--set`` strings: the demo recipe reading ``root`` with still-image quotas x n/150."""
    import yaml

    demo = yaml.safe_load(DEMO_RECIPE.read_text(encoding="utf-8"))
    scale = n_images / DEMO_STILLS
    out = [
        "sources.0.generate=null",
        f"sources.0.root={root}",
        f"embedding_cache={cache}",
    ]
    for i, task in enumerate(demo["tasks"]):
        if task["name"] not in VIDEO_TASKS:
            out.append(f"tasks.{i}.quota={max(1, round(task['quota'] * scale))}")
    if formats:
        out.append(f"export.formats=[{formats}]")
    return out


@contextlib.contextmanager
def stage_timer() -> Iterator[list[tuple[str, float, bool, float]]]:
    """Record ``(stage, seconds, reused, peak RSS MiB after it)`` of every stage run by the
    pipeline in this block (the peak is the process's high-water mark so far)."""
    import medvqa_build.pipeline  # noqa: F401  (loads every module that runs stages)
    from medvqa_build.pipeline import runner

    real = runner.run_stage
    log: list[tuple[str, float, bool, float]] = []

    def timed(build_dir, stage, key, inputs, build):
        start = time.perf_counter()
        res = real(build_dir, stage, key, inputs, build)
        log.append((f"{stage.name}:{key}", time.perf_counter() - start, res.reused, peak_rss_mib()))
        return res

    # every module that imported run_stage by name (the build loop)
    users = [
        m
        for name, m in list(sys.modules.items())
        if name.startswith("medvqa_build") and getattr(m, "run_stage", None) is real
    ]
    for m in users:
        m.run_stage = timed
    try:
        yield log
    finally:
        for m in users:
            m.run_stage = real


def peak_rss_mib() -> float:
    """High-water mark of this process's resident set.

    On Linux ``VmHWM`` of ``/proc/self/status``: ``ru_maxrss`` also counts the process it was
    forked from (the child of a parent holding 300 MiB reads 327 MiB before doing anything),
    so a measurement child started by a parent that had just written a 100k-image tree read
    that parent's size as its baseline. Elsewhere ``ru_maxrss`` (KiB on Linux, bytes on
    macOS)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1 << 20) if sys.platform == "darwin" else rss / 1024


def clear(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# -- one measurement per process: peak RSS is a per-process high-water mark ---------------------

MODES = ("convert", "convert+generate", "build")


def measure(mode: str, root: Path, n_images: int, work: Path) -> dict:
    """Run one ``mode`` over ``root`` in this process; seconds, peak RSS, per-stage times.

    ``convert``: the convert stage (streaming scan into the sample table). ``convert+generate``:
    that, then question generation over the sample table (read a batch at a time) with
    every task on label-pool negatives (no embedding pass), items written. ``build``: the
    whole scaled demo recipe through ``medvqa_build.api.build``.
    """
    import medvqa_build.pipeline  # noqa: F401  (imports counted in the baseline)
    from medvqa_build.api import build, load_recipe
    from medvqa_build.sources import get_source
    from medvqa_build.stages.convert import convert_source
    from medvqa_build.stages.generate import generate_items
    from medvqa_build.store.parquet import ItemWriter
    from medvqa_build.store.tables import SampleTable

    baseline = peak_rss_mib()
    overrides = scaled_overrides(root, n_images, work / "cache")
    stages: list[tuple[str, float, bool, float]] = []
    start = time.perf_counter()
    if mode == "build":
        recipe = load_recipe(DEMO_RECIPE, overrides)
        with stage_timer() as stages:
            build(recipe, work / "out", progress=False)
    else:
        t = time.perf_counter()
        convert_source("synthetic-endo", root, work / "samples.parquet", progress=False)
        stages.append(("convert", time.perf_counter() - t, False, peak_rss_mib()))
        if mode == "convert+generate":
            import yaml

            demo = yaml.safe_load(DEMO_RECIPE.read_text(encoding="utf-8"))
            for i, task in enumerate(demo["tasks"]):
                if "negatives" in task:
                    overrides += [
                        f"tasks.{i}.negatives.strategy=label_pool",
                        f"tasks.{i}.negatives.params={{}}",
                    ]
            recipe = load_recipe(DEMO_RECIPE, overrides)
            manifests = {"synthetic-endo": get_source("synthetic-endo").manifest}
            t = time.perf_counter()
            samples = SampleTable([work / "samples.parquet"])  # as the pipeline reads them
            with ItemWriter(work / "items.parquet") as writer:  # as the generate stage does
                items = generate_items(
                    recipe, samples, manifests, progress=False, out_dir=work, sink=writer.add
                )
            stages.append(("generate", time.perf_counter() - t, False, peak_rss_mib()))
            del items
    return {
        "mode": mode,
        "n_images": n_images,
        "seconds": time.perf_counter() - start,
        "baseline_rss_mib": baseline,
        "peak_rss_mib": peak_rss_mib(),
        "stages": stages,
    }


def measure_in_child(mode: str, root: Path, n_images: int, work: Path) -> dict:
    """:func:`measure` in a fresh interpreter, so each peak RSS is that run's alone."""
    import json
    import subprocess

    work.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, __file__, mode, str(root), str(n_images), str(work)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def growth_exponent(n1: float, t1: float, n2: float, t2: float) -> float:
    """b in cost ~ n^b between two sizes (1.0 = linear)."""
    import math

    return math.log(t2 / t1) / math.log(n2 / n1)


if __name__ == "__main__":
    import json
    import logging

    logging.disable(logging.WARNING)
    mode_arg, root_arg, n_arg, work_arg = sys.argv[1:5]
    print(json.dumps(measure(mode_arg, Path(root_arg), int(n_arg), Path(work_arg))))

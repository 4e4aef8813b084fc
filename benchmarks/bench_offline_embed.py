"""The weight-free ``offline`` embedder, v2 against v1, side by side in one run: images/s and
class separation.

    python benchmarks/bench_offline_embed.py [--images 300] [--cores 2] [--repeats 5]

Speed: the whole path of ``embed_paths`` (file read, decode, features, its prefetching
threads) over a synthetic-endo tree like the demo's (352-416 px JPEG stills and video frames,
the paths the embed stage hands over), the process pinned to ``--cores`` cores, after a warm-up
read. Each of ``--repeats`` rounds times every variant once, in turn, so that load from other
processes hits them alike; the best round of each is kept. v1 runs with its default threads
(cores - 1) and with one per core; v2 with one thread and with one per core (its default on a
machine of that many cores).

Separation: nearest-centroid accuracy, leave one out (each image against the class centroids
with itself taken out of its own class; classes with one image are skipped), on the
synthetic-endo samples and on three EndoBench replicas of ``scripts/build_endobench_replicas.py``
(class = the sample's label set). The replicas' pixels are noise, so chance is what to expect
there; the figure shows that neither version invents structure.

Prints ``RATIO offline embedder images/s (2 cores) = <value>  (goal >= 300)``; asserts nothing.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
REPLICA_SOURCES = ("kvasir", "hyperkvasir", "endovis18")
SHUFFLES = 20


# ---------------------------------------------------------------------------------------------
# BASELINE: the offline embedder v1 (src/medvqa_build/negatives/offline_embedder.py before
# issue 28), copied unchanged apart from names: full decode, PIL bilinear resize to 128 px,
# features by skimage. Kept here only to be measured against.
# ---------------------------------------------------------------------------------------------


def _v1_embedder_class():
    from PIL import Image
    from skimage.color import rgb2hsv, rgb2lab
    from skimage.feature import local_binary_pattern
    from skimage.filters import threshold_otsu
    from skimage.measure import moments_central, moments_hu, moments_normalized

    from medvqa_build.negatives.embedder import l2_normalise, load_image_rgb, prefetch_batches

    hsv_bins, grid, orient_bins, lbp_p, lbp_r = (8, 3, 3), 4, 9, 8, 1.0

    def _hist(values, bins, lo, hi, weights=None):
        h, _ = np.histogram(values, bins=bins, range=(lo, hi), weights=weights)
        return h.astype(np.float32)

    def _block(x, weight, sqrt=False):
        x = np.asarray(x, dtype=np.float32).ravel()
        if sqrt:
            x = np.sqrt(x / max(float(x.sum()), 1e-12))
        return weight * l2_normalise(x)

    def colour_features(rgb):
        hsv = rgb2hsv(rgb).reshape(-1, 3)
        idx = [np.minimum((hsv[:, i] * b).astype(int), b - 1) for i, b in enumerate(hsv_bins)]
        flat = (idx[0] * hsv_bins[1] + idx[1]) * hsv_bins[2] + idx[2]
        joint = np.bincount(flat, minlength=int(np.prod(hsv_bins))).astype(np.float32)
        lab = rgb2lab(rgb).reshape(-1, 3)
        lab_stats = np.concatenate([lab.mean(0) / [100, 128, 128], lab.std(0) / [50, 64, 64]])
        return [_block(joint, 1.0, sqrt=True), _block(lab_stats, 0.6)]

    def texture_features(grey):
        lbp = local_binary_pattern((grey * 255).astype(np.uint8), lbp_p, lbp_r, method="uniform")
        lbp_hist = _hist(lbp, lbp_p + 2, 0, lbp_p + 2)
        gy, gx = np.gradient(grey)
        mag = np.hypot(gx, gy)
        ang = np.mod(np.arctan2(gy, gx), np.pi)
        h, w = grey.shape
        cells = []
        for rows in (slice(0, h // 2), slice(h // 2, h)):
            for cols in (slice(0, w // 2), slice(w // 2, w)):
                cells.append(_hist(ang[rows, cols], orient_bins, 0, np.pi, mag[rows, cols]))
        grad = np.concatenate(cells)
        return [_block(lbp_hist, 0.8, sqrt=True), _block(grad, 0.8, sqrt=True)]

    def shape_features(grey):
        try:
            fg = grey > threshold_otsu(grey)
        except ValueError:  # a constant image has no threshold
            fg = np.zeros_like(grey, dtype=bool)
        if fg.mean() > 0.5:  # foreground = the minority side
            fg = ~fg
        if fg.any():
            hu = moments_hu(moments_normalized(moments_central(fg.astype(np.float64))))
        else:
            hu = np.zeros(7)
        hu = -np.sign(hu) * np.log10(np.abs(hu) + 1e-12) / 12.0
        h, w = grey.shape
        layout = grey[: h - h % grid, : w - w % grid]
        layout = layout.reshape(grid, h // grid, grid, w // grid).mean(axis=(1, 3))
        layout = layout - layout.mean()
        extent = np.array([fg.mean(), fg.any(axis=0).mean(), fg.any(axis=1).mean()])
        return [_block(hu, 0.5), _block(layout, 0.7), _block(extent, 0.4)]

    class OfflineEmbedderV1:
        def __init__(self, image_size: int = 128, batch_size: int = 64, workers: int = 1):
            self.image_size, self.batch_size, self.workers = image_size, batch_size, workers
            self.id = f"offline:v1:size{self.image_size}"
            self.dim = int(self.embed_array(np.zeros((8, 8, 3), np.uint8)).shape[0])

        def embed_array(self, rgb):
            img = Image.fromarray(np.asarray(rgb, dtype=np.uint8)).convert("RGB")
            img = img.resize((self.image_size, self.image_size), Image.Resampling.BILINEAR)
            arr = np.asarray(img, dtype=np.float32) / 255.0
            grey = arr @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
            blocks = colour_features(arr) + texture_features(grey) + shape_features(grey)
            return l2_normalise(np.concatenate(blocks))

        def _load(self, path):
            return self.embed_array(np.asarray(load_image_rgb(path)))

        def embed_paths(self, paths):
            out = np.empty((len(paths), self.dim), dtype=np.float32)
            row = 0
            for batch in prefetch_batches(list(paths), self._load, self.batch_size, self.workers):
                out[row : row + len(batch)] = np.stack(batch)
                row += len(batch)
            return out

    return OfflineEmbedderV1


# ---------------------------------------------------------------------------------------------


def pin_cores(n: int) -> int:
    """Pin this process (and the threads it starts) to its first ``n`` allowed cores."""
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, set(allowed[:n]))
    return len(os.sched_getaffinity(0))


def embed_inputs(source_id: str, root: Path, frames_dir: Path) -> tuple[list[str], list[str]]:
    """(paths, classes) as the embed stage sees them: whole files by path, video frames and
    volume slices decoded once to PNG; class = the sample's sorted label set."""
    from medvqa_build.api import load_source
    from medvqa_build.media.encode import encode_image
    from medvqa_build.media.load import load_ref_rgb
    from medvqa_build.media.refs import resolve_image, sample_ref, split_fragment

    result = load_source(source_id, root)
    paths, classes = [], []
    frames_dir.mkdir(parents=True, exist_ok=True)
    for k, sample in enumerate(result.samples):
        base, fragment = split_fragment(sample_ref(sample))
        path = resolve_image(base, {source_id: root})
        if fragment:
            try:
                rgb = load_ref_rgb(path, fragment)
            except Exception:  # noqa: BLE001 - a sample the embed stage would skip
                continue
            path = frames_dir / f"{source_id}-{k:06d}.png"
            path.write_bytes(encode_image(rgb, "png"))
        paths.append(str(path))
        classes.append("+".join(sorted(sample.labels)) or "(none)")
    return paths, classes


def loo_nearest_centroid(vectors: np.ndarray, classes: Sequence[str]) -> tuple[float, int, int]:
    """Leave-one-out nearest-centroid accuracy over the images whose class has >= 2 images:
    (accuracy, images scored, classes)."""
    counts = Counter(classes)
    keep = [i for i, c in enumerate(classes) if counts[c] >= 2]
    names = sorted({classes[i] for i in keep})
    if len(names) < 2:
        return float("nan"), len(keep), len(names)
    x = vectors[keep].astype(np.float64)
    lab = np.array([names.index(classes[i]) for i in keep])
    sums = np.stack([x[lab == j].sum(0) for j in range(len(names))])
    n = np.bincount(lab, minlength=len(names)).astype(np.float64)
    correct = 0
    for i in range(len(keep)):
        cents = sums.copy()
        cents[lab[i]] -= x[i]
        cents /= np.where(np.arange(len(names)) == lab[i], n - 1, n)[:, None]
        cents /= np.maximum(np.linalg.norm(cents, axis=1, keepdims=True), 1e-12)
        correct += int(np.argmax(cents @ x[i]) == lab[i])
    return correct / len(keep), len(keep), len(names)


def shuffled_accuracy(vectors: np.ndarray, classes: Sequence[str]) -> float:
    """Mean leave-one-out accuracy with the labels permuted (seeded): the chance level of
    this test on this data, lower than 1 / classes because the image left out is missing
    from its own class's centroid."""
    rng = np.random.default_rng(0)
    accs = [
        loo_nearest_centroid(vectors, list(rng.permutation(classes)))[0] for _ in range(SHUFFLES)
    ]
    return float(np.mean(accs))


def images_per_s(embedders: dict, paths: list[str], repeats: int) -> dict[str, float]:
    """Best images/s of each embedder over ``repeats`` rounds; every round times each embedder
    once, in turn, so a burst of load from elsewhere hits all of them alike."""
    best = dict.fromkeys(embedders, float("inf"))
    for embedder in embedders.values():
        embedder.embed_paths(paths[:32])  # warm-up
    for _ in range(repeats):
        for name, embedder in embedders.items():
            t = time.perf_counter()
            embedder.embed_paths(paths)
            best[name] = min(best[name], time.perf_counter() - t)
    return {name: len(paths) / seconds for name, seconds in best.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=300, help="synthetic-endo stills")
    ap.add_argument("--videos", type=int, default=2, help="synthetic-endo videos (24 frames)")
    ap.add_argument("--cores", type=int, default=2, help="pin the process to this many cores")
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds; the best is kept")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    cores = pin_cores(args.cores)

    from medvqa_build.api import make_synthetic
    from medvqa_build.negatives.offline_embedder import OfflineEmbedder

    sys.path.insert(0, str(REPO))
    from scripts.build_endobench_replicas import write_replicas

    v1_class = _v1_embedder_class()
    with tempfile.TemporaryDirectory(prefix="bench-offline-embed-") as tmp:
        tmp_path = Path(tmp)
        root = make_synthetic(
            "synthetic-endo",
            tmp_path / "synthetic-endo",
            n_images=args.images,
            n_videos=args.videos,
            frames_per_video=24,
            n_corrupt=0,
        )
        datasets = {"synthetic-endo": embed_inputs("synthetic-endo", root, tmp_path / "frames")}
        replica_roots = write_replicas(tmp_path / "replicas", REPLICA_SOURCES)
        for source_id, replica_root in replica_roots.items():
            datasets[f"replica {source_id}"] = embed_inputs(
                source_id, replica_root, tmp_path / "frames"
            )

        paths = datasets["synthetic-endo"][0]
        for p in paths:  # warm the page cache: both sides read the same warm files
            Path(p).read_bytes()
        n_frames = sum("/images/" not in p for p in paths)
        n_png = sum(p.endswith(".png") for p in paths)
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"synthetic-endo: {len(paths)} images ({len(paths) - n_frames} stills, {n_frames} "
            f"video frames; {len(paths) - n_png} JPEG, {n_png} PNG); {cores} cores pinned; "
            f"best of {args.repeats}; load average before: {load}"
        )
        runs = {
            f"v1 (skimage, full decode), {max(1, cores - 1)} thread(s), its default": v1_class(
                workers=max(1, cores - 1)
            ),
            f"v1 (skimage, full decode), {cores} threads": v1_class(workers=cores),
            "v2 (cv2, draft thumbnail), 1 thread": OfflineEmbedder(workers=1),
            f"v2 (cv2, draft thumbnail), {cores} threads, its default": OfflineEmbedder(
                workers=cores
            ),
        }
        speed = images_per_s(runs, paths, args.repeats)
        for name, value in speed.items():
            print(f"  {name:52s} {value:8.1f} images/s")
        v1_default, v2_default = speed[next(iter(runs))], speed[list(runs)[-1]]

        print(
            "separation: nearest-centroid accuracy, leave one out; 'shuffled': the same with the "
            f"labels permuted, mean of {SHUFFLES} seeded permutations (what no structure scores)"
        )
        print(
            f"  {'dataset':22s} {'images':>6s} {'classes':>7s} {'v1':>6s} {'v2':>6s}"
            f" {'v1 shuffled':>11s} {'v2 shuffled':>11s}"
        )
        v1, v2 = v1_class(workers=cores), OfflineEmbedder(workers=cores)
        separation = {}
        for name, (dpaths, classes) in datasets.items():
            e1, e2 = v1.embed_paths(dpaths), v2.embed_paths(dpaths)
            acc1, n, k = loo_nearest_centroid(e1, classes)
            acc2, _, _ = loo_nearest_centroid(e2, classes)
            separation[name] = (acc1, acc2)
            print(
                f"  {name:22s} {n:6d} {k:7d} {acc1:6.3f} {acc2:6.3f}"
                f" {shuffled_accuracy(e1, classes):11.3f} {shuffled_accuracy(e2, classes):11.3f}"
            )

    print("load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"RATIO offline embedder images/s ({cores} cores) = {v2_default:.1f}  (goal >= 300)")
    print(
        f"RATIO offline embedder v2 / v1 images/s, each with its default threads = "
        f"{v2_default / v1_default:.2f}  (no goal)"
    )
    acc1, acc2 = separation["synthetic-endo"]
    print(
        f"RATIO offline embedder separation v2 - v1, synthetic-endo (nearest centroid, leave one "
        f"out: {acc1:.3f} -> {acc2:.3f}) = {acc2 - acc1:.3f}  (goal >= 0)"
    )


if __name__ == "__main__":
    main()

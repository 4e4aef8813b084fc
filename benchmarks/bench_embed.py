"""Embed-stage throughput (decode + preprocess + forward, overlapped) as a ratio to the raw
model forward on already preprocessed tensors, same batch size and torch threads.

    python benchmarks/bench_embed.py --model ViT-S-32 --n 256 --threads 2
    python benchmarks/bench_embed.py --model tiny --n 2048

A ratio near 1.0 means decoding is hidden behind the forward pass. Prints, asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

TINY = {
    "embed_dim": 64,
    "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "head_width": 32, "patch_size": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
}


def best_rate(fn, n_items: int, repeats: int) -> float:
    """Items per second of the fastest of ``repeats`` runs (the machine may be shared)."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return n_items / best


def write_images(root: Path, n: int, size: int) -> list[str]:
    rng = np.random.default_rng(0)
    paths = []
    base = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
    for i in range(n):
        img = np.roll(base, i * 7, axis=1)
        p = root / f"img{i:05d}.jpg"
        Image.fromarray(img).save(p, quality=90)
        paths.append(str(p))
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="ViT-S-32", help="open_clip model name or 'tiny'")
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--image-size", type=int, default=512, help="size of the JPEGs on disk")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--workers", type=int, default=None, help="decode threads (default auto)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import open_clip
    import torch

    from medvqa_build.negatives import embed_with_cache
    from medvqa_build.negatives.open_clip_embedder import OpenClipEmbedder

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        model = args.model
        if model == "tiny":
            (tmp_path / "bench-tiny.json").write_text(json.dumps(TINY))
            open_clip.add_model_config(tmp_path / "bench-tiny.json")
            model = "bench-tiny"
        paths = write_images(tmp_path, args.n, args.image_size)
        emb = OpenClipEmbedder(model, None, batch_size=args.batch_size, workers=args.workers)
        serial = OpenClipEmbedder(model, None, batch_size=args.batch_size, workers=0)

        r = args.repeats
        batches = [
            [emb.preprocess_path(p) for p in paths[s : s + args.batch_size]]
            for s in range(0, len(paths), args.batch_size)
        ]
        emb.forward_preprocessed(batches[0])  # warm-up

        def forward_all():
            for b in batches:
                emb.forward_preprocessed(b)

        forward_ips = best_rate(forward_all, len(paths), r)
        prep_ips = best_rate(lambda: [emb.preprocess_path(p) for p in paths], len(paths), r)
        results = {}
        for name, e in (("overlapped", emb), ("serial", serial)):
            e.embed_paths(paths[: args.batch_size])  # warm-up
            results[name] = best_rate(lambda e=e: e.embed_paths(paths), len(paths), r)
        cache = tmp_path / "cache"
        embed_with_cache(emb, paths, cache, progress=False)
        cached_ips = best_rate(
            lambda: embed_with_cache(emb, paths, cache, progress=False), len(paths), r
        )

    print(
        f"model {args.model}  n {args.n}  batch {args.batch_size}  threads {args.threads}  "
        f"decode workers {emb.workers}  jpeg {args.image_size}px"
    )
    print(f"raw forward           {forward_ips:9.1f} img/s")
    print(f"decode+preprocess     {prep_ips:9.1f} img/s (one thread)")
    print(
        f"embed, serial         {results['serial']:9.1f} img/s  ratio to forward "
        f"{results['serial'] / forward_ips:.2f}"
    )
    print(
        f"embed, overlapped     {results['overlapped']:9.1f} img/s  ratio to forward "
        f"{results['overlapped'] / forward_ips:.2f}"
    )
    print(f"embed, cache hit      {cached_ips:9.1f} img/s  (hash + read)")


if __name__ == "__main__":
    main()

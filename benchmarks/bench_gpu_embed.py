"""Embed-stage throughput on a GPU against the raw model forward on the same batches.

    python benchmarks/bench_gpu_embed.py                       # ViT-B-16-SigLIP2, fp16, CUDA
    python benchmarks/bench_gpu_embed.py --model ViT-SO400M-14-SigLIP2 --n 8192 --batch-size 512
    python benchmarks/bench_gpu_embed.py --cpu                 # no GPU: tiny model on the CPU

An open_clip SigLIP2-class model with random weights (``pretrained=None``: nothing is
downloaded), fp16 on CUDA. "raw forward" runs the model on batches already decoded,
preprocessed and resident on the GPU (the ceiling); "embed stage" is
``OpenClipEmbedder.embed_paths`` from JPEG files on disk (decode + preprocess in a thread pool,
overlapped with the forward, host->device copy included). Prints the device it used first,
then img/s and the ratio (goal >= 0.9). Asserts nothing.
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


def write_jpegs(root: Path, n: int, size: int) -> list[str]:
    """``n`` distinct JPEGs (shifted noise + gradient) of ``size`` px, about 90 % quality."""
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
    base = (base // 2 + np.linspace(0, 127, size, dtype=np.uint8)[None, :, None]).astype(np.uint8)
    paths = []
    for i in range(n):
        p = root / f"img{i:06d}.jpg"
        Image.fromarray(np.roll(base, i * 7, axis=1)).save(p, quality=90)
        paths.append(str(p))
    return paths


def best_seconds(fn, repeats: int, sync) -> float:
    best = float("inf")
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="ViT-B-16-SigLIP2", help="open_clip model name")
    ap.add_argument("--cpu", action="store_true", help="force the CPU (and the tiny model)")
    ap.add_argument("--n", type=int, default=4096, help="images (CPU default 512)")
    ap.add_argument("--image-size", type=int, default=512, help="JPEG side on disk")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--workers", default="auto", help="decode threads, or a list: 4,8,15")
    ap.add_argument("--precision", default="auto", help="auto = fp16 on CUDA, fp32 on CPU")
    ap.add_argument("--decode", choices=["draft", "full"], default="draft", help="JPEG decoding")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import open_clip
    import torch

    from medvqa_build.negatives.embedder import default_workers
    from medvqa_build.negatives.open_clip_embedder import OpenClipEmbedder

    cuda = torch.cuda.is_available() and not args.cpu
    device = "cuda" if cuda else "cpu"
    if cuda:
        name = torch.cuda.get_device_name(0)
        print(f"DEVICE cuda: {name}, torch {torch.__version__}, CUDA {torch.version.cuda}")
        torch.backends.cuda.matmul.allow_tf32 = True
    else:
        why = "--cpu given" if args.cpu else "no CUDA device found"
        print(f"DEVICE cpu ({why}): {os.cpu_count()} cores, torch {torch.__version__}")
    n = args.n if cuda or args.n != 4096 else 512
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    with tempfile.TemporaryDirectory(prefix="bench-gpu-embed-") as tmp:
        tmp_path = Path(tmp)
        model = args.model
        if not cuda:
            (tmp_path / "bench-tiny.json").write_text(json.dumps(TINY))
            open_clip.add_model_config(tmp_path / "bench-tiny.json")
            model = "bench-tiny"
        t = time.perf_counter()
        paths = write_jpegs(tmp_path, n, args.image_size)
        print(f"wrote {n} JPEGs of {args.image_size}px in {time.perf_counter() - t:.1f} s")
        workers = (
            [default_workers()]
            if args.workers == "auto"
            else [int(w) for w in args.workers.split(",")]
        )
        emb = OpenClipEmbedder(
            model,
            None,
            device=device,
            batch_size=args.batch_size,
            precision=args.precision,
            workers=workers[0],
            decode=args.decode,
        )
        params = sum(p.numel() for p in emb._model.visual.parameters()) / 1e6
        print(
            f"model {model} (image tower {params:.1f} M params, random weights), "
            f"{emb.precision}, batch {args.batch_size}, n {n}, decode {emb.decode}"
        )

        # Raw forward: preprocessed batches already on the device, only the image tower runs.
        t = time.perf_counter()
        items = [emb.preprocess_path(p) for p in paths]
        prep_ips = n / (time.perf_counter() - t)
        batches = [
            emb.prepare_batch(items[s : s + args.batch_size]) for s in range(0, n, args.batch_size)
        ]
        del items

        def forward_all() -> None:
            with torch.inference_mode():
                for b in batches:
                    emb._model.encode_image(b)

        forward_all()  # warm-up (cuDNN/cuBLAS autotune, allocator)
        fwd_ips = n / best_seconds(forward_all, args.repeats, sync)
        # The library's own forward (host pixels -> device, normalise, encode, back to host).
        host = [emb.preprocess_path(p) for p in paths[: args.batch_size]]
        lib_ips = len(host) / best_seconds(
            lambda: emb.forward_preprocessed(host), args.repeats, sync
        )
        batches.clear()  # free device memory before the stage runs

        print(f"raw forward (on-device batches)      {fwd_ips:10.1f} img/s")
        print(f"forward_preprocessed (host pixels)   {lib_ips:10.1f} img/s")
        print(f"decode+preprocess, one thread        {prep_ips:10.1f} img/s")
        ratios = {}
        for w in workers:
            emb.workers = w
            emb.embed_paths(paths[: args.batch_size * 2])  # warm-up
            ips = n / best_seconds(lambda: emb.embed_paths(paths), args.repeats, sync)
            ratios[w] = ips / fwd_ips
            print(
                f"embed stage, {w:2d} decode threads      {ips:10.1f} img/s  "
                f"ratio to raw forward {ratios[w]:.3f}"
            )
        best_w = max(ratios, key=ratios.get)
        print(
            f"RATIO embed stage / raw forward ({device}, {model}, {best_w} threads) = "
            f"{ratios[best_w]:.3f}  "
            + ("(goal >= 0.9)" if cuda else "(CPU smoke run: the goal applies on a GPU)")
        )


if __name__ == "__main__":
    main()

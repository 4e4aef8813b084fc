"""Embed-stage throughput (JPEG decode + preprocess + forward, overlapped) as a ratio to the
raw model forward on ready input tensors, same model, batch size and torch threads.

    python benchmarks/bench_embed.py --model ViT-S-32 --n 256 --threads 2
    python benchmarks/bench_embed.py --model tiny --n 2048
    python benchmarks/bench_embed.py --decode full      # the full-decode path, for comparison

"raw forward" is ``model.encode_image`` alone on batches that are already decoded,
preprocessed, stacked and normalised; "embed" is ``OpenClipEmbedder.embed_paths`` from the
JPEG files. Each repeat times both back to back and the median ratio is printed (the machine
may be shared: the ratio of neighbours in time is steadier than either rate; on a loaded
machine use a small ``--n`` and many ``--repeats``). A ratio near
1.0 means decoding is hidden behind the forward pass. Prints, asserts nothing.

``--content photo`` (default) writes smooth images with texture and mild noise, whose JPEGs
have the size of photographs and endoscopy frames; ``--content noise`` writes pure noise,
the worst case for JPEG decoding (several times larger files).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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


def seconds(fn, cpu: list | None = None) -> float:
    """Wall seconds of ``fn()``; its process CPU seconds (all threads) go to ``cpu``."""
    c, t = time.process_time(), time.perf_counter()
    fn()
    wall = time.perf_counter() - t
    if cpu is not None:
        cpu.append(time.process_time() - c)
    return wall


def write_images(root: Path, n: int, size: int, content: str) -> list[str]:
    rng = np.random.default_rng(0)
    if content == "noise":
        base = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
    else:  # smooth shading, a few soft blobs, fine texture and sensor-like noise
        yy, xx = np.mgrid[:size, :size] / size
        img = np.stack([160 * xx + 60, 120 * yy + 50, 90 * (1 - xx * yy) + 40], -1)
        for _ in range(12):
            cy, cx, r = rng.uniform(0, 1, 3) * (1, 1, 0.25)
            blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r**2 + 1e-3))
            img += blob[..., None] * rng.uniform(-80, 80, 3)
        img += 12 * np.sin(40 * xx + 25 * yy)[..., None] + rng.normal(0, 4, img.shape)
        base = np.clip(img, 0, 255).astype(np.uint8)
    paths = []
    for i in range(n):
        p = root / f"img{i:05d}.jpg"
        Image.fromarray(np.roll(base, i * 7, axis=1)).save(p, quality=90)
        paths.append(str(p))
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="ViT-S-32", help="open_clip model name or 'tiny'")
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--image-size", type=int, default=512, help="size of the JPEGs on disk")
    ap.add_argument("--content", choices=["photo", "noise"], default="photo")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--workers", type=int, default=None, help="decode threads (default auto)")
    ap.add_argument("--decode", choices=["draft", "full"], default="draft")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    import open_clip
    import torch

    from medvqa_build.negatives import embed_with_cache
    from medvqa_build.negatives.open_clip_embedder import OpenClipEmbedder

    torch.set_num_threads(args.threads)
    med = statistics.median
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        model = args.model
        if model == "tiny":
            (tmp_path / "bench-tiny.json").write_text(json.dumps(TINY))
            open_clip.add_model_config(tmp_path / "bench-tiny.json")
            model = "bench-tiny"
        paths = write_images(tmp_path, args.n, args.image_size, args.content)
        kb = np.mean([os.path.getsize(p) for p in paths]) / 1024
        kw = {"batch_size": args.batch_size, "decode": args.decode}
        emb = OpenClipEmbedder(model, None, workers=args.workers, **kw)
        ovl = OpenClipEmbedder(model, None, workers=args.workers, overlap=True, **kw)
        serial = OpenClipEmbedder(model, None, workers=0, **kw)
        n, bs = len(paths), args.batch_size

        # Raw forward: ready input tensors, the image tower alone.
        ready = [
            emb.prepare_batch([emb.preprocess_path(p) for p in paths[s : s + bs]])
            for s in range(0, n, bs)
        ]

        def forward_all():
            with torch.inference_mode():
                for b in ready:
                    emb._model.encode_image(b)

        forward_all()  # warm-up
        emb.embed_paths(paths[:bs])
        serial.embed_paths(paths[:bs])
        ovl.embed_paths(paths[:bs])
        fwd, over, ser, prep, ratios, ovl_ratios = [], [], [], [], [], []
        fwd_cpu, over_cpu, prep_cpu = [], [], []
        for _ in range(args.repeats):
            fwd.append(n / seconds(forward_all, fwd_cpu))
            over.append(n / seconds(lambda: emb.embed_paths(paths), over_cpu))
            ratios.append(over[-1] / fwd[-1])
            ovl_ratios.append(n / seconds(lambda: ovl.embed_paths(paths)) / fwd[-1])
            prep.append(n / seconds(lambda: [emb.preprocess_path(p) for p in paths], prep_cpu))
        ser.append(n / seconds(lambda: serial.embed_paths(paths)))  # once: a reference
        cache = tmp_path / "cache"
        embed_with_cache(emb, paths, cache, progress=False)
        cached = n / seconds(lambda: embed_with_cache(emb, paths, cache, progress=False))

    print(
        f"model {args.model}  n {n}  batch {bs}  threads {args.threads}  decode threads "
        f"{emb.workers}  jpeg {args.image_size}px {args.content} ({kb:.0f} KiB)  "
        f"decode {emb.decode}  medians of {args.repeats}"
    )
    print(
        f"raw forward           {med(fwd):9.1f} img/s  (encode_image on ready tensors; "
        f"{1e3 * med(fwd_cpu) / n:.1f} CPU ms/img)"
    )
    print(
        f"decode+preprocess     {med(prep):9.1f} img/s  (one thread; "
        f"{1e3 * med(prep_cpu) / n:.1f} CPU ms/img)"
    )
    print(
        f"embed, serial         {ser[0]:9.1f} img/s  ratio to forward {ser[0] / med(fwd):.2f}"
        " (once)"
    )
    mode = "overlapped" if emb.overlap else "alternating"
    print(
        f"embed ({mode}, default) {med(over):7.1f} img/s  ratio to forward {med(ratios):.2f} "
        f"(per repeat: {', '.join(f'{r:.2f}' for r in ratios)})"
    )
    if not emb.overlap:
        print(
            f"embed (overlapped, {ovl.workers} thr)          ratio to forward "
            f"{med(ovl_ratios):.2f} (per repeat: {', '.join(f'{r:.2f}' for r in ovl_ratios)})"
        )
    print(
        f"CPU-time ratio        {med(fwd_cpu) / med(over_cpu):9.2f}  (forward CPU s / embed CPU "
        "s, default mode; on a loaded machine spinning torch threads inflate both)"
    )
    print(f"embed, cache hit      {cached:9.1f} img/s  (hash + read)")
    print(
        f"RATIO embed stage / raw forward (CPU, {args.model}, {args.threads} threads) = "
        f"{med(ratios):.3f}  (goal >= 0.9)"
    )


if __name__ == "__main__":
    main()

"""``synthetic-endo``: a deterministic, endoscopy-looking dataset written in a realistic layout.

It is what the demo and most tests run on, so the lesion classes differ visibly and
consistently (colour, size, shape, texture), some pairs are closer than others (polyp vs
angiectasia are both red and round; ulcer is white-centred; bleeding is a dark pool), and the
layout is the one real datasets use: an image folder, a CSV of labels with patient ids and an
official split (Kvasir/GastroVision style), binary masks with the same stem (Kvasir-SEG style),
and surgical videos as frame folders with Cholec80-style phase and tool tables.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import cv2
import numpy as np

FINDINGS = ("Polyp", "Ulcer", "Bleeding", "Angiectasia", "Normal mucosa")
PHASES = ("Preparation", "CalotTriangleDissection", "ClippingCutting", "GallbladderDissection")
TOOLS = ("Grasper", "Hook", "Clipper", "Irrigator")
# Which tools each phase uses (first is always present), so tools and phases correlate as in
# surgery.
PHASE_TOOLS = {
    "Preparation": ("Grasper",),
    "CalotTriangleDissection": ("Hook", "Grasper"),
    "ClippingCutting": ("Clipper", "Grasper"),
    "GallbladderDissection": ("Hook", "Irrigator"),
}
SIZES_WH = ((384, 320), (352, 352), (416, 336))
FRAME_STEP = 25  # Cholec80 annotates phases at 25 fps; frames here are taken once a second


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng([seed, *key])


def _smooth_noise(rng, h, w, cells, amp) -> np.ndarray:
    small = rng.normal(0.0, 1.0, (cells, cells)).astype(np.float32)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC) * amp


def _vignette(h, w, strength=0.65) -> tuple[np.ndarray, np.ndarray]:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    r = np.hypot((xx - w / 2) / (w / 2), (yy - h / 2) / (h / 2))
    shade = np.clip(1.0 - strength * r**2, 0.0, 1.0)
    fov = (r <= 1.08).astype(np.float32)  # circular field of view, black corners
    fov = cv2.GaussianBlur(fov, (0, 0), 2.0)
    return shade, fov


def _mucosa(rng, h, w) -> np.ndarray:
    """Pink-orange mucosa with folds, vessels and specular highlights (float RGB 0-255)."""
    base = np.array([rng.uniform(185, 215), rng.uniform(92, 118), rng.uniform(82, 104)], np.float32)
    img = np.ones((h, w, 3), np.float32) * base
    img *= 1.0 + _smooth_noise(rng, h, w, 6, 0.10)[..., None]
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    theta = rng.uniform(0, np.pi)
    coord = xx * np.cos(theta) + yy * np.sin(theta)
    folds = 0.5 + 0.5 * np.sin(coord / rng.uniform(18, 30) + rng.uniform(0, 6))
    img *= (1.0 - 0.16 * folds**4)[..., None]
    vessels = np.zeros((h, w), np.uint8)
    for _ in range(int(rng.integers(4, 9))):
        pts = [rng.uniform([0, 0], [w, h])]
        for _ in range(12):
            pts.append(pts[-1] + rng.normal(0, 9, 2))
        cv2.polylines(vessels, [np.int32(pts)], False, 255, int(rng.integers(1, 3)), cv2.LINE_AA)
    v = cv2.GaussianBlur(vessels, (0, 0), 0.8).astype(np.float32) / 255.0
    img = (
        img * (1 - 0.35 * v[..., None]) + np.array([150, 40, 55], np.float32) * 0.35 * v[..., None]
    )
    return img


def _highlights(rng, img, n) -> None:
    h, w = img.shape[:2]
    spec = np.zeros((h, w), np.float32)
    for _ in range(n):
        c = (int(rng.uniform(0, w)), int(rng.uniform(0, h)))
        axes = (int(rng.integers(2, 7)), int(rng.integers(1, 4)))
        cv2.ellipse(spec, c, axes, float(rng.uniform(0, 180)), 0, 360, 1.0, -1)
    spec = cv2.GaussianBlur(spec, (0, 0), 1.2)
    img += (255 - img) * np.clip(spec, 0, 1)[..., None]


def _blob_polygon(rng, cx, cy, r, irregularity) -> np.ndarray:
    angles = np.linspace(0, 2 * np.pi, 24, endpoint=False)
    radii = r * (1 + irregularity * _circular_noise(rng, 24))
    return np.int32(np.stack([cx + radii * np.cos(angles), cy + radii * np.sin(angles)], 1))


def _circular_noise(rng, n) -> np.ndarray:
    coeffs = rng.normal(0, 1, 4) / np.arange(1, 5)
    phases = rng.uniform(0, 2 * np.pi, 4)
    t = np.linspace(0, 2 * np.pi, n, endpoint=False)
    noise = sum(
        c * np.sin((k + 2) * t + p) for k, (c, p) in enumerate(zip(coeffs, phases, strict=True))
    )
    return noise / (np.abs(noise).max() + 1e-6) * 0.5


def _paint(img, mask, color, alpha=1.0) -> None:
    m = mask.astype(np.float32)[..., None] * alpha
    img *= 1 - m
    img += m * np.asarray(color, np.float32)


def _polyp(rng, img, cx, cy, r) -> np.ndarray:
    """Raised, paler dome with a shaded rim and a highlight on top."""
    h, w = img.shape[:2]
    mask = np.zeros((h, w), np.uint8)
    cv2.ellipse(
        mask,
        (cx, cy),
        (r, int(r * rng.uniform(0.75, 1.0))),
        float(rng.uniform(0, 180)),
        0,
        360,
        1,
        -1,
    )
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    d = np.clip(np.hypot(xx - cx + 0.3 * r, yy - cy + 0.3 * r) / (1.3 * r), 0, 1)
    dome = (0.70 + 0.45 * (1 - d**2))[..., None]
    color = np.array([236, 138, 126], np.float32) * dome
    pits = 1 + _smooth_noise(rng, h, w, max(8, w // 10), 0.05)[..., None]
    m = cv2.GaussianBlur(mask.astype(np.float32), (0, 0), 1.5)[..., None]
    img[:] = img * (1 - m) + color * pits * m
    _highlights(rng, img[max(0, cy - r) : cy, max(0, cx - r) : cx + r], 2)
    return mask.astype(bool)


def _ulcer(rng, img, cx, cy, r) -> np.ndarray:
    """White-yellow fibrin base inside an inflamed red rim."""
    h, w = img.shape[:2]
    outer = np.zeros((h, w), np.uint8)
    cv2.fillPoly(outer, [_blob_polygon(rng, cx, cy, r, 0.35)], 1)
    inner = cv2.erode(outer, np.ones((3, 3), np.uint8), iterations=max(2, r // 5))
    rim = cv2.GaussianBlur((outer - inner).astype(np.float32), (0, 0), 1.5)
    _paint(img, rim, (205, 45, 45), 0.9)
    fibrin = (230 + _smooth_noise(rng, h, w, 12, 10))[..., None] * np.array([1.0, 0.96, 0.74])
    m = cv2.GaussianBlur(inner.astype(np.float32), (0, 0), 1.0)[..., None]
    img[:] = img * (1 - m) + fibrin * m
    return outer.astype(bool)


def _bleeding(rng, img, cx, cy, r) -> np.ndarray:
    """Large, dark-red irregular pool with glossy streaks."""
    h, w = img.shape[:2]
    mask = np.zeros((h, w), np.uint8)
    cv2.fillPoly(mask, [_blob_polygon(rng, cx, cy, int(r * 1.3), 0.6)], 1)
    soft = cv2.GaussianBlur(mask.astype(np.float32), (0, 0), 2.5)
    blood = np.array([105, 8, 14], np.float32) * (1 + _smooth_noise(rng, h, w, 10, 0.15))[..., None]
    img[:] = img * (1 - soft[..., None]) + blood * soft[..., None]
    _highlights(rng, img, 3)
    return mask.astype(bool)


def _angiectasia(rng, img, cx, cy, r) -> np.ndarray:
    """Small cherry-red spot with radiating fine vessels (a 'spider')."""
    h, w = img.shape[:2]
    r = max(5, r // 2)
    mask = np.zeros((h, w), np.uint8)
    cv2.circle(mask, (cx, cy), r, 1, -1)
    for a in rng.uniform(0, 2 * np.pi, int(rng.integers(6, 11))):
        end = (int(cx + 2.2 * r * np.cos(a)), int(cy + 2.2 * r * np.sin(a)))
        cv2.line(mask, (cx, cy), end, 1, 2, cv2.LINE_AA)
    soft = cv2.GaussianBlur(mask.astype(np.float32), (0, 0), 0.8)
    _paint(img, soft, (238, 38, 48), 0.95)
    return mask.astype(bool)


DRAW = {"Polyp": _polyp, "Ulcer": _ulcer, "Bleeding": _bleeding, "Angiectasia": _angiectasia}


def render_still(seed: int, index: int, finding: str) -> tuple[np.ndarray, np.ndarray]:
    """One endoscopy still (RGB uint8) and its lesion mask (bool, empty for normal mucosa)."""
    rng = _rng(seed, 1, index)
    w, h = SIZES_WH[int(rng.integers(len(SIZES_WH)))]
    img = _mucosa(rng, h, w)
    _highlights(rng, img, int(rng.integers(3, 8)))
    mask = np.zeros((h, w), bool)
    if finding in DRAW:
        n = 1 if rng.random() < 0.7 else 2
        for k in range(n):
            r = int(min(h, w) * rng.uniform(0.10, 0.16))
            for _ in range(20):  # keep lesions apart so each is its own region
                cx, cy = (int(v) for v in rng.uniform([0.25 * w, 0.25 * h], [0.75 * w, 0.75 * h]))
                probe = np.zeros_like(mask)
                cv2.circle(probe.view(np.uint8), (cx, cy), int(2.2 * r), 1, -1)
                if k == 0 or not (probe & mask).any():
                    break
            mask |= DRAW[finding](rng, img, cx, cy, r)
    shade, fov = _vignette(h, w)
    img = img * (shade * fov)[..., None] + rng.normal(0, 2.5, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8), mask


def _instrument(rng, img, tool: str) -> None:
    """A grey metallic shaft entering from the border, with a tool-specific tip."""
    h, w = img.shape[:2]
    side = int(rng.integers(3))
    start = [
        (0, rng.uniform(0.2, 0.8) * h),
        (w, rng.uniform(0.2, 0.8) * h),
        (rng.uniform(0.2, 0.8) * w, h),
    ][side]
    tip = np.array([rng.uniform(0.35, 0.65) * w, rng.uniform(0.35, 0.65) * h])
    start = np.array(start)
    direction = (tip - start) / np.linalg.norm(tip - start)
    normal = np.array([-direction[1], direction[0]])
    half = 0.035 * min(h, w)
    shaft = np.int32(
        [start + normal * half, tip + normal * half, tip - normal * half, start - normal * half]
    )
    layer = np.zeros((h, w), np.uint8)
    cv2.fillPoly(layer, [shaft], 1)
    jaw = 2.4 * half
    if tool == "Grasper":
        for s in (1, -1):
            cv2.line(
                layer,
                tuple(np.int32(tip)),
                tuple(np.int32(tip + direction * jaw + s * normal * jaw * 0.5)),
                1,
                4,
            )
    elif tool == "Hook":
        bend = tip + direction * jaw
        cv2.line(layer, tuple(np.int32(tip)), tuple(np.int32(bend)), 1, 3)
        cv2.line(layer, tuple(np.int32(bend)), tuple(np.int32(bend + normal * jaw * 0.6)), 1, 3)
    elif tool == "Clipper":
        cv2.fillPoly(
            layer,
            [
                np.int32(
                    [
                        tip + normal * half * 1.6,
                        tip + direction * jaw + normal * half * 0.6,
                        tip + direction * jaw - normal * half * 0.6,
                        tip - normal * half * 1.6,
                    ]
                )
            ],
            1,
        )
    else:  # Irrigator: a plain tube with a dark opening
        cv2.circle(layer, tuple(np.int32(tip)), int(half), 1, -1)
    metal = (
        np.array([150, 152, 158], np.float32) * (1 + _smooth_noise(rng, h, w, 4, 0.12))[..., None]
    )
    soft = cv2.GaussianBlur(layer.astype(np.float32), (0, 0), 0.8)[..., None]
    img[:] = img * (1 - soft) + metal * soft
    if tool == "Irrigator":
        cv2.circle(img, tuple(np.int32(tip)), max(2, int(half * 0.45)), (30, 30, 30), -1)


def render_frame(seed: int, video: int, frame_no: int, tools: tuple[str, ...]) -> np.ndarray:
    """One laparoscopic frame: yellowish tissue with the given instruments."""
    rng = _rng(seed, 2, video, frame_no)
    w, h = 416, 336
    tissue = np.array([206, 150, 112], np.float32)
    img = np.ones((h, w, 3), np.float32) * tissue
    img *= 1 + _smooth_noise(_rng(seed, 3, video), h, w, 5, 0.14)[..., None]
    img *= 1 + _smooth_noise(rng, h, w, 9, 0.04)[..., None]
    for tool in tools:
        _instrument(rng, img, tool)
    _highlights(rng, img, 4)
    shade, fov = _vignette(h, w, 0.5)
    img = img * shade[..., None] + rng.normal(0, 2.0, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def _write_jpeg(path: Path, rgb: np.ndarray, quality: int = 92) -> None:
    ok, buf = cv2.imencode(
        ".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality]
    )
    if not ok:
        raise OSError(f"cannot encode {path}")
    path.write_bytes(buf.tobytes())


def _write_png(path: Path, array: np.ndarray) -> None:
    ok, buf = cv2.imencode(".png", array)
    if not ok:
        raise OSError(f"cannot encode {path}")
    path.write_bytes(buf.tobytes())


def write_synthetic_endo(
    root: str | os.PathLike,
    *,
    n_images: int = 120,
    n_videos: int = 2,
    frames_per_video: int = 24,
    n_corrupt: int = 0,
    seed: int = 0,
) -> Path:
    """Write the dataset under ``root`` (created) and return it. Same arguments, same bytes.

    ``n_corrupt`` truncates that many still images, as a broken download would, so the
    quarantine path can be seen working.
    """
    root = Path(root)
    for sub in ("images", "masks", "videos", "phase_annotations", "tool_annotations"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n_images):
        finding = FINDINGS[i % len(FINDINGS)]
        stem = f"img_{i:05d}"
        image, mask = render_still(seed, i, finding)
        _write_jpeg(root / "images" / f"{stem}.jpg", image)
        if mask.any():
            _write_png(root / "masks" / f"{stem}.png", mask.astype(np.uint8) * 255)
        patient = f"P{i // 3:04d}"
        split = "test" if (i // 3) % 5 == 0 else "train"
        rows.append({"image": stem, "finding": finding, "patient_id": patient, "split": split})
    for i in range(min(n_corrupt, n_images)):
        victim = root / "images" / f"img_{(i * 7 + 3) % n_images:05d}.jpg"
        data = victim.read_bytes()
        victim.write_bytes(data[: len(data) // 3])
    with open(root / "labels.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["image", "finding", "patient_id", "split"])
        writer.writeheader()
        writer.writerows(rows)
    for v in range(1, n_videos + 1):
        video = f"video{v:02d}"
        (root / "videos" / video).mkdir(parents=True, exist_ok=True)
        phase_lines, tool_lines = ["Frame\tPhase"], ["Frame\t" + "\t".join(TOOLS)]
        for k in range(frames_per_video):
            frame_no = k * FRAME_STEP
            phase = PHASES[min(len(PHASES) - 1, k * len(PHASES) // max(1, frames_per_video))]
            rng = _rng(seed, 4, v, k)
            tools = tuple(
                t for j, t in enumerate(PHASE_TOOLS[phase]) if j == 0 or rng.random() < 0.5
            )
            _write_jpeg(
                root / "videos" / video / f"{video}_{frame_no:06d}.jpg",
                render_frame(seed, v, frame_no, tools),
            )
            phase_lines.append(f"{frame_no}\t{phase}")
            tool_lines.append(
                f"{frame_no}\t" + "\t".join("1" if t in tools else "0" for t in TOOLS)
            )
        (root / "phase_annotations" / f"{video}-phase.txt").write_text(
            "\n".join(phase_lines) + "\n"
        )
        (root / "tool_annotations" / f"{video}-tool.txt").write_text("\n".join(tool_lines) + "\n")
    (root / "README.txt").write_text(
        "synthetic-endo: generated by medvqa_build (synthetic pixels, no patient data).\n"
        "images/*.jpg + labels.csv (image,finding,patient_id,split) + masks/*.png (same stem,\n"
        "0/255) + videos/<video>/<video>_<frame>.jpg with Cholec80-style phase/tool tables.\n"
    )
    return root

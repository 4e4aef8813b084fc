"""Issue 33, point 1: decoding runs under a per-worker memory budget. Each convert worker
(a pool process, or the CLI's own process with one worker) may allocate at most
``max_worker_bytes`` above what it held when its shard began (``RLIMIT_DATA``), and every
decode is accounted first (shape x item size against ``max_decode_bytes`` and the budget).
A file past either is one quarantine entry naming the limit and how to raise it; the rest
converts. Every case runs the CLI under the hostile corpus's ceilings (:mod:`.bounded_cli`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from .bounded_cli import bounded_cli
from .test_declared_sizes import converted, kvasir_polyps


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_read_past_the_worker_budget_is_quarantined_and_the_rest_converts(tmp_path, workers):
    """A YOLO box file of 60 MB of valid lines (3 million boxes for one image) is nothing a
    header declares, so only the budget stops it: without one it took 5.7 GB and 210 s and
    ended in a pyarrow allocation failure; under max_worker_bytes=3e8 that image is
    quarantined naming the budget, in the pool (--workers 2) and in-process alike. (The box
    count limit, max_boxes_per_image, would refuse it first: it is raised out of the way, so
    the budget is what stops the read; tests/hardening/test_box_counts.py tests that limit.)"""
    from ..fixtures.sources import wcebleedgen

    root = wcebleedgen.write(tmp_path / "wce")
    box_file = sorted(root.rglob("YOLO_TXT/*.txt"))[0]
    line = box_file.read_text().splitlines()[0] + "\n"
    box_file.write_bytes(line.encode() * (60_000_000 // len(line)))
    out = tmp_path / "s.parquet"
    env = {"MEDVQA_LIMITS": "max_worker_bytes=3e8,max_boxes_per_image=1e8"}
    proc = bounded_cli(
        "convert", "wcebleedgen", root, "-o", out, "-q", "--workers", workers, env=env
    )
    assert proc.returncode == 0, proc.stderr
    counts, (entry,) = converted(out)
    assert counts["converted"] > 0
    assert entry["file"].endswith(box_file.stem + ".png")
    assert "ran out of memory reading it" in entry["reason"]
    assert "max_worker_bytes of 300,000,000 bytes" in entry["reason"]
    assert "MEDVQA_LIMITS=max_worker_bytes=" in entry["reason"]


def test_inspect_reads_under_the_worker_budget(tmp_path):
    """``inspect`` reads its first files as convert does, under the same budget: the 60 MB box
    file (its count limit raised out of the way) is one problem naming max_worker_bytes, the
    others are read, exit 0; without the budget it ran past the 120 s ceiling."""
    from ..fixtures.sources import wcebleedgen

    root = wcebleedgen.write(tmp_path / "wce")
    box_file = sorted(root.rglob("YOLO_TXT/*.txt"))[0]
    line = box_file.read_text().splitlines()[0] + "\n"
    box_file.write_bytes(line.encode() * (60_000_000 // len(line)))
    env = {"MEDVQA_LIMITS": "max_worker_bytes=3e8,max_boxes_per_image=1e8"}
    proc = bounded_cli("inspect", "wcebleedgen", root, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    parts = json.loads(proc.stdout)["parts"]
    problems = [p for part in parts for p in part["problems"]]
    (problem,) = [p for p in problems if p["file"].endswith(box_file.stem + ".png")]
    assert "ran out of memory reading it" in problem["reason"]
    assert "max_worker_bytes of 300,000,000 bytes" in problem["reason"]
    assert sum(part["converted"] for part in parts) > 0


def test_an_image_whose_decode_is_over_the_worker_budget_is_quarantined_from_its_header(
    tmp_path,
):
    """An 8000x8000 JPEG (384 MB to decode, under max_decode_bytes) with the budget at 3e8:
    refused from its header by the accounting, before anything is decoded."""
    import cv2

    polyps = kvasir_polyps(tmp_path / "kvasir")
    ok, data = cv2.imencode(".jpg", np.zeros((8000, 8000, 3), np.uint8))
    assert ok
    (polyps / "big.jpg").write_bytes(data.tobytes())
    out = tmp_path / "s.parquet"
    env = {"MEDVQA_LIMITS": "max_worker_bytes=3e8"}
    proc = bounded_cli("convert", "kvasir", tmp_path / "kvasir", "-o", out, "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    counts, (entry,) = converted(out)
    assert (counts["converted"], counts["quarantined"]) == (3, 1)
    assert entry["file"] == "kvasir-dataset-v2/polyps/big.jpg"
    assert "decoding 8000x8000 pixels needs about 384,000,000 bytes at once" in entry["reason"]
    assert "max_worker_bytes of 300,000,000; raise it" in entry["reason"]
    # the same file converts under the default budget
    proc = bounded_cli("convert", "kvasir", tmp_path / "kvasir", "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    assert converted(out)[0]["quarantined"] == 0


def _msd_with_float64_case(root: Path) -> Path:
    """The MSD replica whose liver_0 image is stored as float64 (as some resampled CTs are)."""
    import nibabel as nib

    from ..fixtures.sources.msd import TASK
    from ..fixtures.sources.msd import write as write_msd

    write_msd(root)
    image = root / TASK / "imagesTr" / "liver_0.nii.gz"
    img = nib.load(image)
    stored = np.asarray(img.dataobj).astype(np.float64)
    nib.Nifti1Image(stored, img.affine).to_filename(str(image))
    assert nib.load(image).get_data_dtype() == np.float64
    return root


@pytest.mark.parametrize(
    "limit, quarantined", [(80_000, False), (50_000, True)], ids=["float32-fits", "over"]
)
def test_a_float64_ct_is_read_as_float32_against_max_decode_bytes(tmp_path, limit, quarantined):
    """A float64 volume of 40x36x10 voxels is 115,200 bytes as nibabel reads it, 57,600 as
    float32, which is how it is read: under max_decode_bytes=80,000 it converts like the
    int16 original, under 50,000 its case is quarantined naming the limit and the dtype."""
    root = _msd_with_float64_case(tmp_path / "msd")
    out = tmp_path / "s.parquet"
    env = {"MEDVQA_LIMITS": f"max_decode_bytes={limit}"}
    proc = bounded_cli("convert", "msd", root, "-o", out, "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    counts, entries = converted(out)
    mine = [e for e in entries if "liver_0" in e["file"]]
    assert counts["converted"] > 0
    if not quarantined:
        assert mine == []
        reference = tmp_path / "ref.parquet"
        from ..fixtures.sources.msd import write as write_msd

        write_msd(tmp_path / "ref")
        proc = bounded_cli("convert", "msd", tmp_path / "ref", "-o", reference, "-q")
        assert proc.returncode == 0, proc.stderr
        assert counts == json.loads(reference.with_name("ref.counts.json").read_text()) | {
            "root": counts["root"]
        }
    else:
        (entry,) = mine
        assert (
            "reading volume liver_0.nii.gz (40x36x10 as float32) needs about 57,600"
            in (entry["reason"])
        )
        assert "over the max_decode_bytes limit of 50,000" in entry["reason"]


def test_a_scaled_ct_whose_read_is_over_the_worker_budget_is_quarantined_from_its_header(
    tmp_path,
):
    """A 512x512x120 int16 CT with slope 1 and intercept -1024 (as most CTs are stored) is
    126 MB as float32, under max_decode_bytes, but its read holds the stored voxels (63 MB),
    that array and the scaling's temporaries at once (256 MB): under max_worker_bytes=2e8 the
    case is quarantined from its header naming the budget, and the others convert; under the
    default budget it converts."""
    import nibabel as nib

    from ..fixtures.sources.msd import TASK
    from ..fixtures.sources.msd import write as write_msd

    root = tmp_path / "msd"
    write_msd(root)
    task = root / TASK
    shape = (512, 512, 120)
    image = nib.Nifti1Image(np.zeros(shape, np.int16), np.eye(4))
    image.header.set_slope_inter(1.0, -1024.0)
    image.to_filename(str(task / "imagesTr" / "liver_7.nii.gz"))
    label = np.zeros(shape, np.uint8)
    label[200:260, 200:260, 50:70] = 1
    nib.Nifti1Image(label, np.eye(4)).to_filename(str(task / "labelsTr" / "liver_7.nii.gz"))
    meta = json.loads((task / "dataset.json").read_text())
    meta["training"].append(
        {"image": "./imagesTr/liver_7.nii.gz", "label": "./labelsTr/liver_7.nii.gz"}
    )
    (task / "dataset.json").write_text(json.dumps(meta))
    out = tmp_path / "s.parquet"
    env = {"MEDVQA_LIMITS": "max_worker_bytes=2e8"}
    proc = bounded_cli("convert", "msd", root, "-o", out, "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    counts, entries = converted(out)
    (entry,) = [e for e in entries if "liver_7" in e["file"]]
    assert "reading volume liver_7.nii.gz (512x512x120 as float32) needs about" in entry["reason"]
    assert (
        "bytes at once, over the worker memory budget max_worker_bytes of 200,000,000"
        in (entry["reason"])
    )
    assert counts["converted"] > 0
    proc = bounded_cli("convert", "msd", root, "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    counts, entries = converted(out)
    assert [e for e in entries if "liver_7" in e["file"]] == []


def test_a_dicom_whose_decode_peak_is_over_the_worker_budget_is_quarantined_from_its_header(
    tmp_path,
):
    """A DICOM whose header says 8000x8000 at 16 bits: 128 MB decoded (under
    max_decode_bytes), but with one frame's float temporaries and its RGB about 1.4 GB at
    once; under max_worker_bytes=3e8 it is refused from its header naming the budget (before
    the pixel-data length check: the file holds the replica's few pixels), the others
    convert."""
    import pydicom

    from ..fixtures.sources import vindr_spinexr

    root = vindr_spinexr.write(tmp_path / "vindr")
    first = sorted((root / "train_images").glob("*.dicom"))[0]
    ds = pydicom.dcmread(first)
    ds.Rows, ds.Columns, ds.BitsAllocated, ds.BitsStored, ds.HighBit = 8000, 8000, 16, 12, 11
    ds.save_as(first)
    out = tmp_path / "s.parquet"
    env = {"MEDVQA_LIMITS": "max_worker_bytes=3e8"}
    proc = bounded_cli("convert", "vindr-spinexr", root, "-o", out, "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    counts, entries = converted(out)
    (entry,) = [e for e in entries if e["file"].endswith(first.name)]
    what = "decoding 1 frame(s) of 8000x8000x1 at 16 bits"
    assert f"{what} needs about 1,344,000,000 bytes at once" in entry["reason"]
    assert "over the worker memory budget max_worker_bytes of 300,000,000" in entry["reason"]
    assert counts["converted"] > 0


def _kvasir_recipe(tmp_path: Path, root: Path) -> Path:
    """A recipe of one image-level task over every image of a Kvasir replica."""
    import yaml

    recipe = {
        "name": "budget",
        "benchmark": "Budget",
        "seed": 0,
        "sources": [{"id": "kvasir", "root": str(root)}],
        "tasks": [
            {
                "name": "lesion",
                "generator": "image_classification",
                "category": "Lesion Analysis and Grading",
                "task": "Lesion Type Identification",
                "quota": 100,
                "n_options": 4,
                "negatives": {"strategy": "label_pool"},
                "prompt_level": "image",
            }
        ],
        "export": {"formats": ["hf"]},
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def test_a_render_decode_past_the_worker_budget_quarantines_its_item(tmp_path):
    """A 6000x6000 JPEG (108 MB decoded) builds under the default budget (within the 1 GiB
    ceiling: the card's gallery drew it at 1.9 GB before it was shrunk first); rendered again
    with render.max_side (so it is decoded to be scaled) under max_worker_bytes=5e7, its
    decode runs out of the render chunk's budget (RLIMIT_DATA; convert's header accounting
    is not asked again: the samples are reused) and quarantines that item naming the budget,
    and the other items render: no MemoryError traceback, exit 0."""
    import cv2

    from ..fixtures.sources import kvasir

    root = kvasir.write(tmp_path / "kvasir")
    ok, data = cv2.imencode(".jpg", np.zeros((6000, 6000, 3), np.uint8))
    assert ok
    big = root / "kvasir-dataset-v2" / "polyps" / "big.jpg"
    big.write_bytes(data.tobytes())
    recipe = _kvasir_recipe(tmp_path, root)
    out = tmp_path / "build"
    proc = bounded_cli("run", recipe, "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    first = json.loads((out / "quarantine.json").read_text())
    assert [e for e in first if e["file"].endswith("big.jpg")] == []
    env = {"MEDVQA_LIMITS": "max_worker_bytes=5e7"}
    proc = bounded_cli("run", recipe, "-o", out, "-q", "--set", "render.max_side=512", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    entries = json.loads((out / "quarantine.json").read_text())
    (entry,) = [e for e in entries if e.get("stage") == "render"]
    assert entry["file"].endswith("polyps/big.jpg")
    assert "ran out of memory rendering it" in entry["reason"]
    assert "max_worker_bytes of 50,000,000 bytes" in entry["reason"]
    build = json.loads((out / "build.json").read_text())
    assert len(build["stages"]["convert"]) == 1  # the samples of the first run, reused
    stats = json.loads((out / build["render_dir"] / "_SUCCESS.json").read_text())["stats"]
    assert stats["quarantined"] == 1
    assert stats["items"] >= 15  # the other items rendered


def test_an_embed_decode_past_the_worker_budget_quarantines_its_sample(tmp_path):
    """A 3000x3000 PNG (54 MB by the decode accounting) converts under the default budget;
    a task with visual negatives then embeds under max_worker_bytes=5e7: the embedder's
    decode is refused from the header naming the budget, that sample is quarantined by the
    embed stage and the build goes on (exit 0, no traceback)."""
    import cv2
    import yaml

    from ..fixtures.sources import kvasir

    root = kvasir.write(tmp_path / "kvasir")
    ok, data = cv2.imencode(".png", np.zeros((3000, 3000, 3), np.uint8))
    assert ok
    (root / "kvasir-dataset-v2" / "polyps" / "big.png").write_bytes(data.tobytes())
    recipe = _kvasir_recipe(tmp_path, root)
    out = tmp_path / "build"
    proc = bounded_cli("run", recipe, "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    spec = yaml.safe_load(recipe.read_text())
    spec["embedder"] = "offline"
    spec["tasks"][0]["negatives"] = {"strategy": "visual_class"}
    recipe.write_text(yaml.safe_dump(spec))
    env = {"MEDVQA_LIMITS": "max_worker_bytes=5e7"}
    proc = bounded_cli("run", recipe, "-o", out, "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    entries = json.loads((out / "quarantine.json").read_text())
    (entry,) = [e for e in entries if e.get("stage") == "embed"]
    assert entry["file"].endswith("polyps/big.png")
    assert "decoding 3000x3000 pixels needs about 54,000,000 bytes at once" in entry["reason"]
    assert "max_worker_bytes of 50,000,000" in entry["reason"]
    build = json.loads((out / "build.json").read_text())
    assert len(build["stages"]["convert"]) == 1  # the samples of the first run, reused

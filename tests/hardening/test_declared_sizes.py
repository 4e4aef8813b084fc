"""Issue 33, inputs: names that are bytes, headers and tables that lie about their size,
reasons that say what happened. Every case runs the CLI as a subprocess under a memory and a
time ceiling (:mod:`.bounded_cli`): a damaged file is one quarantine entry and the rest
converts, a damaged part is one error line, never a traceback or a ``MemoryError``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import medvqa_build as mb

from .bounded_cli import bounded_cli


def converted(out: Path) -> tuple[dict, list[dict]]:
    """The counts and quarantine entries of ``convert -o out``."""
    counts = json.loads(out.with_name(out.stem + ".counts.json").read_text("utf-8"))
    entries = json.loads(out.with_name(out.stem + ".quarantine.json").read_text("utf-8"))
    assert counts["found"] == counts["converted"] + counts["quarantined"]
    return counts, entries


def kvasir_polyps(root: Path, n: int = 3) -> Path:
    """``n`` good JPEGs in a Kvasir class folder; returns the folder."""
    polyps = root / "kvasir-dataset-v2" / "polyps"
    polyps.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for k in range(n):
        pixels = rng.integers(0, 255, (40 + k, 50, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(polyps / f"good{k}.jpg", quality=90)
    return polyps


def test_a_file_name_that_is_not_utf8_is_quarantined_escaped(tmp_path):
    polyps = kvasir_polyps(tmp_path / "kvasir")
    bad = os.fsencode(polyps) + b"/bad\xff\xfe.jpg"
    with open(bad, "wb") as handle:
        handle.write((polyps / "good0.jpg").read_bytes())
    out = tmp_path / "samples.parquet"
    proc = bounded_cli("convert", "kvasir", tmp_path / "kvasir", "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    counts, (entry,) = converted(out)
    assert (counts["converted"], counts["quarantined"]) == (3, 1)
    assert entry["file"] == "kvasir-dataset-v2/polyps/bad\\xff\\xfe.jpg"
    assert "not valid UTF-8" in entry["reason"]
    looked = bounded_cli("inspect", "kvasir", tmp_path / "kvasir")  # the same scan, the same word
    assert looked.returncode == 0 and "3 convert, 1 quarantined" in looked.stdout
    assert "problem: kvasir-dataset-v2/polyps/bad\\xff\\xfe.jpg: file name is not valid" in (
        looked.stdout
    )


# -- NIfTI headers that lie about their size -----------------------------------------------------


def lying_nifti(path: Path, dims: tuple[int, ...], dtype=np.int16) -> Path:
    """A small gzipped NIfTI-1 whose header claims ``dims`` (its data holds 8 voxels)."""
    import gzip

    import nibabel as nib

    img = nib.Nifti1Image(np.zeros((2, 2, 2), dtype), np.eye(4))
    raw = bytearray(img.header.binaryblock + b"\x00" * 4 + np.zeros(8, dtype).tobytes())
    # dim[0..7] are int16 at byte 40 of the header (NIfTI-1)
    header_dims = (len(dims), *dims) + (1,) * (7 - len(dims))
    raw[40:56] = np.array(header_dims, "<i2").tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(bytes(raw) + b"\x00" * 4096))
    return path


def msd_with_lying_case(root: Path, dims: tuple[int, ...]) -> Path:
    from ..fixtures.sources.msd import TASK
    from ..fixtures.sources.msd import write as write_msd

    write_msd(root)
    task = root / TASK
    meta = json.loads((task / "dataset.json").read_text())
    for folder in ("imagesTr", "labelsTr"):
        lying_nifti(task / folder / "liver_5.nii.gz", dims)
    meta["training"].append(
        {"image": "./imagesTr/liver_5.nii.gz", "label": "./labelsTr/liver_5.nii.gz"}
    )
    (task / "dataset.json").write_text(json.dumps(meta))
    return root


@pytest.mark.parametrize(
    "dims, limits, words",
    [
        ((1300, 1300, 1300), "", ["= 2,197,000,000 voxels", "max_voxels limit of 1,000,000,000"]),
        ((32767, 32767, 32767), "", ["max_voxels"]),
        ((900, 900, 900), "", ["declares 729,000,000 voxels", "but the file is", "gzip"]),
        ((1300, 1300, 1300), "max_voxels=4e9", ["declares 2,197,000,000 voxels", "the file is"]),
    ],
)
def test_a_nifti_header_that_lies_about_its_size_is_one_quarantine_entry(
    tmp_path, dims, limits, words
):
    """Each limit is checked on the header, before a voxel is allocated; raising max_voxels
    (MEDVQA_LIMITS) still leaves the check against the file's real size."""
    root = msd_with_lying_case(tmp_path / "msd", dims)
    out = tmp_path / "samples.parquet"
    proc = bounded_cli("convert", "msd", root, "-o", out, "-q", env={"MEDVQA_LIMITS": limits})
    assert proc.returncode == 0, proc.stderr
    counts, entries = converted(out)
    assert counts["converted"] > 0  # the good cases still convert
    (entry,) = [e for e in entries if "liver_5" in e["file"]]
    assert entry["file"].endswith("imagesTr/liver_5.nii.gz")
    for word in words:
        assert word in entry["reason"], entry["reason"]


# -- label tables: NUL padding, endless lines, a column named twice -------------------------------


def synthetic(tmp_path: Path) -> Path:
    from medvqa_build.sources.synthetic_endo import write_synthetic_endo

    return write_synthetic_endo(tmp_path / "syn", n_images=6, n_videos=1, frames_per_video=4)


def _pad_with_nul(table: Path, size: int) -> None:
    with table.open("r+b") as fh:
        fh.truncate(size)  # sparse: the gigabyte costs no disk and no time to write


def _endless_line(table: Path, size: int) -> None:
    with table.open("ab") as fh:
        fh.write(b"x" * size)


def _twice(table: Path, size: int) -> None:
    header, rest = table.read_text().split("\n", 1)
    table.write_text(header.replace("finding", "finding,finding", 1) + "\n" + rest)


@pytest.mark.parametrize(
    "damage, size, words",
    [
        (_pad_with_nul, 1 << 30, ["labels.csv holds a NUL byte at byte", "not a text table"]),
        (_endless_line, 3 << 20, ["labels.csv has a line of over 1,048,576 characters"]),
        (_twice, 0, ["labels.csv names column(s) ['finding'] more than once"]),
    ],
)
def test_a_damaged_label_table_is_one_line_in_bounded_memory(tmp_path, damage, size, words):
    """The table is scanned before pandas reads it: a gigabyte of NUL padding (9.6 GB
    resident before), a 3 MiB line, a header naming a column twice (pandas read the first)."""
    root = synthetic(tmp_path)
    damage(root / "labels.csv", size)
    proc = bounded_cli("convert", "synthetic-endo", root, "-o", tmp_path / "s.parquet", "-q")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.error_lines()
    for word in words:
        assert word in line, line


def test_table_limits_are_overridable(tmp_path):
    """MEDVQA_LIMITS lowers a limit: a 200-byte line is refused at max_line_chars=100."""
    root = synthetic(tmp_path)
    _endless_line(root / "labels.csv", 200)
    env = {"MEDVQA_LIMITS": "max_line_chars=100"}
    out = tmp_path / "s.parquet"
    proc = bounded_cli("convert", "synthetic-endo", root, "-o", out, "-q", env=env)
    assert proc.returncode == 2 and "max_line_chars limit of 100" in proc.error_lines()[0]


# -- 2-D images: our limit quoted, and the decode budget ------------------------------------------


def test_a_tiff_over_max_pixels_quotes_our_limit_not_pillows(tmp_path):
    """Pillow refuses at twice its own MAX_IMAGE_PIXELS (4e8 when set to ours): the reason
    names the size and max_pixels, never Pillow's number."""
    polyps = kvasir_polyps(tmp_path / "kvasir")
    Image.new("1", (30000, 30000)).save(polyps / "huge.tif", compression="tiff_adobe_deflate")
    out = tmp_path / "s.parquet"
    proc = bounded_cli("convert", "kvasir", tmp_path / "kvasir", "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    _, (entry,) = converted(out)
    assert entry["reason"].startswith(
        "image header claims 30000x30000 = 900,000,000 pixels, over the max_pixels limit of "
        "200,000,000"
    )
    assert "400000000" not in entry["reason"] and "400,000,000" not in entry["reason"]


def test_an_image_under_max_pixels_whose_decode_is_over_the_budget_is_quarantined(tmp_path):
    """A 14000x14000 Deflate TIFF (196 Mpx, under max_pixels) costs over a gigabyte to decode,
    in every worker: refused from its header by max_decode_bytes; raising the budget lets the
    header check pass."""
    polyps = kvasir_polyps(tmp_path / "kvasir")
    Image.new("1", (14000, 14000)).save(polyps / "slide.tif", compression="tiff_adobe_deflate")
    out = tmp_path / "s.parquet"
    proc = bounded_cli("convert", "kvasir", tmp_path / "kvasir", "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    counts, (entry,) = converted(out)
    assert counts["converted"] == 3
    assert "decoding 14000x14000 pixels needs about 1,176,000,000 bytes" in entry["reason"]
    assert "max_decode_bytes limit of 1,073,741,824 per worker" in entry["reason"]
    env = {"MEDVQA_LIMITS": "max_decode_bytes=2e9"}
    proc = bounded_cli("convert", "kvasir", tmp_path / "kvasir", "-o", out, "-q", env=env)
    assert converted(out)[0]["converted"] == 4


# -- JSON annotation files: nesting and size -------------------------------------------------------


@pytest.mark.parametrize(
    "text, limits, words",
    [
        ("[" * 100_000, "", ["dataset.json is nested 100,000 levels deep", "max_json_depth=64"]),
        ('{"a": ' * 70 + "1" + "}" * 70, "", ["nested 70 levels deep"]),
        ('{"labels": {}}' + " " * 4096, "max_json_bytes=4000", ["max_json_bytes limit of 4,000"]),
    ],
)
def test_a_json_annotation_file_too_deep_or_too_big_is_one_line(tmp_path, text, limits, words):
    """dataset.json, which the whole MSD task needs: nesting is measured before the parser
    recurses (100,000 '[' was a RecursionError), size before the file is read."""
    from ..fixtures.sources.msd import TASK
    from ..fixtures.sources.msd import write as write_msd

    root = write_msd(tmp_path / "msd")
    (root / TASK / "dataset.json").write_text(text)
    env = {"MEDVQA_LIMITS": limits}
    proc = bounded_cli("convert", "msd", root, "-o", tmp_path / "s.parquet", "-q", env=env)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.error_lines()
    for word in words:
        assert word in line, line


# -- a 4-D volume: the channel sliced is said, not silently chosen ---------------------------------


def test_a_4d_image_volume_says_which_channel_is_sliced(tmp_path):
    """An AbdomenCT-1K image saved with a time axis of 3: its first channel is sliced (the
    pixels of the 3-D volume it was built from), each sample records ``channel`` 0 of
    ``channels`` 3, and the counts note it once per case."""
    import nibabel as nib

    from ..fixtures.sources import abdomenct_1k

    root = abdomenct_1k.write(tmp_path / "ct")
    path = root / "AbdomenCT-1K-ImagePart1" / "Case_00001_0000.nii.gz"
    img = nib.load(path)
    data = np.asanyarray(img.dataobj)
    stacked = np.stack([data, data + 100, data - 100], axis=-1).astype(data.dtype)
    nib.save(nib.Nifti1Image(stacked, img.affine, img.header), path)
    out = tmp_path / "s.parquet"
    proc = bounded_cli("convert", "abdomenct-1k", root, "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    counts, entries = converted(out)
    assert not entries and counts["notes"] == {"4-D image volume: channel 0 of 3 sliced": 1}
    samples = mb.open_samples(out).samples
    four_d = [s for s in samples if "Case_00001" in s.image]
    assert four_d and all(
        (s.attributes["channel"], s.attributes["channels"]) == ("0", "3") for s in four_d
    )
    assert not any("channel" in s.attributes for s in samples if "Case_00001" not in s.image)


# -- EXIF orientation: pixels as displayed, images and masks alike ---------------------------------


def test_exif_orientation_is_applied_to_images_and_masks_alike(tmp_path):
    """A Kvasir-SEG JPEG stored 64x48 with EXIF orientation 6 is shown 48x64: the mask drawn
    on it as shown (48x64, no EXIF) converts, and the sample's size, box and the pixels
    every stage decodes are those of the displayed image. Before, the header's stored size
    was believed and the mask was quarantined for its size."""
    from ..fixtures.polyp_masks import write_mask
    from ..fixtures.sources import kvasir_seg

    base = kvasir_seg.write(tmp_path / "seg")
    stem = next(iter(kvasir_seg.POLYPS))
    stored = np.random.default_rng(0).integers(0, 255, (48, 64, 3), np.uint8)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    Image.fromarray(stored).save(base / "images" / f"{stem}.jpg", exif=exif.tobytes())
    write_mask(base / "masks" / f"{stem}.jpg", (48, 64), [(5, 10, 25, 40)])
    boxes = json.loads((base / "kavsir_bboxes.json").read_text())
    boxes[stem].update(width=48, height=64)
    boxes[stem]["bbox"] = [{"label": "polyp", "xmin": 5, "ymin": 10, "xmax": 25, "ymax": 40}]
    (base / "kavsir_bboxes.json").write_text(json.dumps(boxes))
    out = tmp_path / "s.parquet"
    proc = bounded_cli("convert", "kvasir-seg", base, "-o", out, "-q", "--verify", "decode")
    assert proc.returncode == 0, proc.stderr
    counts, entries = converted(out)
    assert not entries, entries
    table = mb.open_samples(out)
    (sample,) = [s for s in table.samples if stem in s.image]
    assert (sample.width, sample.height) == (48, 64)
    assert [r.bbox for r in sample.regions] == [(5, 10, 25, 40)]
    from medvqa_build.media.image import load_mask, load_rgb

    assert load_rgb(table.image_path(sample)).shape == (64, 48, 3)
    assert load_mask(base / "masks" / f"{stem}.jpg").shape == (64, 48)


# -- videos: frames declared against max_frames ----------------------------------------------------


def test_a_video_declaring_more_frames_than_max_frames_is_quarantined(tmp_path):
    """Cholec80 replica with max_frames lowered under one video's length: that video's
    frames are quarantined naming the limit, the other video converts."""
    from ..fixtures.sources import cholec80

    root = cholec80.write(tmp_path / "c80")
    lengths = sorted(n for n, _, _ in cholec80.VIDEOS.values())
    env = {"MEDVQA_LIMITS": f"max_frames={lengths[0]}"}
    out = tmp_path / "s.parquet"
    proc = bounded_cli("convert", "cholec80", root, "-o", out, "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    counts, entries = converted(out)
    assert counts["converted"] > 0 and entries
    assert all(f"over the max_frames limit of {lengths[0]:,}" in e["reason"] for e in entries)


# -- DICOM: frames and decoded bytes a header declares ---------------------------------------------


def test_a_dicom_declaring_more_than_the_budget_is_quarantined_before_decoding(tmp_path):
    """VinDr-SpineXR replica with one DICOM whose header claims 3,000,000 frames (pixel data
    for one): refused by max_frames from the header; with a decode budget lowered under the
    replica's images, each is refused naming the bytes it would need."""
    import pydicom

    from ..fixtures.sources import vindr_spinexr

    root = vindr_spinexr.write(tmp_path / "vindr")
    first = sorted((root / "train_images").glob("*.dicom"))[0]
    ds = pydicom.dcmread(first)
    ds.NumberOfFrames = 3_000_000
    ds.save_as(first)
    out = tmp_path / "s.parquet"
    proc = bounded_cli("convert", "vindr-spinexr", root, "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    counts, entries = converted(out)
    (entry,) = [e for e in entries if e["file"].endswith(first.name)]
    assert "declares 3,000,000 frames, over the max_frames limit" in entry["reason"]
    assert counts["converted"] > 0
    env = {"MEDVQA_LIMITS": "max_decode_bytes=1000,max_frames=1e7"}
    proc = bounded_cli("convert", "vindr-spinexr", root, "-o", out, "-q", env=env)
    assert proc.returncode == 2  # nothing converts: exit 2 with the commonest reason
    assert "over the max_decode_bytes limit of 1,000 per worker" in proc.error_lines()[0]


def test_a_box_file_padded_with_nul_quarantines_its_image_only(tmp_path):
    """A per-image YOLO file padded to 1 GiB of NUL bytes (sparse) is that image's problem:
    quarantined naming the padding, the other images convert."""
    from ..fixtures.sources import wcebleedgen

    root = wcebleedgen.write(tmp_path / "wce")
    box_file = sorted(root.rglob("YOLO_TXT/*.txt"))[0]
    with box_file.open("r+b") as fh:
        fh.truncate(1 << 30)
    out = tmp_path / "s.parquet"
    proc = bounded_cli("convert", "wcebleedgen", root, "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    counts, (entry,) = converted(out)
    assert counts["converted"] > 0
    assert f"box file {box_file.name} holds a NUL byte" in entry["reason"]


def test_a_column_named_twice_in_a_csv_read_table_is_one_line(tmp_path):
    """Kvasir-Capsule's metadata.csv is read with ``csv`` (which keeps the last of two
    columns of one name, pandas the first): either way one silently wins, so it is refused."""
    from ..fixtures.sources import kvasir_capsule

    root = kvasir_capsule.write(tmp_path / "kc")
    table = root / "metadata.csv"
    header, rest = table.read_text().split("\n", 1)
    table.write_text(header + ";finding_class\n" + rest)
    proc = bounded_cli("convert", "kvasir-capsule", root, "-o", tmp_path / "s.parquet", "-q")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.error_lines()
    assert "metadata.csv names column(s) ['finding_class'] more than once" in line

"""Malformed-input corpus across the layout readers, generated here.

For every case the conversion finishes, every damaged file is in the quarantine with a reason
(no absolute path in it), and the samples built from the good files are identical to a
conversion of the same fixture without the damage. A table that lacks a column is a clear
``SourceError`` instead: that is the contract.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pydicom
import pytest
from PIL import Image
from pydicom.encaps import encapsulate

from medvqa_build.api import load_source
from medvqa_build.errors import SourceError
from medvqa_build.media.image import load_rgb

from ..fixtures import fixture_writer
from ..fixtures.dicom_files import ramp, write_dicom
from ..fixtures.polyp_masks import write_image, write_mask
from ..fixtures.video import write_mp4
from ..fixtures.volumes import LPS_AFFINE, ct_volume, write_nifti
from . import corpus as C


def _kvasir(root: Path) -> list[str]:
    d = root / "kvasir-dataset-v2" / "polyps"
    C.zero_byte(d / "zero.jpg")
    C.truncated_jpeg(d / "trunc.jpg")
    C.truncated_png(d / "trunc.png")
    C.truncated_tiff(d / "trunc.tif")
    C.write(d / "cut.tif", C.pil_tiff_bytes()[:4000])  # header intact, strips cut
    C.not_an_image(d / "html.jpg")
    C.symlink_loop(d / "loop.jpg")
    C.dir_symlink_loop(d / "sub")  # not followed: nothing to report, and the scan ends
    return [
        f"kvasir-dataset-v2/polyps/{n}"
        for n in (
            "zero.jpg",
            "trunc.jpg",
            "trunc.png",
            "trunc.tif",
            "cut.tif",
            "html.jpg",
            "loop.jpg",
        )
    ]


def _kvasir_seg(root: Path) -> list[str]:
    boxes = json.loads((root / "kavsir_bboxes.json").read_text())
    box = {
        "height": 48,
        "width": 64,
        "bbox": [{"label": "polyp", "xmin": 1, "ymin": 1, "xmax": 9, "ymax": 9}],
    }
    for stem in ("wsize", "wtype", "trunc", "nomaskdecode"):
        boxes[stem] = box
        (C.truncated_jpeg if stem == "trunc" else lambda p: C.write_jpeg(p, 3))(
            root / "images" / f"{stem}.jpg"
        )
    write_mask(root / "masks" / "wsize.jpg", (32, 24), [(1, 1, 5, 5)])  # wrong size
    C.not_an_image(root / "masks" / "wtype.jpg")  # wrong type
    write_mask(root / "masks" / "trunc.jpg", (64, 48), [(1, 1, 5, 5)])
    C.write(root / "masks" / "nomaskdecode.jpg", b"\x00" * 10)
    return [f"images/{s}.jpg" for s in ("wsize", "wtype", "trunc", "nomaskdecode")]


def _synthetic_endo(root: Path) -> list[str]:
    # an empty label cell is not bad: the image is kept unlabelled (tests/unit/layouts/
    # test_missing_values.py)
    rows = [
        ("bad_unknown", "Dragon"),
        ("bad_masksize", "Polyp"),
        ("bad_masktype", "Polyp"),
        ("bad_zero", "Polyp"),
        ("missing_file", "Polyp"),
    ]
    with (root / "labels.csv").open("a") as fh:
        fh.writelines(f"{stem},{label},P9,train\n" for stem, label in rows)
    for k, stem in enumerate(("bad_unknown", "bad_masksize", "bad_masktype")):
        C.write_jpeg(root / "images" / f"{stem}.jpg", k)
    write_mask(root / "masks" / "bad_masksize.png", (10, 10), [(1, 1, 5, 5)])
    C.not_an_image(root / "masks" / "bad_masktype.png")
    C.zero_byte(root / "images" / "bad_zero.jpg")
    C.truncated_jpeg(root / "videos" / "video01" / "video01_000100.jpg")  # no phase row either
    return [f"images/{s}.jpg" for s, _ in rows] + ["videos/video01/video01_000100.jpg"]


def _ldpolypvideo(root: Path) -> list[str]:
    lines = {
        "90": "1\nnan 1 5 5\n",
        "91": "1\n10 10 500 500\n",
        "92": "2\n1 1 5 5\n",
        "93": "1\nfoo bar\n",
        "94": "1\n30 30 10 10\n",
        "95": "1\n1;1;5;5\n",
    }
    for n, text in lines.items():
        write_image(root / "Train" / "Images" / "1" / f"{n}.jpg", int(n), (56, 48))
        (root / "Train" / "Annotations" / "1" / f"{n}.txt").write_text(text)
    return [f"Train/Images/1/{n}.jpg" for n in lines]


def _wcebleedgen(root: Path) -> list[str]:
    b = root / "bleeding"
    lines = {
        90: "0 nan 0.5 0.1 0.1",
        91: "0 0.9 0.9 0.5 0.5",
        92: "7 0.5 0.5 0.1 0.1",
        93: "0 0.5",
        94: "0,0.5,0.5,0.1,0.1",
    }
    for n, text in lines.items():
        C.write(b / "Images" / f"img- ({n}).png", C.png_bytes(C.rgb(n, (224, 224))))
        C.write(b / "Annotations" / f"ann- ({n}).png", C.png_bytes(np.zeros((224, 224), np.uint8)))
        for sub in ("YOLO_TXT", "TXT"):
            (b / "Bounding boxes" / sub / f"img- ({n}).txt").write_text(text + "\n")
    return [f"bleeding/Images/img- ({n}).png" for n in lines]


def _psi_ava(root: Path) -> list[str]:
    path = sorted(root.rglob("*.json"))[0]
    data = json.loads(path.read_text())
    image, ann = data["images"][0], data["annotations"][0]
    cases = [
        ("CASE021/90001.jpg", [float("nan"), 1, 2, 2], 1),
        ("CASE021/90002.jpg", [100, 70, 50, 50], 1),
        ("CASE021/90003.jpg", [1, 1, 5, 5], 99),
    ]
    for k, (name, bbox, cat) in enumerate(cases):
        data["images"].append({**image, "id": 9000 + k, "file_name": name})
        data["annotations"].append(
            {**ann, "id": 9000 + k, "image_id": 9000 + k, "bbox": bbox, "category_id": cat}
        )
    path.write_text(json.dumps(data))
    folder = next(root.rglob("CASE021"))
    for name, _, _ in cases:
        C.write_jpeg(folder.parent / name, 1, (128, 80))
    return [(folder.parent / name).relative_to(root).as_posix() for name, _, _ in cases]


def _vindr(root: Path) -> list[str]:
    from ..fixtures.sources.vindr_spinexr import row as vindr_row

    folder = root / "train_images"
    write_dicom(folder / "nopix.dicom", ramp(48, 64, 1), modality="DX")
    ds = pydicom.dcmread(folder / "nopix.dicom")
    del ds.PixelData
    ds.save_as(folder / "nopix.dicom")
    write_dicom(folder / "badts.dicom", ramp(48, 64, 2), modality="DX")
    ds = pydicom.dcmread(folder / "badts.dicom")
    ds.file_meta.TransferSyntaxUID = "1.2.840.10008.1.2.4.100"  # MPEG2: no decoder
    ds.PixelData = encapsulate([b"\x00" * 100])
    ds["PixelData"].VR = "OB"
    ds.save_as(folder / "badts.dicom", enforce_file_format=True)
    write_dicom(folder / "trunc.dicom", ramp(48, 64, 3), modality="DX")
    C.write(folder / "trunc.dicom", (folder / "trunc.dicom").read_bytes()[:-500])
    write_dicom(folder / "oob.dicom", ramp(48, 64, 4), modality="DX")
    C.zero_byte(folder / "zero.dicom")
    ids = {
        "nopix": (1, 1, 5, 5),
        "badts": (1, 1, 5, 5),
        "trunc": (1, 1, 5, 5),
        "oob": (10, 10, 500, 500),
        "zero": (1, 1, 5, 5),
    }
    with (root / "annotations" / "train.csv").open("a") as fh:
        fh.writelines(vindr_row(i, "Osteophytes", box) + "\n" for i, box in ids.items())
    return [f"train_images/{i}.dicom" for i in ids]


def _msd(root: Path) -> list[str]:
    from ..fixtures.sources.msd import SHAPE, TASK

    root = root / TASK  # the folder the task's tarball unpacks to
    meta = json.loads((root / "dataset.json").read_text())
    short = (SHAPE[0], SHAPE[1], SHAPE[2] - 2)
    write_nifti(root / "imagesTr/liver_7.nii.gz", ct_volume(SHAPE, 7), LPS_AFFINE)
    write_nifti(root / "labelsTr/liver_7.nii.gz", np.zeros(short, np.uint8), LPS_AFFINE)
    write_nifti(root / "imagesTr/liver_8.nii.gz", ct_volume(SHAPE, 8), LPS_AFFINE)
    write_nifti(
        root / "labelsTr/liver_8.nii.gz", np.zeros(SHAPE, np.uint8), np.diag([2.0, 2.0, 2.0, 1.0])
    )
    C.zero_byte(root / "imagesTr/liver_9.nii.gz")
    write_nifti(root / "labelsTr/liver_9.nii.gz", np.zeros(SHAPE, np.uint8), LPS_AFFINE)
    meta["training"] += [
        {"image": f"./imagesTr/liver_{n}.nii.gz", "label": f"./labelsTr/liver_{n}.nii.gz"}
        for n in (7, 8, 9)
    ]
    (root / "dataset.json").write_text(json.dumps(meta))
    return [f"imagesTr/liver_{n}.nii.gz" for n in (7, 8, 9)]


def _cholec80(root: Path) -> list[str]:
    from ..fixtures.sources.cholec80 import write_tables

    # a 20-frame video whose tables go to frame 79: frames past the end are quarantined
    write_mp4(root / "videos" / "video03.mp4", 20, seed=5)
    (root / "videos" / "video03-timestamp.txt").write_text("0\t00:00:00:00\n")
    write_tables(root, "video03", 80, [(0, "Preparation")], {f: set() for f in (0, 25, 50, 75)})
    return ["videos/video03.mp4"]


CASES = {
    "kvasir": _kvasir,
    "kvasir-seg": _kvasir_seg,
    "synthetic-endo": _synthetic_endo,
    "ldpolypvideo": _ldpolypvideo,
    "wcebleedgen": _wcebleedgen,
    "psi-ava": _psi_ava,
    "vindr-spinexr": _vindr,
    "msd": _msd,
    "cholec80": _cholec80,
}


def _rows(result, exclude: str = "") -> list[dict]:
    return [s.to_row() for s in result.samples if not (exclude and s.image == exclude)]


@pytest.mark.parametrize("source_id", sorted(CASES))
def test_bad_files_are_quarantined_and_good_ones_unchanged(source_id, tmp_path):
    write = fixture_writer(source_id)
    clean = load_source(source_id, write(tmp_path / "clean"))
    root = write(tmp_path / "damaged")
    bad = CASES[source_id](root)
    damaged = load_source(source_id, root)
    assert damaged.found == len(damaged.samples) + len(damaged.quarantined)
    reasons: dict[str, list[str]] = {}
    for q in damaged.quarantined:
        reasons.setdefault(q.file, []).append(q.reason)
        assert q.reason.strip() and str(tmp_path) not in q.reason, q
    missing = [f for f in bad if f not in reasons]
    assert not missing, f"not quarantined: {missing}; quarantine: {reasons}"
    # a video shorter than its table keeps the frames it has: compare the rest
    keep = "videos/video03.mp4" if source_id == "cholec80" else ""
    assert _rows(damaged, keep) == _rows(clean)
    if keep:
        assert [s.frame for s in damaged.samples if s.image == keep] == [0]


@pytest.mark.parametrize("sep", [";", "\t"])
def test_wrong_separator_is_a_clear_source_error(sep, tmp_path):
    root = fixture_writer("synthetic-endo")(tmp_path)
    table = root / "labels.csv"
    table.write_text(table.read_text().replace(",", sep))
    with pytest.raises(SourceError, match=r"lacks column\(s\).*check the separator"):
        load_source("synthetic-endo", root)


def test_missing_column_is_a_clear_source_error(tmp_path):
    root = fixture_writer("synthetic-endo")(tmp_path)
    table = root / "labels.csv"
    table.write_text(table.read_text().replace("finding", "findings", 1))
    with pytest.raises(SourceError, match=r"lacks column\(s\) \['finding'\]"):
        load_source("synthetic-endo", root)


def test_missing_coco_section_is_a_clear_source_error(tmp_path):
    root = fixture_writer("psi-ava")(tmp_path)
    path = sorted(root.rglob("*.json"))[0]
    data = json.loads(path.read_text())
    del data["annotations"]
    path.write_text(json.dumps(data))
    with pytest.raises(SourceError):
        load_source("psi-ava", root)


def test_images_with_other_channel_counts_decode_to_rgb(tmp_path):
    """Grey+alpha, RGBA and 16-bit grey files are images, not damage: they convert and every
    decoder hands three 8-bit channels on."""
    root = fixture_writer("kvasir")(tmp_path)
    d = root / "kvasir-dataset-v2" / "polyps"
    Image.fromarray(np.zeros((48, 64, 2), np.uint8), "LA").save(d / "la.png")
    C.write(d / "rgba.png", C.png_bytes(np.zeros((48, 64, 4), np.uint8)))
    C.write(d / "grey16.png", C.png_bytes(np.full((48, 64), 40000, np.uint16)))
    result = load_source("kvasir", root)
    extra = {s.image: s for s in result.samples if s.image.endswith(".png")}
    assert len(extra) == 3 and not result.quarantined
    for rel, s in extra.items():
        rgb = load_rgb(root / rel)
        assert rgb.shape == (s.height, s.width, 3) and rgb.dtype == np.uint8


def test_decode_mode_catches_what_headers_cannot(tmp_path):
    root = fixture_writer("kvasir")(tmp_path)
    d = root / "kvasir-dataset-v2" / "polyps"
    data = C.jpeg_bytes()
    # a JPEG whose scan data is garbage but whose markers are intact
    mid = len(data) // 2
    C.write(d / "garbled.jpg", data[:200] + b"\xff\x00" * ((mid - 200) // 2) + data[mid:])
    header = load_source("kvasir", root)
    decode = load_source("kvasir", root, verify="decode")
    assert decode.found == header.found
    assert len(decode.samples) <= len(header.samples)


def test_symlink_loops_do_not_hang_the_walk(tmp_path):
    root = fixture_writer("kvasir")(tmp_path)
    d = root / "kvasir-dataset-v2"
    os.symlink("..", d / "polyps" / "up")
    os.symlink(d, d / "esophagitis" / "self")
    result = load_source("kvasir", root)
    assert len(result.samples) == 16 and not result.quarantined

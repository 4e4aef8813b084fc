"""A standing corpus of files nobody on the project wrote (issue 27, point 6): the test data
pydicom, nibabel and scikit-image ship, placed into the native layouts of a spine source
(VinDr-SpineXR, RSNA lumbar), a volume source (MSD) and an endoscopy source (Kvasir), and
converted by the CLI in a subprocess with ``--verify decode``.

For each: no traceback and exit 0; every file is converted or quarantined with a one-line
reason and the counts add up; the pixels the project decodes equal the reference library's
own reading (pydicom ``pixel_array``, nibabel ``dataobj``, ``skimage.io.imread``); and no
identifying DICOM header value appears in any output file or log line.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import nibabel as nib
import numpy as np
import pyarrow.parquet as pq
import pytest
import skimage.io

from medvqa_build.media.dicom import decode_pixels, load_dicom_rgb
from medvqa_build.media.image import load_rgb
from medvqa_build.media.load import load_ref_rgb
from medvqa_build.media.volume import load_slice_rgb, load_volume, slice_2d

from ..fixtures.sources import rsna_lumbar, vindr_spinexr
from . import third_party as T
from .bounded_cli import bounded_cli

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _convert(source: str, root: Path, out: Path):
    """``-v convert --verify decode`` as a subprocess, under the hostile corpus's memory and
    time ceilings (:mod:`.bounded_cli`)."""
    return bounded_cli(
        "-v", "convert", source, root, "-o", out / "samples.parquet", "--verify", "decode", "-q"
    )


def _finished(proc, out: Path):
    """Exit 0 without a traceback; counts that add up; a reason for every quarantine entry.
    Returns (samples, quarantine entries)."""
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    counts = json.loads((out / "samples.counts.json").read_text())
    quarantine = json.loads((out / "samples.quarantine.json").read_text())
    samples = pq.read_table(out / "samples.parquet").to_pylist()
    assert counts["found"] == counts["converted"] + counts["quarantined"]
    assert counts["converted"] == len(samples)
    assert counts["quarantined"] == len(quarantine)
    for entry in quarantine:
        reason = entry["reason"]
        assert reason.strip() and "\n" not in reason and "Traceback" not in reason, entry
        assert not Path(entry["file"]).is_absolute(), entry
    return samples, quarantine


def _no_phi(out: Path, log: str, needles: list[str]) -> None:
    """No needle in any output file (Parquet read back as values, since its pages may be
    compressed) nor in the log."""
    leaks = []
    for path in sorted(out.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if path.suffix == ".parquet":
            data += repr(pq.read_table(path).to_pylist()).encode()
        leaks += [(path.name, n) for n in needles if n.encode() in data]
    leaks += [("log", n) for n in needles if n in log]
    assert not leaks, leaks


# -- spine: VinDr-SpineXR (dicom_box_table) ----------------------------------------------------


def _vindr_root(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    """Every file of pydicom's test data as train_images/<id>.dicom, each listed in
    annotations/train.csv with a "No finding" row, beside the replica's own files."""
    root = vindr_spinexr.write(tmp_path / "vindr")
    placed = {}
    lines = []
    for k, path in enumerate(T.pydicom_files()):
        image_id = f"pyd{k:03d}"
        shutil.copyfile(path, root / "train_images" / f"{image_id}.dicom")
        placed[image_id] = path
        lines.append(vindr_spinexr.row(image_id, "No finding"))
    with (root / "annotations" / "train.csv").open("a") as fh:
        fh.write("\n".join(lines) + "\n")
    return root, placed


def test_pydicom_files_in_the_vindr_layout(tmp_path):
    root, placed = _vindr_root(tmp_path)
    out = tmp_path / "out"
    proc = _convert("vindr-spinexr", root, out)
    samples, quarantine = _finished(proc, out)
    converted = {Path(s["image"]).stem for s in samples}
    held = {Path(q["file"]).stem for q in quarantine}
    assert set(placed) <= converted | held and not (converted & held)
    decoded = 0
    for image_id, source in placed.items():
        reference = T.pixel_array(source)
        path = root / "train_images" / f"{image_id}.dicom"
        if image_id in converted:
            # converted with --verify decode: pydicom reads it, and our pixels are its pixels
            assert reference is not None, source.name
            assert np.array_equal(decode_pixels(T.read_dicom(path)), reference), source.name
            rgb = load_dicom_rgb(path)
            sample = next(s for s in samples if Path(s["image"]).stem == image_id)
            assert rgb.shape == (sample["height"], sample["width"], 3), source.name
            decoded += 1
        else:  # quarantined: pydicom gives no pixels either, or the header contradicts them
            assert reference is None or _header_contradicts(path), source.name
    assert decoded >= 60  # most of pydicom's images, compressed ones included
    _no_phi(out, proc.stdout + proc.stderr, T.phi_values(T.pydicom_files()))


def _header_contradicts(path: Path) -> bool:
    """pydicom decodes it, yet the file is not usable as one image (e.g. no Rows/Columns)."""
    ds = T.read_dicom(path)
    return ds is None or not (int(ds.get("Rows", 0) or 0) and int(ds.get("Columns", 0) or 0))


# -- spine: RSNA lumbar (rsna_lumbar_tables) ---------------------------------------------------


def test_pydicom_mr_slices_in_the_rsna_lumbar_layout(tmp_path):
    """The replica's slices replaced by pydicom's MR and CT files (compressed ones included),
    each at least as large as the replica's coordinates need."""
    root = rsna_lumbar.write(tmp_path / "rsna")
    slices = sorted((root / "train_images").rglob("*.dcm"))
    pool = [
        p
        for p in T.pydicom_files()
        if (ds := T.read_dicom(p)) is not None
        and T.pixel_array(p) is not None
        and int(ds.get("Rows", 0) or 0) >= 40
        and int(ds.get("Columns", 0) or 0) >= 40
        and int(ds.get("SamplesPerPixel", 1) or 1) == 1
        and int(ds.get("NumberOfFrames", 1) or 1) == 1
    ]
    assert len(pool) >= len(slices)
    step = len(pool) // len(slices)
    chosen = dict(zip(slices, pool[::step], strict=False))
    for target, source in chosen.items():
        shutil.copyfile(source, target)
    out = tmp_path / "out"
    proc = _convert("rsna-lumbar", root, out)
    samples, quarantine = _finished(proc, out)
    assert samples, quarantine
    for sample in samples:
        path = root / sample["image"]
        reference = T.pixel_array(chosen[path])
        assert np.array_equal(decode_pixels(T.read_dicom(path)), reference)
        ref = sample["slice"]
        fragment = {"slice": f"{ref['axis']}:{ref['index']}"} if ref else {}
        rgb = load_ref_rgb(path, fragment)
        assert rgb.shape == (sample["height"], sample["width"], 3)
    _no_phi(out, proc.stdout + proc.stderr, T.phi_values(list(chosen.values())))


# -- volume: MSD (msd_volumes) -----------------------------------------------------------------


def _label_for(image: nib.spatialimages.SpatialImage) -> nib.Nifti1Image:
    """A label volume for ``image`` (same grid and affine): voxels above the first volume's
    median are structure 1, so every slice with signal has foreground."""
    data = np.asanyarray(image.dataobj)
    if data.ndim == 2:
        data = data[..., None]
    data = data.reshape(data.shape[:3] + (-1,))[..., 0]
    label = data > np.nanmedian(data)  # resampled_anat_moved.nii holds NaN outside the brain
    if not label.any():  # mostly one bright value: everything above the darkest is structure
        label = data > np.nanmin(data)
    label = label.astype(np.uint8)
    return nib.Nifti1Image(label, image.affine)


def _msd_root(tmp_path: Path) -> tuple[Path, dict[str, Path], set[str]]:
    """nibabel's NIfTI files as imagesTr/<case>.nii.gz with generated labels, plus nibabel's
    other formats (MGH, MINC, PAR, DICOM) named as NIfTI cases: not volumes we can read."""
    task = tmp_path / "msd" / "Task99_Corpus"
    (task / "imagesTr").mkdir(parents=True)
    (task / "labelsTr").mkdir()
    training, placed, hostile = [], {}, set()
    for k, path in enumerate(T.nifti_files()):
        case = f"nib_{k:02d}"
        suffix = ".nii.gz" if path.name.endswith(".gz") else ".nii"
        image = task / "imagesTr" / f"{case}{suffix}"
        shutil.copyfile(path, image)
        try:
            label = _label_for(nib.load(str(path)))
        except Exception:  # not a volume nibabel gives an array for: the image has none either
            label = nib.Nifti1Image(np.ones((4, 4, 4), np.uint8), np.eye(4))
            hostile.add(case)
        nib.save(label, str(task / "labelsTr" / f"{case}.nii.gz"))
        training.append({"image": f"./imagesTr/{image.name}", "label": f"./labelsTr/{case}.nii.gz"})
        placed[case] = path
    for k, path in enumerate(T.nibabel_non_nifti()[::4]):
        case = f"other_{k:02d}"
        # gzip-compressed formats (MGH's .mgz) as .nii.gz, the rest as plain .nii
        name = f"{case}.nii.gz" if path.read_bytes()[:2] == b"\x1f\x8b" else f"{case}.nii"
        shutil.copyfile(path, task / "imagesTr" / name)
        nib.save(
            nib.Nifti1Image(np.ones((4, 4, 4), np.uint8), np.eye(4)),
            str(task / "labelsTr" / f"{case}.nii.gz"),
        )
        training.append({"image": f"./imagesTr/{name}", "label": f"./labelsTr/{case}.nii.gz"})
        placed[case] = path
        hostile.add(case)
    meta = {
        "name": "Corpus",
        "modality": {"0": "MRI"},
        "labels": {"0": "background", "1": "bright"},
        "numTraining": len(training),
        "training": training,
        "test": [],
    }
    (task / "dataset.json").write_text(json.dumps(meta, indent=2))
    return task, placed, hostile


def test_nibabel_volumes_in_the_msd_layout(tmp_path):
    task, placed, hostile = _msd_root(tmp_path)
    out = tmp_path / "out"
    proc = _convert("msd", task, out)
    samples, quarantine = _finished(proc, out)
    cases_converted = {s["attributes_case"] for s in map(_flat, samples)}
    cases_held = {Path(q["file"].split("#")[0]).name.split(".")[0] for q in quarantine}
    for case in placed:
        assert case in cases_converted | cases_held, case
    assert not (hostile & cases_converted), hostile & cases_converted
    assert len(cases_converted) >= 4, cases_converted
    checked = 0
    for sample in samples[:: max(1, len(samples) // 40)]:
        flat = _flat(sample)
        case, channel = flat["attributes_case"], flat.get("attributes_channel")
        axis, index = sample["slice"]["axis"], sample["slice"]["index"]
        reference = _nibabel_slice(placed[case], axis, int(index), channel)
        got = slice_2d(
            load_volume(task / sample["image"], None if channel is None else int(channel)),
            axis,
            int(index),
        )
        assert got.shape == (sample["height"], sample["width"])
        # nibabel's values rounded to float32: a scaled or float64 volume is read as float32
        # (docs/reliability.md, Limits), which every reader of the voxels works in
        np.testing.assert_array_equal(np.asarray(got, np.float32), reference.astype(np.float32))
        checked += 1
    assert checked >= 4
    # resampled_anat_moved.nii holds NaN outside the brain: its slices still show the brain
    nan_case = next(c for c, p in placed.items() if p.name == "resampled_anat_moved.nii")
    nan_samples = [s for s in samples if _flat(s)["attributes_case"] == nan_case]
    assert nan_samples
    for sample in nan_samples:
        ref = sample["slice"]
        rgb = load_slice_rgb(task / sample["image"], ref["axis"], ref["index"])
        assert rgb.shape == (sample["height"], sample["width"], 3) and rgb.max() > 0


def _flat(sample: dict) -> dict:
    return {**sample, **{f"attributes_{k}": v for k, v in sample["attributes"]}}


def _nibabel_slice(path: Path, axis: str, index: int, channel: str | None) -> np.ndarray:
    """nibabel's own reading of one slice, in RAS+ and the radiological display convention
    (docs/layouts.md): axial rows anterior -> posterior and columns right -> left."""
    image = nib.as_closest_canonical(_squeeze_2d(nib.load(str(path))))
    data = np.asanyarray(image.dataobj).astype(np.float64)
    if data.ndim == 4:
        data = data[..., 0 if channel is None else int(channel)]
    fixed = {"sagittal": 0, "coronal": 1, "axial": 2}[axis]
    plane = np.take(data, index, axis=fixed).T  # rows: the later RAS axis
    return plane[::-1, ::-1]


def _squeeze_2d(image):
    if len(image.shape) == 2:
        return nib.Nifti1Image(np.asanyarray(image.dataobj)[..., None], image.affine)
    return image


# -- endoscopy: Kvasir (class_folders) ---------------------------------------------------------

KVASIR_CLASSES = ("polyps", "esophagitis", "normal-cecum", "ulcerative-colitis")


def test_skimage_images_in_the_kvasir_layout(tmp_path):
    """Every file of scikit-image's data folder in a Kvasir class folder (PNG, JPEG, TIFF,
    GIF, and the .npy/.npz/.xml/.txt beside them, which are not images of the layout)."""
    root = tmp_path / "kvasir"
    placed = {}
    for k, path in enumerate(T.skimage_files()):
        if path.suffix == ".py" or path.suffix == ".pyi":
            continue
        folder = root / "kvasir-dataset-v2" / KVASIR_CLASSES[k % len(KVASIR_CLASSES)]
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, folder / path.name)
        placed[f"{folder.name}/{path.name}"] = path
    out = tmp_path / "out"
    proc = _convert("kvasir", root, out)
    samples, quarantine = _finished(proc, out)
    images = {p for p, src in placed.items() if src.suffix.lower() in T.IMAGE_SUFFIXES}
    seen = {s["image"].split("/", 1)[1] for s in samples}
    seen |= {q["file"].split("/", 1)[1] for q in quarantine}
    assert images <= seen, sorted(images - seen)
    assert len(samples) >= 15
    for sample in samples:
        source = placed[sample["image"].split("/", 1)[1]]
        got = load_rgb(root / sample["image"])
        assert got.shape == (sample["height"], sample["width"], 3), source.name
        np.testing.assert_array_equal(got, _skimage_rgb(source), err_msg=source.name)


def _skimage_rgb(path: Path) -> np.ndarray:
    """scikit-image's reading as the (H, W, 3) uint8 RGB the project hands on: grey repeated,
    alpha dropped, the first page of a multi-page file."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        image = skimage.io.imread(path)
    if image.ndim == 4 or (image.ndim == 3 and image.shape[-1] not in (3, 4)):
        image = image[0]
    if image.ndim == 2:
        image = np.repeat(image[..., None], 3, axis=2)
    image = image[..., :3]
    if image.dtype == bool:
        image = image.astype(np.uint8) * 255
    return image.astype(np.uint8)

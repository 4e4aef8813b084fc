"""NIfTI sources (msd, brats) on replicas: slices, regions per structure, groups, sequences, and
the quarantine reasons of bad cases."""

import json

import numpy as np

from medvqa_build.api import load_source
from medvqa_build.geometry import mask_to_xyxy, rle_decode

from ...fixtures.sources import brats, msd
from ...fixtures.volumes import LPS_AFFINE, write_nifti


def test_msd_slices_regions_groups(tmp_path):
    result = load_source("msd", msd.write(tmp_path))
    assert result.counts() == {"found": 12, "converted": 12, "quarantined": 0}
    s = {x.sample_id: x for x in result.samples}["msd:liver_0/axial/0004"]
    assert s.labels == ("liver", "cancer") and s.group_id == "liver_0" and s.modality == "ct"
    assert s.slice.axis == "axial" and (s.width, s.height) == (40, 36)
    assert s.attributes["window"] == "abdomen" and s.attributes["task"] == "Liver"
    for r in s.regions:  # box = tight box of the RLE mask
        assert mask_to_xyxy(rle_decode(r.mask.size_hw, r.mask.counts)) == r.bbox


def test_msd_bad_cases_are_quarantined(tmp_path):
    root = msd.write(tmp_path) / msd.TASK
    meta = json.loads((root / "dataset.json").read_text())
    lab = np.zeros(msd.SHAPE, np.uint8)
    write_nifti(root / "imagesTr" / "liver_7.nii.gz", np.zeros(msd.SHAPE, np.int16), LPS_AFFINE)
    write_nifti(root / "labelsTr" / "liver_7.nii.gz", lab, LPS_AFFINE)  # no foreground
    write_nifti(root / "imagesTr" / "liver_8.nii.gz", np.zeros(msd.SHAPE, np.int16), LPS_AFFINE)
    write_nifti(root / "labelsTr" / "liver_8.nii.gz", lab[:, :, :5], LPS_AFFINE)  # shape
    lab9 = lab.copy()
    lab9[5:15, 5:15, 3] = 7
    write_nifti(root / "imagesTr" / "liver_9.nii.gz", np.zeros(msd.SHAPE, np.int16), LPS_AFFINE)
    write_nifti(root / "labelsTr" / "liver_9.nii.gz", lab9, LPS_AFFINE)  # unknown value
    write_nifti(root / "imagesTr" / "liver_10.nii.gz", np.zeros(msd.SHAPE, np.int16), np.eye(4))
    write_nifti(root / "labelsTr" / "liver_10.nii.gz", lab9, LPS_AFFINE)  # affine
    meta["training"] += [
        {"image": f"./imagesTr/liver_{k}.nii.gz", "label": f"./labelsTr/liver_{k}.nii.gz"}
        for k in (7, 8, 9, 10, 11)
    ]
    (root / "dataset.json").write_text(json.dumps(meta))
    result = load_source("msd", root)
    reasons = {q.file: q.reason for q in result.quarantined}
    assert result.counts() == {"found": 17, "converted": 12, "quarantined": 5}
    assert "no foreground" in reasons["imagesTr/liver_7.nii.gz"]
    assert "(40, 36, 5)" in reasons["imagesTr/liver_8.nii.gz"]
    assert "[7]" in reasons["imagesTr/liver_9.nii.gz"]
    assert "affine" in reasons["imagesTr/liver_10.nii.gz"]
    assert (
        "labelsTr/liver_11.nii.gz is missing" in reasons["imagesTr/liver_11.nii.gz"]
        or "imagesTr/liver_11.nii.gz is missing" in reasons["imagesTr/liver_11.nii.gz"]
    )


def test_brats_sequences_share_slices(tmp_path):
    result = load_source("brats", brats.write(tmp_path))
    by_id = {s.sample_id: s for s in result.samples}
    seqs = [
        by_id[f"brats:BraTS20_Training_001/axial/0004/{q}"] for q in ("FLAIR", "T1", "T1ce", "T2")
    ]
    names = {s.image.rsplit("_", 1)[1] for s in seqs}
    assert names == {"flair.nii", "t1.nii", "t1ce.nii", "t2.nii"}
    assert len({s.regions for s in seqs}) == 1 and {s.group_id for s in seqs} == {
        "BraTS20_Training_001"
    }
    assert set(seqs[0].labels) == {"peritumoral edema", "tumour core", "enhancing tumour"}
    assert seqs[0].attributes["source_label"] == "NCR/NET,ED,ET"

"""Cardiac and abdominal NIfTI sources (acdc, camus, abdomenct-1k) on replicas: ED/ES phases from
the info files, views, the cine files left alone, label values, groups and quarantine."""

import numpy as np

from medvqa_build.api import load_source
from medvqa_build.geometry import mask_to_xyxy, rle_decode

from ...fixtures.sources import abdomenct_1k, acdc, camus
from ...fixtures.volumes import write_nifti


def test_acdc_phases_from_info_cfg(tmp_path):
    result = load_source("acdc", acdc.write(tmp_path))
    assert result.counts() == {"found": 20, "converted": 20, "quarantined": 0}
    assert not any("_4d" in s.image or "_gt" in s.image for s in result.samples)
    by_id = {s.sample_id: s for s in result.samples}
    ed = by_id["acdc:patient001_frame01/axial/0002"]
    es = by_id["acdc:patient001_frame12/axial/0002"]
    assert (ed.attributes["phase"], es.attributes["phase"]) == ("ED", "ES")
    assert ed.attributes["Group"] == "DCM" and ed.group_id == es.group_id == "patient001"
    assert ed.labels == ("right ventricle", "myocardium", "left ventricle")
    assert ed.attributes["source_label"] == "RV,MYO,LV" and ed.modality == "mri"
    assert by_id["acdc:patient002_frame08/axial/0001"].attributes["phase"] == "ES"
    lv = {s.attributes["phase"]: s for s in (ed, es)}
    areas = {
        k: rle_decode(r.mask.size_hw, r.mask.counts).sum()
        for k, s in lv.items()
        for r in s.regions
        if r.label == "left ventricle"
    }
    assert areas["ES"] < areas["ED"]  # the cavity contracts at end-systole
    for r in ed.regions:
        assert mask_to_xyxy(rle_decode(r.mask.size_hw, r.mask.counts)) == r.bbox


def test_acdc_unknown_label_and_missing_gt_are_quarantined(tmp_path):
    root = acdc.write(tmp_path)
    folder = root / "database" / "training" / "patient001"
    lab = np.zeros(acdc.SHAPE, np.uint8)
    lab[5:15, 5:15, 2] = 4
    write_nifti(folder / "patient001_frame12_gt.nii.gz", lab, acdc.AFFINE)
    (root / "database" / "training" / "patient002" / "patient002_frame08_gt.nii.gz").unlink()
    reasons = {q.file: q.reason for q in load_source("acdc", root).quarantined}
    assert "[4]" in reasons["database/training/patient001/patient001_frame12.nii.gz"]
    assert (
        "patient002_frame08_gt.nii.gz is missing"
        in reasons["database/training/patient002/patient002_frame08.nii.gz"]
    )


def test_camus_views_phases_and_info(tmp_path):
    result = load_source("camus", camus.write(tmp_path))
    assert result.counts() == {"found": 8, "converted": 8, "quarantined": 0}
    assert not any("half_sequence" in s.image for s in result.samples)
    by_id = {s.sample_id: s for s in result.samples}
    s = by_id["camus:patient0002_4CH_ES/axial/0000"]
    assert (s.attributes["view"], s.attributes["phase"]) == ("4CH", "ES")
    assert s.attributes["EF"] == "53" and s.attributes["ImageQuality"] == "Good"
    assert s.group_id == "patient0002" and s.modality == "ultrasound"
    assert (s.width, s.height) == camus.SHAPE
    assert set(s.labels) == {"left ventricle", "myocardium", "left atrium"}
    boxes = {r.label: r.bbox for r in s.regions}
    assert boxes["left atrium"][1] > boxes["left ventricle"][1]  # atrium below the ventricle


def test_abdomenct_1k_parts_and_mask_folder(tmp_path):
    result = load_source("abdomenct-1k", abdomenct_1k.write(tmp_path))
    assert result.counts()["quarantined"] == 0
    images = {s.image for s in result.samples}
    assert {i.split("/")[0] for i in images} == set(abdomenct_1k.CASES.values())
    s = next(x for x in result.samples if x.sample_id == "abdomenct-1k:Case_00401_0000/axial/0004")
    assert s.group_id == "Case_00401" and s.attributes["label_volume"] == "Mask/Case_00401.nii.gz"
    assert set(s.labels) == {"liver", "kidney", "spleen", "pancreas"}
    assert s.attributes["window"] == "abdomen"


def test_abdomenct_1k_missing_mask_is_quarantined(tmp_path):
    root = abdomenct_1k.write(tmp_path)
    (root / "Mask" / "Case_00801.nii.gz").unlink()
    result = load_source("abdomenct-1k", root)
    (entry,) = result.quarantined
    assert entry.file == "AbdomenCT-1K-ImagePart3/Case_00801_0000.nii.gz"
    assert "Mask/Case_00801.nii.gz is missing" in entry.reason

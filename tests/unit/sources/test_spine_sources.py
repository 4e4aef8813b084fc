"""Spine sources on tiny replicas: labels standardised to SpineBench's names, levels, points,
boxes, groups, DICOM sizes and allow-listed header attributes, and per-file quarantine."""

import json

import numpy as np
import pytest

from medvqa_build.api import load_source
from medvqa_build.errors import SourceError

from ...fixtures.dicom_files import PHI
from ...fixtures.sources import buu_lspine, csxa, rsna_lumbar, vindr_spinexr


def _by_image(result):
    return {s.image: s for s in result.samples}


def test_rsna_lumbar_slices_levels_and_severity(tmp_path):
    result = load_source("rsna-lumbar", rsna_lumbar.write(tmp_path))
    assert result.counts() == {"found": 4, "converted": 4, "quarantined": 0}
    s = _by_image(result)
    sag = s["train_images/4003253/702807833/8.dcm"]
    assert sag.labels == ("Spinal canal stenosis",) and sag.group_id == "4003253"
    assert (sag.width, sag.height, sag.modality) == (64, 48, "mri")
    assert sag.slice.axis == "sagittal" and sag.slice.index == 8
    # points are stored as float32 in the sample table
    assert [r.level for r in sag.regions] == ["L4/L5", "L5/S1"]
    assert [r.points for r in sag.regions] == [
        ((30.5, 22.0),),
        ((31.0, pytest.approx(34.2, abs=1e-5)),),
    ]
    assert sag.attributes["lesion_levels"] == "L4/L5,L5/S1"
    assert sag.attributes["severity: Spinal Canal Stenosis L4/L5"] == "Severe"
    assert sag.attributes["dicom_Modality"] == "MR" and "dicom_PixelSpacing" in sag.attributes
    foramen = s["train_images/4003253/1054713880/4.dcm"]  # "Right Neural ..." merged
    assert foramen.labels == ("Foraminal stenosis",)
    axial = s["train_images/4003253/2448190387/3.dcm"]  # Normal/Mild only
    assert axial.labels == ("Healthy",) and "lesion_levels" not in axial.attributes
    assert axial.regions[0].label == "Subarticular stenosis"
    text = repr([x.to_row() for x in result.samples])
    assert not any(v in text for v in PHI.values())


def test_rsna_lumbar_quarantine(tmp_path):
    root = rsna_lumbar.write(tmp_path)
    (root / "train_images/4646740/3201256954/9.dcm").unlink()
    with (root / "train_label_coordinates.csv").open("a") as fh:
        fh.write("4003253,702807833,8,Spinal Canal Stenosis,L4/L5,99,10\n")  # outside 64x48
        fh.write("5550001,1,1,Spinal Canal Stenosis,L4/L5,1,1\n")  # study not in train.csv
    result = load_source("rsna-lumbar", root)
    reasons = {q.file: q.reason for q in result.quarantined}
    assert result.counts() == {"found": 5, "converted": 2, "quarantined": 3}
    assert reasons["train_images/4646740/3201256954/9.dcm"] == "file not found"
    assert reasons["train_images/4003253/702807833/8.dcm"] == (
        "point (99, 10) lies outside the 64x48 slice"
    )
    assert "no row in train.csv" in reasons["train_images/5550001/1/1.dcm"]


@pytest.mark.parametrize("marker", ["", "NaN"])
def test_rsna_lumbar_ungraded_cells_drop_that_label_only(tmp_path, marker):
    """train.csv leaves a cell empty where a level was not graded: the slice keeps its other
    labels, the empty one is counted, nothing is quarantined."""
    root = rsna_lumbar.write(tmp_path)
    table = root / "train.csv"
    header, *rows = table.read_text().splitlines()
    columns = header.split(",")
    blank = {"spinal_canal_stenosis_l5_s1", "left_subarticular_stenosis_l1_l2"}
    for k, row in enumerate(rows):
        cells = row.split(",")
        if cells[0] == "4003253":
            cells = [marker if c in blank else v for c, v in zip(columns, cells, strict=True)]
        rows[k] = ",".join(cells)
    table.write_text("\n".join([header, *rows]) + "\n")
    result = load_source("rsna-lumbar", root)
    assert result.counts() == {"found": 4, "converted": 4, "quarantined": 0}
    assert result.counts_detail["labels_missing"] == {
        "left_subarticular_stenosis_l1_l2": 1,
        "spinal_canal_stenosis_l5_s1": 1,
    }
    assert result.counts_detail["samples_missing_labels"] == 2
    s = _by_image(result)
    sag = s["train_images/4003253/702807833/8.dcm"]  # L4/L5 Severe kept, L5/S1's grade out
    assert sag.labels == ("Spinal canal stenosis",)
    # the ungraded L5/S1 point still locates its level (issue 33): region kept, grade left out
    assert [r.level for r in sag.regions] == ["L4/L5", "L5/S1"]
    assert sag.attributes["lesion_levels"] == "L4/L5"
    assert "severity: Spinal Canal Stenosis L5/S1" not in sag.attributes
    # the axial slice's only condition was not graded: no label, and not "Healthy"; its
    # point and level are kept
    axial = s["train_images/4003253/2448190387/3.dcm"]
    assert axial.labels == () and [r.level for r in axial.regions] == ["L1/L2"]
    assert axial.regions[0].points


def test_rsna_lumbar_unknown_grade_is_quarantined(tmp_path):
    """A grade the competition does not use is contradictory, not missing."""
    root = rsna_lumbar.write(tmp_path)
    table = root / "train.csv"
    table.write_text(table.read_text().replace("Severe", "Very bad", 1))
    result = load_source("rsna-lumbar", root)
    reasons = {q.file: q.reason for q in result.quarantined}
    assert "is 'Very bad', not one of" in reasons["train_images/4003253/702807833/8.dcm"]


def test_rsna_lumbar_missing_table_names_it(tmp_path):
    root = rsna_lumbar.write(tmp_path)
    (root / "train_series_descriptions.csv").unlink()
    with pytest.raises(SourceError, match="train_series_descriptions.csv"):
        load_source("rsna-lumbar", root)


def test_vindr_labels_boxes_groups_splits(tmp_path):
    result = load_source("vindr-spinexr", vindr_spinexr.write(tmp_path))
    assert result.counts() == {"found": 4, "converted": 4, "quarantined": 0}
    s = _by_image(result)
    a = s["train_images/0a1b2c3d4e5f60718293a4b5c6d7e8f9.dicom"]
    assert a.labels == ("Osteophytes", "Disc space narrowing") and a.split == "train"
    assert [r.bbox for r in a.regions] == [(10.5, 12.0, 30.25, 28.0), (20.0, 30.0, 50.0, 40.0)]
    assert a.group_id == vindr_spinexr.STUDY_A and a.modality == "x_ray"
    spondy = s["train_images/1b2c3d4e5f60718293a4b5c6d7e8f90a.dicom"]  # misspelt + RLE + MONO1
    assert spondy.labels == ("Spondylolisthesis",)
    assert spondy.attributes["source_label"] == "Spondylolysthesis"
    assert spondy.attributes["dicom_PhotometricInterpretation"] == "MONOCHROME1"
    normal = s["train_images/2c3d4e5f60718293a4b5c6d7e8f90a1b.dicom"]
    assert normal.labels == ("Healthy",) and normal.regions == ()
    assert s["test_images/3d4e5f60718293a4b5c6d7e8f90a1b2c.dicom"].split == "test"


def test_vindr_quarantine(tmp_path):
    root = vindr_spinexr.write(tmp_path)
    with (root / "annotations" / "train.csv").open("a") as fh:
        fh.write(vindr_spinexr.row("ffff", "Osteophytes", (1, 1, 5, 5)) + "\n")  # no file
        fh.write(vindr_spinexr.row("eeee", "Osteophytes", (1, 1, 5, 5)) + "\n")
    (root / "train_images" / "eeee.dicom").write_bytes(b"\0" * 200)  # not DICOM
    result = load_source("vindr-spinexr", root)
    reasons = {q.file: q.reason for q in result.quarantined}
    assert reasons["train_images/ffff.dicom"] == (
        "listed in annotations/train.csv but no such file under 'train_images'"
    )
    assert reasons["train_images/eeee.dicom"].startswith("not a readable DICOM file")


def test_csxa_curvature_and_keypoints(tmp_path):
    result = load_source("csxa", csxa.write(tmp_path))
    assert result.counts() == {"found": 5, "converted": 5, "quarantined": 0}
    s = _by_image(result)
    labels = {img: (x.attributes["source_label"], x.labels[0]) for img, x in s.items()}
    assert labels == {
        "datasets-PNG/0001035.png": ("1", "Cervical lordosis"),
        "datasets-PNG/0002148.png": ("2", "Straight cervical vertebrae"),  # cell "2.0"
        "datasets-PNG/0003052.png": ("3", "Sigmoid cervical vertebrae"),
        "datasets-PNG/0004161.png": ("4", "Sigmoid cervical vertebrae"),
        "datasets-PNG/0005029.png": ("5", "Cervical kyphosis"),
    }
    first = s["datasets-PNG/0001035.png"]
    assert len(first.regions) == 23 and [r.label for r in first.regions] == list(csxa.KEYPOINTS)
    assert first.regions[0].points == ((30.0, 8.0),) and first.regions[0].level == "point"
    assert (first.width, first.height) == csxa.SIZE_WH


def test_csxa_quarantine(tmp_path):
    root = csxa.write(tmp_path)
    (root / "datasets-JSON" / "0002148.json").unlink()
    csxa.write_xlsx(
        root / "datasets.xlsx",
        [
            ["inline:title"],
            ["Number", csxa.CURVATURE_COLUMN],
            [1, "1"],
            [3, "9"],  # a code the manifest does not know
            [4, ""],  # no grade: kept without a class (issue 23), not quarantined
            [5, "5"],
            [5, "1"],  # the same case twice with another grade
        ],
    )
    data = csxa.labelme("0006000", csxa.keypoints(0))
    data["imageWidth"] = 65
    csxa.write_png(root / "datasets-PNG" / "0006000.png", np.zeros((96, 64), np.uint8))
    (root / "datasets-JSON" / "0006000.json").write_text(json.dumps(data))
    (root / "datasets-JSON" / "0007000.json").write_text(json.dumps(data))
    csxa.write_png(root / "datasets-PNG" / "0008000.png", np.zeros((96, 64), np.uint8))
    good = csxa.labelme("0008000", csxa.keypoints(0))
    (root / "datasets-JSON" / "0008000.json").write_text(json.dumps(good))
    result = load_source("csxa", root)
    reasons = {q.file: q.reason for q in result.quarantined}
    assert reasons == {
        "datasets-PNG/0002148.png": "annotation datasets-JSON/0002148.json is missing",
        "datasets-PNG/0003052.png": "label '9' is not in the manifest's label_map",
        "datasets-PNG/0005029.png": "datasets.xlsx gives '5' conflicting labels",
        "datasets-PNG/0006000.png": "datasets-JSON/0006000.json says 65x96, the image is 64x96",
        "datasets-JSON/0007000.json": "annotation without an image 0007000.png",
        "datasets-PNG/0008000.png": "no row for '8' in datasets.xlsx",
    }
    assert [s.image for s in result.samples] == [
        "datasets-PNG/0001035.png",
        "datasets-PNG/0004161.png",
    ]
    assert result.samples[1].labels == () and len(result.samples[1].regions) == 23


def test_csxa_table_problems_name_the_workbook(tmp_path):
    root = csxa.write(tmp_path)
    csxa.write_xlsx(root / "datasets.xlsx", [["Number", csxa.CURVATURE_COLUMN], [1, "1"]])
    with pytest.raises(SourceError, match=r"datasets.xlsx lacks column\(s\)"):
        load_source("csxa", root)  # header expected on row 2
    csxa.write_xlsx(root / "datasets.xlsx", [["x"], ["Number", "Curve"]], sheet="Other")
    with pytest.raises(SourceError, match="no sheet 'Sheet1'"):
        load_source("csxa", root)
    (root / "datasets.xlsx").write_bytes(b"not a zip")
    with pytest.raises(SourceError, match="datasets.xlsx is not an .xlsx workbook"):
        load_source("csxa", root)
    (root / "datasets.xlsx").unlink()
    with pytest.raises(SourceError, match="datasets.xlsx"):
        load_source("csxa", root)


def test_buu_lspine_levels_views_groups(tmp_path):
    result = load_source("buu-lspine", buu_lspine.write(tmp_path))
    assert result.counts() == {"found": 3, "converted": 3, "quarantined": 0}
    s = _by_image(result)
    ap, la = s["AP/0001-F-037Y0.jpg"], s["LA/0001-F-037Y1.jpg"]
    assert ap.labels == ("No spondylolisthesis",) and len(ap.regions) == 10
    assert la.labels == ("Spondylolisthesis",) and len(la.regions) == 11
    assert la.attributes == {
        "source_label": "spondylolisthesis",
        "lesion_levels": "L4/L5",
        "view": "LA",
    }
    assert ap.group_id == la.group_id == "0001"
    assert s["LA/0003-M-061Y1.jpg"].attributes["lesion_levels"] == "L5/S1"
    assert la.regions[7].label == "L4-bottom" and la.regions[7].points[0] == (17.0, 78.0)


def test_buu_lspine_wrong_row_count(tmp_path):
    root = buu_lspine.write(tmp_path)
    csv = root / "AP" / "0001-F-037Y0.csv"
    csv.write_text("\n".join(csv.read_text().splitlines()[:9]) + "\n")
    result = load_source("buu-lspine", root)
    assert [q.reason for q in result.quarantined] == [
        "AP/0001-F-037Y0.csv has 9 rows, expected 10 (L1-top, L1-bottom, L2-top, L2-bottom, "
        "L3-top, L3-bottom, L4-top, L4-bottom, L5-top, L5-bottom)"
    ]


def test_label_table_reads_csv_like_xlsx(tmp_path):
    from medvqa_build.layouts.keypoint_json import read_table_rows

    rows = [["title"], ["Number", "Curve"], [7, "2.0"], [8, "Kyphotic"]]
    xlsx = read_table_rows(csxa.write_xlsx(tmp_path / "t.xlsx", rows))
    (tmp_path / "t.csv").write_text("title\nNumber,Curve\n7,2\n8,Kyphotic\n")
    assert xlsx == read_table_rows(tmp_path / "t.csv")
    assert xlsx[2] == (3, ["7", "2"])

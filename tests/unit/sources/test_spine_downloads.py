"""The four spine sources as their owners ship them (issue 23, point 4): the folders the
archives unpack to, the quirks documented on each docs page, and missing values that drop one
label, not the image. Each test writes its own replica (tests/fixtures/sources)."""

import json
import shutil

import pytest

from medvqa_build.api import load_source
from medvqa_build.errors import SourceError

from ...fixtures.sources import buu_lspine, csxa, rsna_lumbar, vindr_spinexr


def _ids(result) -> list[str]:
    return [s.sample_id for s in result.samples]


def _by_image(result):
    return {s.image: s for s in result.samples}


# --- RSNA 2024 lumbar spine (Kaggle) -------------------------------------------------------


def test_rsna_lumbar_kaggle_zip_converts_its_labelled_part_only(tmp_path):
    """The zip's files land in the folder it is unpacked into, with the unlabelled
    test_images/, test_series_descriptions.csv and sample_submission.csv beside the train
    files; grade cells left empty on levels without coordinates change nothing."""
    root = rsna_lumbar.write(tmp_path / "rsna-2024-lumbar-spine-degenerative-classification")
    assert (root / "test_images").is_dir() and (root / "sample_submission.csv").is_file()
    result = load_source("rsna-lumbar", root)
    assert result.resolution.found == ["train"] and result.resolution.missing == {}
    assert result.counts() == {"found": 4, "converted": 4, "quarantined": 0}
    assert all(s.image.startswith("train_images/") for s in result.samples)
    assert result.counts_detail["labels_missing"] == {}
    # /kaggle/input/<competition>/ or a download folder above it: the same samples
    assert _ids(load_source("rsna-lumbar", root.parent)) == _ids(result)


def test_rsna_lumbar_cervical_series_is_quarantined_with_its_reason(tmp_path):
    """Series 3892989905 (study 3637444890) is a cervical spine series (Kaggle discussion
    514891); the manifest's exclude_series leaves its slices out with that reason."""
    root = rsna_lumbar.write(tmp_path)
    with (root / "train.csv").open("a") as fh:
        fh.write("3637444890" + ",Normal/Mild" * 25 + "\n")
    with (root / "train_label_coordinates.csv").open("a") as fh:
        fh.write("3637444890,3892989905,7,Spinal Canal Stenosis,L1/L2,20.0,20.0\n")
    with (root / "train_series_descriptions.csv").open("a") as fh:
        fh.write("3637444890,3892989905,Sagittal T1\n")
    rsna_lumbar._slice(root / "train_images/3637444890/3892989905/7.dcm", 3, 7)
    result = load_source("rsna-lumbar", root)
    reasons = {q.file: q.reason for q in result.quarantined}
    assert reasons == {
        "train_images/3637444890/3892989905/7.dcm": (
            "series 3892989905 left out: a cervical spine series in lumbar study 3637444890 "
            "(Kaggle discussion 514891)"
        )
    }
    assert result.counts() == {"found": 5, "converted": 4, "quarantined": 1}


def test_rsna_lumbar_left_and_right_foramina_on_one_slice_are_contradictory(tmp_path):
    """A sagittal slice shows one neural foramen: left and right narrowing marked on the same
    instance at one level is a mislabelled instance (Kaggle discussion 521341). Left and right
    subarticular points on one axial slice are normal and kept."""
    root = rsna_lumbar.write(tmp_path)
    with (root / "train_label_coordinates.csv").open("a") as fh:
        fh.write("4003253,1054713880,4,Left Neural Foraminal Narrowing,L4/L5,21.0,25.0\n")
        fh.write("4003253,2448190387,3,Right Subarticular Stenosis,L1/L2,36.0,30.0\n")
    result = load_source("rsna-lumbar", root)
    reasons = {q.file: q.reason for q in result.quarantined}
    assert reasons == {
        "train_images/4003253/1054713880/4.dcm": (
            "Left Neural Foraminal Narrowing and Right Neural Foraminal Narrowing marked on "
            "the same slice at L4/L5 (contradictory: a slice shows only one of them)"
        )
    }
    axial = _by_image(result)["train_images/4003253/2448190387/3.dcm"]
    assert [r.label for r in axial.regions] == ["Subarticular stenosis"] * 2


def test_rsna_lumbar_a_grade_left_out_is_counted_only_for_a_kept_slice(tmp_path):
    """A slice quarantined for another reason does not add its empty grade cells to the
    report's labels-left-out count (found = converted + quarantined, labels counted once)."""
    root = rsna_lumbar.write(tmp_path)
    table = root / "train.csv"
    header, *rows = table.read_text().splitlines()
    column = header.split(",").index("spinal_canal_stenosis_l5_s1")
    cells = rows[0].split(",")
    assert cells[0] == "4003253"
    cells[column] = ""
    table.write_text("\n".join([header, ",".join(cells), *rows[1:]]) + "\n")
    with (root / "train_label_coordinates.csv").open("a") as fh:  # after the ungraded L5/S1 row
        fh.write("4003253,702807833,8,Spinal Canal Stenosis,L3/L4,99.0,10.0\n")
    result = load_source("rsna-lumbar", root)
    reasons = {q.file: q.reason for q in result.quarantined}
    assert reasons == {
        "train_images/4003253/702807833/8.dcm": "point (99, 10) lies outside the 64x48 slice"
    }
    assert result.counts_detail["labels_missing"] == {}
    assert result.counts_detail["samples_missing_labels"] == 0


# --- VinDr-SpineXR (PhysioNet) --------------------------------------------------------------

PHYSIONET_ZIP_FOLDER = (
    "vindr-spinexr-a-large-annotated-medical-image-dataset-for-spinal-lesions-detection-and-"
    "classification-from-radiographs-1.0.0"
)


def test_vindr_the_physionet_zip_folder_and_the_wget_tree_give_the_same_ids(tmp_path):
    expected = _ids(load_source("vindr-spinexr", vindr_spinexr.write(tmp_path / "plain")))
    unzipped = vindr_spinexr.write(tmp_path / "zip" / PHYSIONET_ZIP_FOLDER)
    wget = vindr_spinexr.write(tmp_path / "wget" / "physionet.org/files/vindr-spinexr/1.0.0")
    for given in (
        unzipped,
        unzipped.parent,
        wget,
        wget.parent,  # physionet.org/files/vindr-spinexr
        wget.parent.parent,  # physionet.org/files
    ):
        assert _ids(load_source("vindr-spinexr", given)) == expected, given


def test_vindr_a_zero_area_box_is_left_out_not_the_image(tmp_path):
    """The owners' loader drops boxes with xmax - xmin or ymax - ymin below 1e-3 ("remove
    empty box", spine/dataset_dict.py): the box is left out and counted, the image kept."""
    root = vindr_spinexr.write(tmp_path)
    image = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
    with (root / "annotations" / "train.csv").open("a") as fh:
        fh.write(vindr_spinexr.row(image, "Osteophytes", (40.0, 12.0, 40.0, 20.0)) + "\n")
    result = load_source("vindr-spinexr", root)
    assert result.quarantined == []
    sample = _by_image(result)[f"train_images/{image}.dicom"]
    assert sample.labels == ("Osteophytes", "Disc space narrowing")
    assert [r.bbox for r in sample.regions] == [(10.5, 12.0, 30.25, 28.0), (20.0, 30.0, 50.0, 40.0)]
    assert result.counts_detail["labels_missing"] == {"box (zero width or height)": 1}


def test_vindr_an_empty_label_or_a_partly_empty_box_drops_that_value_only(tmp_path):
    root = vindr_spinexr.write(tmp_path)
    normal, spondy = "2c3d4e5f60718293a4b5c6d7e8f90a1b", "1b2c3d4e5f60718293a4b5c6d7e8f90a"
    with (root / "annotations" / "train.csv").open("a") as fh:
        fh.write(vindr_spinexr.row(normal, "", (1.0, 1.0, 9.0, 9.0)) + "\n")  # no lesion_type
        fh.write(f"S,S,{spondy},rad2,Osteophytes,2.0,3.0,,9.0\n")  # xmax left empty
    result = load_source("vindr-spinexr", root)
    assert result.counts() == {"found": 4, "converted": 4, "quarantined": 0}
    s = _by_image(result)
    healthy = s[f"train_images/{normal}.dicom"]
    assert healthy.labels == ("Healthy",) and healthy.regions == ()
    assert healthy.attributes["source_label"] == "No finding"
    both = s[f"train_images/{spondy}.dicom"]
    assert both.labels == ("Spondylolisthesis", "Osteophytes")
    assert [r.label for r in both.regions] == ["Spondylolisthesis"]
    assert result.counts_detail["labels_missing"] == {"box": 1, "lesion_type": 1}
    assert result.counts_detail["samples_missing_labels"] == 2


def test_vindr_no_finding_rows_written_with_nan_boxes_are_image_level(tmp_path):
    """A copy re-saved by pandas may spell the empty box cells ``nan``: still no box."""
    root = vindr_spinexr.write(tmp_path)
    image = "3d4e5f60718293a4b5c6d7e8f90a1b2c"
    test_csv = root / "annotations" / "test.csv"
    header = test_csv.read_text().splitlines()[0]
    test_csv.write_text(f"{header}\nS,S,{image},rad3,No finding,nan,nan,nan,nan\n")
    result = load_source("vindr-spinexr", root)
    sample = _by_image(result)[f"test_images/{image}.dicom"]
    assert sample.labels == ("Healthy",) and sample.regions == () and sample.split == "test"
    assert result.counts_detail["labels_missing"] == {}


# --- BUU-LSPINE -----------------------------------------------------------------------------


def test_buu_lspine_zip_folder_in_its_own_wrapper_gives_the_same_ids(tmp_path):
    """BUU-LSPINE_400.zip unzipped into a folder of its name gives
    BUU-LSPINE_400/BUU-LSPINE_400/{AP,LA} (a public script reads exactly that path)."""
    plain = buu_lspine.write(tmp_path / "plain" / "BUU-LSPINE_400")
    expected = _ids(load_source("buu-lspine", plain))
    wrapped = tmp_path / "downloads" / "BUU-LSPINE_400"
    shutil.copytree(plain, wrapped / "BUU-LSPINE_400")
    assert _ids(load_source("buu-lspine", wrapped)) == expected
    assert _ids(load_source("buu-lspine", wrapped.parent)) == expected
    assert (plain / "KIOM2022_dataset_report.xlsx").is_file()  # beside the folders, not read


def test_buu_lspine_a_slip_class_code_counts_as_a_slip(tmp_path):
    """The flag column may carry the paper's slip class (3 = anterolisthesis) instead of 1."""
    root = buu_lspine.write(tmp_path)
    csv = root / "LA" / "0003-M-061Y1.csv"
    csv.write_text(csv.read_text().replace(",1\n", ",3\n"))
    sample = _by_image(load_source("buu-lspine", root))["LA/0003-M-061Y1.jpg"]
    assert sample.labels == ("Spondylolisthesis",)
    assert sample.attributes["lesion_levels"] == "L5/S1"


def test_buu_lspine_empty_cells_drop_that_endplate_or_flag_only(tmp_path):
    root = buu_lspine.write(tmp_path)
    ap = root / "AP" / "0001-F-037Y0.csv"
    rows = ap.read_text().splitlines()
    rows[2] = ",,,,0"  # L2 top: no corners
    rows[5] = rows[5].rsplit(",", 1)[0] + ",nan"  # L3 bottom: slip status unknown
    ap.write_text("\n".join(rows) + "\n")
    la = root / "LA" / "0001-F-037Y1.csv"
    rows = la.read_text().splitlines()
    rows[0] = rows[0].rsplit(",", 1)[0] + ","  # unknown flag beside a flagged slip
    la.write_text("\n".join(rows) + "\n")
    result = load_source("buu-lspine", root)
    assert result.counts() == {"found": 3, "converted": 3, "quarantined": 0}
    s = _by_image(result)
    unknown = s["AP/0001-F-037Y0.jpg"]
    assert unknown.labels == ()  # no slip flagged, one flag unknown: not "no slip"
    assert len(unknown.regions) == 9 and "L2-top" not in [r.label for r in unknown.regions]
    assert "source_label" not in unknown.attributes
    slip = s["LA/0001-F-037Y1.jpg"]
    assert slip.labels == ("Spondylolisthesis",) and len(slip.regions) == 11
    assert result.counts_detail["labels_missing"] == {
        "L1-top flag": 1,
        "L2-top corners": 1,
        "L3-bottom flag": 1,
    }
    assert result.counts_detail["samples_missing_labels"] == 2


# --- CSXA -----------------------------------------------------------------------------------


def _sheet(root, rows):
    csxa.write_xlsx(root / "datasets.xlsx", [["title"], ["Number", csxa.CURVATURE_COLUMN], *rows])


def test_csxa_an_empty_or_nan_curvature_keeps_the_image_and_its_keypoints(tmp_path):
    root = csxa.write(tmp_path)
    _sheet(root, [[1, "1"], [2, ""], [3, "nan"], [4, "4"], [5, "5"]])
    result = load_source("csxa", root)
    assert result.counts() == {"found": 5, "converted": 5, "quarantined": 0}
    s = _by_image(result)
    for image in ("datasets-PNG/0002148.png", "datasets-PNG/0003052.png"):
        assert s[image].labels == () and len(s[image].regions) == 23
        assert "source_label" not in s[image].attributes
    assert s["datasets-PNG/0004161.png"].labels == ("Sigmoid cervical vertebrae",)
    assert result.counts_detail["labels_missing"] == {csxa.CURVATURE_COLUMN: 2}
    assert result.counts_detail["samples_missing_labels"] == 2


def test_csxa_an_empty_row_beside_a_graded_row_is_not_a_conflict(tmp_path):
    root = csxa.write(tmp_path)
    _sheet(root, [[1, ""], [1, "1"], [2, "2"], [2, ""], [3, "3"], [4, "4"], [5, "5"]])
    result = load_source("csxa", root)
    assert result.quarantined == []
    s = _by_image(result)
    assert s["datasets-PNG/0001035.png"].labels == ("Cervical lordosis",)
    assert s["datasets-PNG/0002148.png"].labels == ("Straight cervical vertebrae",)
    assert result.counts_detail["labels_missing"] == {}


def test_csxa_a_keypoint_given_twice_is_left_out_not_the_image(tmp_path):
    """2548130.json gives "C3 top right" twice (and so lacks another point): which copy is
    right cannot be told, so both are left out and counted; an exact repeat is kept once."""
    root = csxa.write(tmp_path)
    path = root / "datasets-JSON" / "0001035.json"
    data = json.loads(path.read_text())
    shapes = data["shapes"]
    assert [s["label"] for s in shapes[3:5]] == ["C3 top left", "C3 top right"]
    shapes[3] = {**shapes[4], "points": [[25.0, 21.0]]}  # "C3 top right" again, elsewhere
    shapes.append(dict(shapes[0]))  # "C2 centroid" written twice at the same place
    path.write_text(json.dumps(data))
    result = load_source("csxa", root)
    sample = _by_image(result)["datasets-PNG/0001035.png"]
    names = [r.label for r in sample.regions]
    assert len(names) == 21 and "C3 top right" not in names and "C3 top left" not in names
    assert names.count("C2 centroid") == 1
    assert sample.labels == ("Cervical lordosis",)
    assert result.counts_detail["labels_missing"] == {"keypoint 'C3 top right' (given twice)": 1}


def test_buu_lspine_two_releases_in_one_folder_are_named_not_mixed(tmp_path):
    """The 400-patient release and the full set side by side: ROOT is ambiguous, both named."""
    buu_lspine.write(tmp_path / "BUU-LSPINE_400")
    buu_lspine.write(tmp_path / "BUU-LSPINE_3600")
    with pytest.raises(SourceError, match="ROOT holds the data twice") as err:
        load_source("buu-lspine", tmp_path)
    assert "BUU-LSPINE_400" in str(err.value) and "BUU-LSPINE_3600" in str(err.value)

"""Capsule-endoscopy and class-folder sources on tiny replicas: labels, boxes, groups, counts
and the quarantine reason of one bad file per source."""

import numpy as np
import pytest

from medvqa_build.api import load_source
from medvqa_build.errors import SourceError
from medvqa_build.layouts.yolo_boxes import yolo_to_xyxy

from ...fixtures.images import write_jpeg, write_png
from ...fixtures.sources import gastrovision, kvasir, kvasir_capsule, see_ai, wcebleedgen


def _by_image(result):
    return {s.image: s for s in result.samples}


def _reasons(result):
    return {q.file: q.reason for q in result.quarantined}


def test_kvasir_labels_scenes_and_bad_file(tmp_path):
    root = kvasir.write(tmp_path, per_class=1)
    (root / "kvasir-dataset-v2" / "polyps" / "truncated.jpg").write_bytes(b"\xff\xd8\xff\xe0")
    result = load_source("kvasir", root)
    assert result.counts() == {"found": 9, "converted": 8, "quarantined": 1}
    labels = {s.attributes["source_label"]: (s.labels, s.scene) for s in result.samples}
    assert labels["normal-z-line"] == (("z-line",), "Gastroscopy")
    assert labels["polyps"] == (("polyp",), "Colonoscopy")
    assert "truncated" in _reasons(result)["kvasir-dataset-v2/polyps/truncated.jpg"]


def test_kvasir_capsule_labels_boxes_groups(tmp_path):
    result = load_source("kvasir-capsule", kvasir_capsule.write(tmp_path))
    assert result.counts() == {"found": 6, "converted": 6, "quarantined": 0}
    s = _by_image(result)
    a, b = kvasir_capsule.VIDEO_A, kvasir_capsule.VIDEO_B
    angi = s[f"labelled_images/Angiectasia/{a}_2310.jpg"]
    assert angi.labels == ("angiectasia",) and angi.group_id == a and angi.frame == 2310
    assert [r.bbox for r in angi.regions] == [(101.0, 120.0, 161.0, 170.0)]
    assert angi.modality == "capsule_endoscopy" and angi.scene == "Capsule Endoscopy"
    erosion = s[f"labelled_images/Erosion/{b}_877.jpg"]  # two metadata rows, two boxes
    assert [r.bbox for r in erosion.regions] == [(10, 20, 60, 80), (200, 210, 250, 300)]
    ampulla = s[f"labelled_images/Ampulla of vater/{a}_1204.jpg"]  # folder 'vater', row 'Vater'
    assert ampulla.labels == ("ampulla of vater",) and ampulla.regions == ()
    assert ampulla.attributes == {"source_label": "Ampulla of vater", "finding_category": "Anatomy"}
    assert s[f"labelled_images/Normal clean mucosa/{b}_15.jpg"].regions == ()  # short row


def test_kvasir_capsule_quarantine(tmp_path):
    root = kvasir_capsule.write(tmp_path)
    write_jpeg(root / "labelled_images" / "Polyp" / "ffff_1.jpg", 1, size_wh=(336, 336))
    write_jpeg(root / "labelled_images" / "Ulcer" / "ffff_2.jpg", 2, size_wh=(336, 336))
    write_jpeg(root / "labelled_images" / "Ulcer" / "ffff_3.jpg", 3, size_wh=(336, 336))
    write_jpeg(root / "labelled_images" / "Erythema" / "ffff_4.jpg", 4, size_wh=(336, 336))
    with (root / "metadata.csv").open("a") as fh:
        fh.write("ffff_2.jpg;ffff;2;Luminal;Ulcer;10;10;400;10;400;50;10;50\n")  # outside
        fh.write("ffff_3.jpg;ffff;3;Luminal;Ulcer;10;10;;;;;;\n")  # incomplete corners
        fh.write("ffff_4.jpg;ffff;4;Luminal;Erosion;;;;;;;\n")  # listed under another class
        fh.write("gone_9.jpg;ffff;9;Luminal;Polyp;;;;;;;\n")  # no such file
    result = load_source("kvasir-capsule", root)
    # the Erosion row of ffff_4 matches no file in an Erosion folder: reported as well
    assert result.counts() == {"found": 12, "converted": 6, "quarantined": 6}
    assert _reasons(result) == {
        "labelled_images/Polyp/ffff_1.jpg": "image in folder 'Polyp' is listed in metadata.csv "
        "not at all",
        "labelled_images/Ulcer/ffff_2.jpg": "box [10.0, 10.0, 400.0, 50.0] lies outside the "
        "336x336 image",
        "labelled_images/Ulcer/ffff_3.jpg": "incomplete box corners "
        "['10', '10', '', '', '', '', '', ''] in metadata.csv",
        "labelled_images/Erythema/ffff_4.jpg": "image in folder 'Erythema' is listed in "
        "metadata.csv only as ['Erosion']",
        "labelled_images/ffff_4.jpg": "listed in metadata.csv (row 11, finding_class 'Erosion') "
        "but no such file under 'labelled_images'",
        "labelled_images/gone_9.jpg": "listed in metadata.csv (row 12, finding_class 'Polyp') "
        "but no such file under 'labelled_images'",
    }


def test_kvasir_capsule_wrong_separator_names_columns(tmp_path):
    root = kvasir_capsule.write(tmp_path)
    text = (root / "metadata.csv").read_text().replace(";", ",")
    (root / "metadata.csv").write_text(text)
    with pytest.raises(SourceError, match="metadata table lacks column") as err:
        load_source("kvasir-capsule", root)
    assert "separator" in str(err.value) and "';'" in str(err.value)


def test_gastrovision_joins_by_class_and_name(tmp_path):
    root = gastrovision.write(tmp_path)
    result = load_source("gastrovision", root)
    assert result.counts() == {"found": 7, "converted": 7, "quarantined": 0}
    s = _by_image(result)
    polyp, stomach = (
        s["Gastrovision/Colon polyps/100H0004.jpg"],
        s["Gastrovision/Normal stomach/100H0004.jpg"],
    )
    assert (polyp.labels, polyp.scene, polyp.width) == (("colon polyp",), "Colonoscopy", 68)
    assert (stomach.labels, stomach.scene, stomach.width) == (
        ("normal stomach",),
        "Gastroscopy",
        64,
    )
    assert polyp.sample_id != stomach.sample_id
    assert s["Gastrovision/Accessory tools/d0b335f1-1fab-46b5-bdcd-e6f721002e56.jpg"].scene is None


def test_gastrovision_size_mismatch_is_quarantined(tmp_path):
    root = gastrovision.write(tmp_path)
    write_jpeg(root / "Gastrovision" / "Pylorus" / "p1.jpg", 9, size_wh=(40, 30))
    with (root / "GastroVision_metadata.csv").open("a") as fh:
        fh.write("p1.jpg,Pylorus,768,576,12.5\n")
    result = load_source("gastrovision", root)
    assert _reasons(result) == {
        "Gastrovision/Pylorus/p1.jpg": "GastroVision_metadata.csv lists 768x576, the file is 40x30"
    }


def test_wcebleedgen_boxes_masks_and_labels(tmp_path):
    result = load_source("wcebleedgen", wcebleedgen.write(tmp_path))
    assert result.counts() == {"found": 4, "converted": 4, "quarantined": 0}
    s = _by_image(result)
    two = s["bleeding/Images/img- (2).png"]
    assert two.labels == ("bleeding",) and (two.width, two.height) == (224, 224)
    boxes = [r.bbox for r in two.regions if r.level == "box"]
    masks = [r for r in two.regions if r.mask is not None]
    assert boxes == [(100.0, 40.0, 140.0, 72.0), (150.0, 150.0, 200.0, 210.0)]
    assert sorted(r.bbox for r in masks) == sorted(boxes) and all(
        r.label == "bleeding" for r in masks
    )
    normal = s["non-bleeding/images/img- (1).png"]
    assert normal.labels == ("no bleeding",) and normal.regions == ()
    assert normal.attributes == {"source_label": "non-bleeding", "boxes": "0"}


def test_wcebleedgen_quarantine(tmp_path):
    root = wcebleedgen.write(tmp_path)
    (root / "bleeding" / "Annotations" / "ann- (2).png").unlink()
    rng = np.random.default_rng(0)
    write_png(
        root / "bleeding" / "Images" / "img- (3).png", rng.integers(0, 255, (224, 224, 3), np.uint8)
    )
    (root / "bleeding" / "Bounding boxes" / "YOLO_TXT" / "img- (3).txt").write_text(
        "0 0.9 0.5 0.4 0.2\n"
    )
    result = load_source("wcebleedgen", root)
    assert result.counts() == {"found": 5, "converted": 3, "quarantined": 2}
    reasons = _reasons(result)
    assert (
        reasons["bleeding/Images/img- (2).png"]
        == "mask bleeding/Annotations/ann- (2).png is missing"
    )
    assert reasons["bleeding/Images/img- (3).png"].startswith(
        "bleeding/Bounding boxes/YOLO_TXT/img- (3).txt line 1: "
        "box [156.8, 89.6, 246.4, 134.4] lies outside"
    )


def test_see_ai_labels_from_boxes(tmp_path):
    result = load_source("see-ai", see_ai.write(tmp_path))
    assert result.counts() == {"found": 3, "converted": 3, "quarantined": 0}
    one, two, three = result.samples
    assert (
        one.labels == ("erosion", "erythema")
        and one.attributes["source_label"] == "erosion|erythema"
    )
    assert [r.bbox for r in one.regions] == [(24.0, 16.0, 40.0, 32.0), (4.0, 4.0, 60.0, 60.0)]
    assert two.labels == ("polypoid lesion",)
    assert three.labels == () and three.regions == ()  # no txt file: no finding
    assert one.group_id.endswith("image00001")


def test_see_ai_unknown_class_and_bad_line(tmp_path):
    root = see_ai.write(tmp_path)
    txts = root / "SEE_AI_project_all_txt" / "SEE_AI_project_all_txt"
    (txts / "image00002.txt").write_text("12 0.5 0.5 0.1 0.1\n")
    (txts / "image00003.txt").write_text("1 0.5 0.5\n")
    result = load_source("see-ai", root)
    assert result.counts() == {"found": 3, "converted": 1, "quarantined": 2}
    prefix = "SEE_AI_project_all_txt/SEE_AI_project_all_txt"
    assert set(_reasons(result).values()) == {
        f"{prefix}/image00002.txt line 1: class id 12 is not in the manifest's class_names",
        f"{prefix}/image00003.txt line 1: expected 'class cx cy w h', got '1 0.5 0.5'",
    }


def test_yolo_to_xyxy_is_pixel_edges_and_snaps_rounding():
    assert yolo_to_xyxy(0.5, 0.5, 1.0, 1.0, 224, 224) == (0.0, 0.0, 224.0, 224.0)
    assert yolo_to_xyxy(0.25, 0.5, 0.5000001, 0.2, 100, 50) == (0.0, 20.0, 50.0, 30.0)

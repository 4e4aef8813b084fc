"""The box sources (EDD2020, LDPolypVideo, SEE-AI, WCEBleedGen, PSI-AVA) read as their owners
ship them (issue 23): box conventions, folder names and shapes seen in public loaders, and
label files that leave a value out (empty files, missing markers, ``-1``, empty lists) keep
the sample, drop that label only and count it."""

import json
import shutil

import numpy as np
import pytest

from medvqa_build.api import load_source
from medvqa_build.tasks.counting import LesionCounting

from ...fixtures.images import write_png
from ...fixtures.polyp_masks import write_image
from ...fixtures.sources import edd2020, ldpolypvideo, psi_ava, see_ai, wcebleedgen


def _by_image(result):
    return {s.image: s for s in result.samples}


def _missing(result):
    return result.counts_detail["labels_missing"]


def _adds_up(result):
    assert result.found == len(result.samples) + len(result.quarantined)


# --- EDD2020 (txt_boxes) ---------------------------------------------------------------------


def test_edd2020_boxes_are_one_based_with_the_last_pixel_inside(tmp_path):
    """The owners' extractBboxFromMask writes min+1 and max+1 of the mask's pixels: the line
    "5 5 30 20 BE" is the pixel-edge box [4, 4, 30, 20], and a box keeps all of its class
    mask's pixels (the first row and column too)."""
    root = edd2020.write(tmp_path)
    assert (root / "bbox" / "EDD2020_ACB0001.txt").read_text().startswith("5 5 30 20 BE\n")
    result = load_source("edd2020", root)
    assert not result.quarantined
    first, polyps, _ = result.samples
    be, suspicious = first.regions
    assert be.bbox == (4.0, 4.0, 30.0, 20.0) and suspicious.bbox == (36.0, 24.0, 60.0, 44.0)
    assert sum(suspicious.mask.counts[1::2]) == 24 * 20  # the whole mask rectangle
    assert [sum(r.mask.counts[1::2]) for r in polyps.regions] == [18 * 18, 16 * 20]


def test_edd2020_release_i_folder_gives_the_same_ids(tmp_path):
    """The first release unpacked to EDD2020_release-I_2020-01-15/ (third-party loaders)."""
    expected = [s.sample_id for s in load_source("edd2020", edd2020.write(tmp_path / "a")).samples]
    base = edd2020.write(tmp_path / "b")
    release = tmp_path / "b" / "EDD2020" / "EDD2020_release-I_2020-01-15"
    release.parent.mkdir()
    base.rename(release)
    for given in (release, release.parent, tmp_path / "b"):
        assert [s.sample_id for s in load_source("edd2020", given).samples] == expected


@pytest.mark.parametrize("text", ["", "\n\n", "5 5 20 20 nan\n"])
def test_edd2020_box_file_without_a_value_keeps_the_image(tmp_path, text):
    root = edd2020.write(tmp_path)
    write_image(root / "originalImages" / "EDD2020_ACB0009.jpg", 9, (64, 48))
    (root / "bbox" / "EDD2020_ACB0009.txt").write_text(text)
    result = load_source("edd2020", root)
    _adds_up(result)
    assert not result.quarantined and len(result.samples) == 4
    kept = _by_image(result)["originalImages/EDD2020_ACB0009.jpg"]
    assert kept.labels == () and kept.regions == () and "box_count" not in kept.attributes
    assert _missing(result) == {"boxes": 1}
    assert result.counts_detail["samples_missing_labels"] == 1
    assert _by_image(result)["originalImages/EDD2020_ACB0002.jpg"].attributes["box_count"] == "2"


def test_edd2020_one_box_left_out_keeps_the_others(tmp_path):
    root = edd2020.write(tmp_path)
    bbox = root / "bbox" / "EDD2020_ACB0002.txt"
    bbox.write_text(bbox.read_text() + "1 1 4 4 NA\n")
    result = load_source("edd2020", root)
    two = result.samples[1]
    assert [r.label for r in two.regions] == ["polyp", "polyp"]
    assert "box_count" not in two.attributes  # the count is not the image's any more
    assert _missing(result) == {"boxes": 1}


# --- LDPolypVideo (txt_boxes) ----------------------------------------------------------------


def test_ldpolypvideo_google_drive_copy_names_the_training_folder_trainvalid(tmp_path):
    """cosmoimd/polyp_detection_platform reads LDPolypVideo/TrainValid/{Images,Annotations}
    and LDPolypVideo/Test/... from the Google Drive download."""
    data = ldpolypvideo.write(tmp_path / "downloads" / "LDPolypVideo", train_folder="TrainValid")
    for given in (data, data.parent):
        result = load_source("ldpolypvideo", given)
        assert result.resolution.found == ["train", "test"] and not result.quarantined
        samples = _by_image(result)
        two = samples["TrainValid/Images/1/2.jpg"]
        assert two.split == "train" and two.attributes["polyp_count"] == "2"
        assert two.group_id == "TrainValid/Images/1"
        assert samples["Test/Images/1/1.jpg"].split == "test"
        assert len(result.samples) == 4


@pytest.mark.parametrize("text", ["", "NaN\n", " \n"])
def test_ldpolypvideo_annotation_without_a_count_keeps_the_frame(tmp_path, text):
    root = ldpolypvideo.write(tmp_path)
    (root / "Train" / "Annotations" / "1" / "2.txt").write_text(text)
    result = load_source("ldpolypvideo", root)
    _adds_up(result)
    assert not result.quarantined
    frames = _by_image(result)
    unknown = frames["Train/Images/1/2.jpg"]
    assert unknown.regions == () and "polyp_count" not in unknown.attributes
    assert unknown.split == "train" and unknown.attributes["video"] == "1"
    assert frames["Train/Images/1/3.jpg"].attributes["polyp_count"] == "0"  # a real 0
    assert _missing(result) == {"boxes": 1}


def test_ldpolypvideo_missing_count_with_boxes_is_contradictory(tmp_path):
    root = ldpolypvideo.write(tmp_path)
    (root / "Train" / "Annotations" / "1" / "2.txt").write_text("nan\n4 4 14 14\n")
    result = load_source("ldpolypvideo", root)
    assert {q.file: q.reason for q in result.quarantined} == {
        "Train/Images/1/2.jpg": "box file has no count ('nan') but lists 1"
    }
    assert _missing(result) == {}


# --- SEE-AI (yolo_boxes) ---------------------------------------------------------------------


def test_see_ai_empty_txt_is_a_normal_frame_and_boxes_without_a_value_are_left_out(tmp_path):
    root = see_ai.write(tmp_path)
    txts = root / "SEE_AI_project_all_txt" / "SEE_AI_project_all_txt"
    (txts / "image00003.txt").write_text("")  # a normal frame: YOLO's background image
    (txts / "image00002.txt").write_text(
        "6 0.250000 0.250000 0.125000 0.250000\n"
        "6 0.500000 0.500000 0.000000 0.000000\n"  # zero-size: left out
        "nan 0.5 0.5 0.1 0.1\n"  # no class: left out
    )
    result = load_source("see-ai", root)
    _adds_up(result)
    assert not result.quarantined
    one, two, three = result.samples
    assert three.labels == () and three.regions == () and three.attributes["boxes"] == "0"
    assert two.labels == ("polypoid lesion",) and len(two.regions) == 1
    assert "boxes" not in two.attributes
    assert _missing(result) == {"boxes": 2}
    assert "source_label" not in three.attributes  # no empty attribute for a normal frame


# --- WCEBleedGen (yolo_boxes) ----------------------------------------------------------------


def test_wcebleedgen_box_carries_its_mask_and_a_lesion_is_counted_once(tmp_path):
    """The YOLO boxes were drawn around the bleeding masks (the owners'
    Binary_mask_to_bounding_box.py): one region per box, with the mask inside it."""
    root = wcebleedgen.write(tmp_path)
    assert root.name == "WCEBleedGen"
    result = load_source("wcebleedgen", root)
    two = _by_image(result)["bleeding/Images/img- (2).png"]
    assert [r.bbox for r in two.regions] == [
        (100.0, 40.0, 140.0, 72.0),
        (150.0, 150.0, 200.0, 210.0),
    ]
    assert [sum(r.mask.counts[1::2]) for r in two.regions] == [40 * 32, 50 * 60]
    assert all(r.level == "box" and r.label == "bleeding" for r in two.regions)
    assert LesionCounting({"max_count": 4}).count(two) == 2


def test_wcebleedgen_owner_loader_folder_names_convert(tmp_path):
    """The owners' loaders read non-bleeding/Images and Annotations (Linux loaders of the
    archive: images, annotation): either converts, with the same frames."""
    root = wcebleedgen.write(tmp_path)
    nb = root / "non-bleeding"
    (nb / "images").rename(nb / "Images")
    (nb / "annotation").rename(nb / "Annotations")
    result = load_source("wcebleedgen", root)
    assert result.resolution.found == ["bleeding", "non-bleeding"] and not result.quarantined
    normal = _by_image(result)["non-bleeding/Images/img- (1).png"]
    assert normal.labels == ("no bleeding",) and normal.regions == ()


@pytest.mark.parametrize("text", ["", "0 0.0 0.0 0.0 0.0\n"])
def test_wcebleedgen_bleeding_frame_without_a_box_keeps_label_and_mask(tmp_path, text):
    """An empty YOLO file, or the zero-size box the owners' tool writes for an empty mask,
    leaves the boxes out: the frame is still bleeding and keeps its mask's regions."""
    root = wcebleedgen.write(tmp_path)
    (root / "bleeding" / "Bounding boxes" / "YOLO_TXT" / "img- (1).txt").write_text(text)
    result = load_source("wcebleedgen", root)
    _adds_up(result)
    assert not result.quarantined
    one = _by_image(result)["bleeding/Images/img- (1).png"]
    assert one.labels == ("bleeding",) and "boxes" not in one.attributes
    assert [r.bbox for r in one.regions] == [(20.0, 30.0, 80.0, 90.0)]  # from the mask
    assert one.regions[0].mask is not None and one.regions[0].level is None
    assert _missing(result) == {"boxes": 1}


def test_wcebleedgen_missing_non_bleeding_masks_are_not_required(tmp_path):
    root = wcebleedgen.write(tmp_path)
    shutil.rmtree(root / "non-bleeding" / "annotation")
    result = load_source("wcebleedgen", root)
    assert result.resolution.found == ["bleeding", "non-bleeding"] and not result.quarantined


def test_wcebleedgen_other_png_mask_values_threshold_at_half_range(tmp_path):
    root = wcebleedgen.write(tmp_path)
    mask = np.zeros((224, 224), np.uint8)
    mask[30:90, 20:80] = 200  # not 255: any value above half range is bleeding
    write_png(root / "bleeding" / "Annotations" / "ann- (1).png", mask)
    one = _by_image(load_source("wcebleedgen", root))["bleeding/Images/img- (1).png"]
    assert sum(one.regions[0].mask.counts[1::2]) == 60 * 60


# --- PSI-AVA (coco_json) ---------------------------------------------------------------------


def _as_shipped(outputs, downloads, repo="TAPIR"):
    """PSI-AVA.tar.gz unpacked (PSI-AVA/keyframes) beside the TAPIR repository
    (<repo>/outputs/data_annotations), nothing moved."""
    (downloads / "PSI-AVA").mkdir(parents=True)
    shutil.move(outputs / "PSIAVA" / "keyframes", downloads / "PSI-AVA" / "keyframes")
    (downloads / repo / "outputs").mkdir(parents=True)
    shutil.move(outputs / "data_annotations", downloads / repo / "outputs" / "data_annotations")


@pytest.mark.parametrize("repo", ["TAPIR", "TAPIR-main"])
def test_psi_ava_archive_and_repository_side_by_side(tmp_path, repo):
    expected = load_source("psi-ava", psi_ava.write(tmp_path / "outputs"))
    ids = [s.sample_id for s in expected.samples]
    downloads = tmp_path / "downloads"
    _as_shipped(psi_ava.write(tmp_path / "shipped"), downloads, repo)
    for given in (downloads, downloads / "PSI-AVA"):
        result = load_source("psi-ava", given)
        assert result.resolution.root == downloads
        assert [s.sample_id for s in result.samples] == ids and not result.quarantined
        first = result.samples[0]
        assert first.image.startswith("PSI-AVA/keyframes/CASE")
        assert (downloads / first.image).is_file()
        assert [s.attributes for s in result.samples] == [s.attributes for s in expected.samples]


def test_psi_ava_keyframe_without_annotations_leaves_phase_and_step_out(tmp_path):
    """CASE021/02900 has no instrument annotation (as 11 fold1 and 56 fold2 keyframes do):
    phase and step are only on annotations, so both are left out and counted."""
    result = load_source("psi-ava", psi_ava.write(tmp_path))
    empty = _by_image(result)["PSIAVA/keyframes/CASE021/02900.jpg"]
    assert empty.regions == () and "phase" not in empty.attributes
    assert _missing(result) == {"phase": 1, "step": 1}
    assert result.counts_detail["samples_missing_labels"] == 1


def test_psi_ava_minus_one_null_and_empty_lists_drop_that_label_only(tmp_path):
    root = psi_ava.write(tmp_path)
    fold1 = root / "data_annotations/psi-ava/fold1/coco_anns/val_coco_anns_v3_35s.json"
    data = json.loads(fold1.read_text())
    first, second, third = data["annotations"][:3]
    first["actions"] = []  # region 0 of CASE021/00001: no action
    second["actions"] = [-1, 1]  # the AVA csv's padding in a list
    third["phase"] = -1  # CASE021/02865's only annotation: phase unknown
    third["step"] = None
    fold1.write_text(json.dumps(data))
    fold2 = root / "data_annotations/psi-ava/fold2/coco_anns/val_coco_anns_v3_35s.json"
    data = json.loads(fold2.read_text())
    data["annotations"][0]["category_id"] = None  # a box without its instrument
    fold2.write_text(json.dumps(data))
    result = load_source("psi-ava", root)
    _adds_up(result)
    assert not result.quarantined and len(result.samples) == 4
    s = _by_image(result)
    one = s["PSIAVA/keyframes/CASE021/00001.jpg"]
    assert "region0.actions" not in one.attributes
    assert one.attributes["region1.actions"] == "cauterize"
    assert one.attributes["actions"] == "cauterize"
    assert one.attributes["phase"] == "developing the space of retzius"  # others kept
    other = s["PSIAVA/keyframes/CASE021/02865.jpg"]
    assert "phase" not in other.attributes and "step" not in other.attributes
    assert [r.label for r in other.regions] == ["laparoscopic grasper"]
    fold2_image = s["PSIAVA/keyframes/CASE015/00036.jpg"]
    assert [r.label for r in fold2_image.regions] == ["monopolar curved scissors"]
    assert fold2_image.attributes["region0.actions"] == "open,travel"
    assert fold2_image.attributes["phase"] == "right pelvic isolated lymphadenectomy"
    assert _missing(result) == {"actions": 1, "phase": 2, "step": 2, "category_id": 1}


def test_psi_ava_a_part_whose_annotations_are_missing_is_reported(tmp_path):
    root = psi_ava.write(tmp_path)
    shutil.rmtree(root / "data_annotations" / "psi-ava" / "fold2")
    result = load_source("psi-ava", root)
    assert result.resolution.found == ["fold1"] and "fold2" in result.resolution.missing
    assert {s.split for s in result.samples} == {"fold1"}

"""Polyp sources on tiny replicas: labels, boxes, groups, counts and quarantine reasons."""

import json

import pytest

from medvqa_build.api import load_source
from medvqa_build.errors import SourceError

from ...fixtures.polyp_masks import write_image, write_mask
from ...fixtures.sources import (
    cvc_300,
    cvc_clinicdb,
    cvc_colondb,
    edd2020,
    etis_larib,
    hyperkvasir,
    kvasir_seg,
    ldpolypvideo,
    polypgen,
)


def _quarantined(result):
    return {q.file: q.reason for q in result.quarantined}


def test_kvasir_seg_regions_boxes_and_quarantine(tmp_path):
    root = kvasir_seg.write(tmp_path)
    boxes = json.loads((root / "kavsir_bboxes.json").read_text())
    write_image(root / "images" / "wrongsize.jpg", 7, (64, 48))
    write_mask(root / "masks" / "wrongsize.jpg", (32, 32), [(2, 2, 10, 10)])
    boxes["wrongsize"] = {"height": 48, "width": 64, "bbox": []}
    write_image(root / "images" / "farbox.jpg", 8, (64, 48))
    write_mask(root / "masks" / "farbox.jpg", (64, 48), [(2, 2, 10, 10)])
    boxes["farbox"] = {
        "height": 48,
        "width": 64,
        "bbox": [{"label": "polyp", "xmin": 2, "ymin": 2, "xmax": 90, "ymax": 10}],
    }
    write_image(root / "images" / "nomask.jpg", 9, (64, 48))
    boxes["nomask"] = {"height": 48, "width": 64, "bbox": []}
    write_image(root / "images" / "unlisted.jpg", 10, (64, 48))
    write_mask(root / "masks" / "unlisted.jpg", (64, 48), [(2, 2, 10, 10)])
    (root / "kavsir_bboxes.json").write_text(json.dumps(boxes))

    result = load_source("kvasir-seg", root)
    assert result.counts() == {"found": 7, "converted": 3, "quarantined": 4}
    assert _quarantined(result) == {
        "images/wrongsize.jpg": "mask wrongsize.jpg is 32x32, image is 64x48",
        "images/farbox.jpg": "box [2.0, 2.0, 90.0, 10.0] lies outside the 64x48 image",
        "images/nomask.jpg": "mask masks/nomask.jpg is missing",
        "images/unlisted.jpg": "image not listed in kavsir_bboxes.json",
    }
    two = next(s for s in result.samples if s.image == "images/cju0qoxqj9q6s0835b43399p4.jpg")
    assert two.labels == ("polyp",) and two.scene == "Colonoscopy"
    assert [r.bbox for r in two.regions] == [(40.0, 28.0, 58.0, 44.0), (4.0, 4.0, 14.0, 12.0)]
    assert all(r.label == "polyp" and r.mask.counts for r in two.regions)
    assert two.attributes["box_count"] == "2" and two.attributes["source_label"] == "polyp"
    assert json.loads(two.attributes["source_boxes"]) == [[4, 4, 14, 12], [40, 28, 58, 44]]
    assert two.sample_id == "kvasir-seg:images/cju0qoxqj9q6s0835b43399p4"


def test_kvasir_seg_accepts_parent_folder_and_names_the_layout(tmp_path):
    kvasir_seg.write(tmp_path)
    ids = [
        s.sample_id for s in load_source("kvasir-seg", tmp_path).samples
    ]  # parent of Kvasir-SEG/
    assert len(ids) == 3
    # ROOT pointed inside the dataset (its images/ folder): the root is found above it
    inside = load_source("kvasir-seg", tmp_path / "Kvasir-SEG" / "images")
    assert [s.sample_id for s in inside.samples] == ids
    with pytest.raises(SourceError, match=r"found none of its parts \(polyps: .*images/, .*masks/"):
        load_source("kvasir-seg", (tmp_path / "elsewhere").mkdir() or tmp_path / "elsewhere")


def test_cvc_clinicdb_groups_are_sequences(tmp_path):
    root = cvc_clinicdb.write(tmp_path)
    write_image(root / "Original" / "999.tif", 1, (48, 36))
    write_mask(root / "Ground Truth" / "999.tif", (48, 36), [(1, 1, 9, 9)])
    result = load_source("cvc-clinicdb", root)
    groups = {s.image: s.group_id for s in result.samples}
    assert groups == {
        "Original/1.tif": "seq01",
        "Original/2.tif": "seq01",
        "Original/26.tif": "seq02",
    }
    assert _quarantined(result) == {
        "Original/999.tif": "image number '999' is in none of the manifest's group_ranges"
    }
    s = result.samples[0]
    assert (s.width, s.height) == (48, 36) and s.regions[0].bbox == (8.0, 6.0, 30.0, 24.0)


def test_pranet_bundle_root_is_read_for_all_four(tmp_path):
    # TestDataset/ holds one folder per set; each source finds its own sub-folder.
    cvc_colondb.write(tmp_path)
    cvc_300.write(tmp_path)
    bundle = tmp_path / "TestDataset"
    for name in ("CVC-ClinicDB", "ETIS-LaribPolypDB"):
        write_image(bundle / name / "images" / "5.png", 5, (40, 30))
        write_mask(bundle / name / "masks" / "5.png", (40, 30), [(3, 3, 20, 20)])
    counts = {
        sid: len(load_source(sid, bundle).samples)
        for sid in ("cvc-colondb", "cvc-300", "cvc-clinicdb", "etis-larib")
    }
    assert counts == {"cvc-colondb": 3, "cvc-300": 2, "cvc-clinicdb": 1, "etis-larib": 1}
    colon = load_source("cvc-colondb", bundle)
    assert [len(s.regions) for s in colon.samples] == [1, 2, 1]
    # the root is the set's own folder whichever folder above it was passed: the same ids
    assert colon.samples[0].group_id == "images/1"
    assert colon.root == bundle / "CVC-ColonDB"


def test_etis_masks_are_p_prefixed_and_missing_ones_quarantined(tmp_path):
    root = etis_larib.write(tmp_path)
    write_image(root / "ETIS-LaribPolypDB" / "3.tif", 3, (64, 48))
    result = load_source("etis-larib", root)
    assert len(result.samples) == 2 and len(result.samples[1].regions) == 2
    assert _quarantined(result) == {"ETIS-LaribPolypDB/3.tif": "mask GroundTruth/p3.tif is missing"}


def test_hyperkvasir_labels_scenes_and_segmented_part(tmp_path):
    root = hyperkvasir.write(tmp_path)
    result = load_source("hyperkvasir", root)
    assert result.counts() == {"found": 25, "converted": 25, "quarantined": 0}
    by_label = {s.labels[0]: s for s in result.samples if s.image.startswith("labeled-images/")}
    assert len(by_label) == 23
    grade = by_label["ulcerative colitis grade 2-3"]
    assert grade.scene == "Colonoscopy" and grade.attributes == {
        "source_label": "ulcerative-colitis-grade-2-3",
        "tract": "lower-gi-tract",
        "category": "pathological-findings",
    }
    assert by_label["esophagitis grade b-d"].scene == "Gastroscopy"
    assert by_label["bbps 0-1"].attributes["category"] == "quality-of-mucosal-views"
    seg = [s for s in result.samples if s.image.startswith("segmented-images/")]
    assert [len(s.regions) for s in seg] == [1, 2] and all(s.scene == "Colonoscopy" for s in seg)


def test_edd2020_boxes_class_masks_and_quarantine(tmp_path):
    root = edd2020.write(tmp_path)
    write_image(root / "originalImages" / "EDD2020_ACB0009.jpg", 9, (64, 48))
    (root / "bbox" / "EDD2020_ACB0009.txt").write_text("40 30 70 40 polyp\n")  # x2 > width
    write_image(root / "originalImages" / "EDD2020_ACB0010.jpg", 10, (64, 48))
    (root / "bbox" / "EDD2020_ACB0010.txt").write_text("4 4 20 20 BE\n")
    write_mask(root / "masks" / "EDD2020_ACB0010_BE.tif", (32, 32), [(4, 4, 20, 20)])
    write_image(root / "originalImages" / "EDD2020_ACB0011.jpg", 11, (64, 48))  # no bbox file
    write_image(root / "originalImages" / "EDD2020_ACB0012.jpg", 12, (64, 48))
    (root / "bbox" / "EDD2020_ACB0012.txt").write_text("4 4 20 20 Barretts\n")
    result = load_source("edd2020", root)
    assert result.counts() == {"found": 7, "converted": 3, "quarantined": 4}
    assert {k.split("/")[1]: v for k, v in _quarantined(result).items()} == {
        # VOC line "40 30 70 40" (1-based, max inclusive) is the pixel-edge box [39, 29, 70, 40]
        "EDD2020_ACB0009.jpg": "box [39.0, 29.0, 70.0, 40.0] lies outside the 64x48 image",
        "EDD2020_ACB0010.jpg": "mask EDD2020_ACB0010_BE.tif is 32x32, image is 64x48",
        "EDD2020_ACB0011.jpg": "box file bbox/EDD2020_ACB0011.txt is missing",
        "EDD2020_ACB0012.jpg": "label 'Barretts' is not in the manifest's label_map",
    }
    first = result.samples[0]
    assert first.labels == ("barrett's esophagus", "suspicious area")
    assert first.scene == "Gastroscopy" and first.attributes["source_label"] == "BE|suspicious"
    be, suspicious = first.regions
    assert be.bbox == (4.0, 4.0, 30.0, 20.0) and be.mask is None  # no BE mask file
    assert suspicious.mask is not None and suspicious.mask.size_hw == (48, 64)
    polyps = result.samples[1].regions
    assert [r.bbox for r in polyps] == [(10.0, 8.0, 28.0, 26.0), (34.0, 10.0, 50.0, 30.0)]
    # each box keeps only its own pixels of the shared class mask
    assert sum(polyps[0].mask.counts[1::2]) == 18 * 18


def test_ldpolypvideo_counts_groups_splits_and_bad_files(tmp_path):
    root = ldpolypvideo.write(tmp_path)
    frames = root / "Train" / "Images" / "1"
    notes = root / "Train" / "Annotations" / "1"
    write_image(frames / "4.jpg", 4, (56, 48))
    (notes / "4.txt").write_text("2\n1 1 10 10\n")
    write_image(frames / "5.jpg", 5, (56, 48))
    (notes / "5.txt").write_text("1\n1 1 10 90\n")
    write_image(root / "Train" / "Images" / "2" / "xx_yy_7.jpg", 7, (56, 48))  # prefixed copy
    (root / "Train" / "Annotations" / "2").mkdir()
    (root / "Train" / "Annotations" / "2" / "7.txt").write_text("0\n")
    result = load_source("ldpolypvideo", root)
    assert _quarantined(result) == {
        "Train/Images/1/4.jpg": "box file says 2 box(es) but lists 1",
        "Train/Images/1/5.jpg": "box [1.0, 1.0, 10.0, 90.0] lies outside the 56x48 image",
    }
    samples = {s.image: s for s in result.samples}
    two = samples["Train/Images/1/2.jpg"]
    assert two.attributes["polyp_count"] == "2" and two.labels == ("polyp",)
    assert two.split == "train" and samples["Test/Images/1/1.jpg"].split == "test"
    assert two.group_id == "Train/Images/1" and two.attributes["video"] == "1"
    assert samples["Train/Images/1/3.jpg"].labels == ()
    assert samples["Train/Images/2/xx_yy_7.jpg"].attributes["polyp_count"] == "0"
    assert samples["Test/Images/1/1.jpg"].group_id != two.group_id


def test_polypgen_centres_sequences_and_negatives(tmp_path):
    root = polypgen.write(tmp_path)
    bad = root / "data_C2"
    write_image(bad / "images_C2" / "EndoCV2021_009999.jpg", 99, (64, 48))  # mask missing
    result = load_source("polypgen", root)
    assert result.counts() == {"found": 11, "converted": 10, "quarantined": 1}
    assert _quarantined(result) == {
        "data_C2/images_C2/EndoCV2021_009999.jpg": "mask data_C2/masks_C2/EndoCV2021_009999_mask.jpg is missing"  # noqa: E501
    }
    samples = {s.image: s for s in result.samples}
    trailing = samples["data_C3/images_C3/C3_EndoCV2021_00489_.jpg"]
    assert trailing.attributes["centre"] == "C3" and len(trailing.regions) == 1
    negative = samples["data_C1/images_C1/100H0051.jpg"]
    assert negative.labels == () and negative.regions == ()
    assert "source_label" not in negative.attributes
    seq = [s for s in result.samples if "/positive/" in s.image]
    assert {s.group_id for s in seq} == {"sequenceData/positive/seq1/images_seq1"}
    neg = samples["sequenceData/negativeOnly/seq1_neg/seq1_neg_0001.jpg"]
    assert neg.group_id == "sequenceData/negativeOnly/seq1_neg" and neg.labels == ()
    assert neg.attributes["kind"] == "negative sequence"

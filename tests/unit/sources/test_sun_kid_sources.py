"""SUN (SUN-SEG) and KID on tiny replicas: pathology join, case groups, splits, quarantine."""

import pytest

from medvqa_build.api import load_source
from medvqa_build.errors import SourceError

from ...fixtures.polyp_masks import write_image, write_mask
from ...fixtures.sources import kid, sun


def _quarantined(result):
    return {q.file: q.reason for q in result.quarantined}


def test_sun_pathology_groups_and_splits(tmp_path):
    root = sun.write(tmp_path)
    result = load_source("sun", root)
    assert result.counts() == {"found": 7, "converted": 7, "quarantined": 0}
    by_split = {}
    for s in result.samples:
        by_split.setdefault(s.split, []).append(s)
    assert sorted(by_split) == [
        "test_easy_seen",
        "test_easy_unseen",
        "test_hard_seen",
        "test_hard_unseen",
        "train",
    ]
    train = sorted(by_split["train"], key=lambda s: s.image)
    assert [s.group_id for s in train] == ["case1", "case1", "case2"]
    first = train[0]
    assert first.labels == ("low-grade adenoma",) and first.scene == "Colonoscopy"
    assert first.attributes == {"source_label": "low_grade_adenoma"}
    assert first.regions[0].label == "low-grade adenoma"
    assert first.regions[0].bbox == (10.0, 10.0, 30.0, 30.0)
    # the Seen test clip of case 1 shares its group with the training clips of case 1
    assert by_split["test_easy_seen"][0].group_id == "case1"
    (hard,) = by_split["test_hard_unseen"]
    assert hard.group_id == "case4" and len(hard.regions) == 2
    assert hard.labels == ("sessile serrated lesion",)


def test_sun_quarantines_unlisted_unknown_and_maskless_frames(tmp_path):
    root = sun.write(tmp_path)
    frame = root / "TrainDataset" / "Frame" / "case5_1"
    gt = root / "TrainDataset" / "GT" / "case5_1"
    for stem in ("a", "b", "c"):
        write_image(frame / f"{stem}.jpg", 1, sun.SIZE_WH)
    write_mask(gt / "a.png", sun.SIZE_WH, [(2, 2, 10, 10)])  # not in classification.txt
    write_mask(gt / "b.png", sun.SIZE_WH, [(2, 2, 10, 10)])  # label unknown
    table = root / "TrainDataset" / "Classification" / "classification.txt"
    rows = "case5_1/b.jpg\tnon_polyp\ncase5_1/c.jpg\tlow_grade_adenoma\n"
    table.write_text(table.read_text() + rows)
    result = load_source("sun", root)
    assert _quarantined(result) == {
        "TrainDataset/Frame/case5_1/b.jpg": "label 'non_polyp' is not in the manifest's label_map",
        "TrainDataset/Frame/case5_1/c.jpg": "mask TrainDataset/GT/case5_1/c.png is missing",
    }
    # a frame the table does not list keeps its mask; its pathology is counted as left out
    unlisted = next(s for s in result.samples if s.image == "TrainDataset/Frame/case5_1/a.jpg")
    assert unlisted.labels == () and [r.label for r in unlisted.regions] == ["polyp"]
    assert result.counts_detail["labels_missing"] == {"pathology": 1}


def test_sun_stem_keys_and_missing_table(tmp_path):
    root = sun.write(tmp_path)
    table = root / "TrainDataset" / "Classification" / "classification.txt"
    # rows naming "<clip>/<stem>" (no extension) are read too
    table.write_text(table.read_text().replace(".jpg\t", "\t"))
    assert not load_source("sun", root).quarantined
    table.unlink()
    # no table: the frames are kept with their masks, every pathology counted as left out
    result = load_source("sun", root)
    assert result.counts() == {"found": 7, "converted": 7, "quarantined": 0}
    assert result.counts_detail["labels_missing"] == {"pathology": 3}


def test_sun_bad_table_line_is_named(tmp_path):
    root = sun.write(tmp_path)
    table = root / "TrainDataset" / "Classification" / "classification.txt"
    table.write_text("case1_1/x.jpg low grade adenoma\n")
    with pytest.raises(SourceError, match="line 1 of the label table has 4 fields"):
        load_source("sun", root)


def test_kid_lesions_organs_and_quarantine(tmp_path):
    root = kid.write(tmp_path)
    write_image(root / "vascular" / "9.png", 9, kid.SIZE_WH)  # mask missing
    write_image(root / "inflammatory" / "9.png", 10, kid.SIZE_WH)
    write_mask(root / "inflammatory-annotations" / "9m.png", (20, 20), [(2, 2, 8, 8)])
    result = load_source("kid", root)
    assert result.counts() == {"found": 12, "converted": 10, "quarantined": 2}
    assert _quarantined(result) == {
        "vascular/9.png": "mask vascular-annotations/9m.png is missing",
        "inflammatory/9.png": "mask 9m.png is 20x20, image is 36x36",
    }
    labels = {s.image: s.labels for s in result.samples}
    assert labels["normal-small-bowel/2.png"] == ("small intestine",)
    assert labels["normal-colon/1.png"] == ("large intestine",)
    assert labels["ampulla-of-vater/1.png"] == ("ampulla of vater",)
    two = next(s for s in result.samples if s.image == "vascular/2.png")
    assert [r.label for r in two.regions] == ["vascular lesion", "vascular lesion"]
    assert two.scene == "Capsule Endoscopy" and two.modality == "capsule_endoscopy"


def test_kid_reads_plural_polypoids_and_masks_beside_images(tmp_path):
    root = kid.write(tmp_path)
    (root / "polypoid").rename(root / "polypoids")
    (root / "polypoid-annotations").rename(root / "polypoids-annotations")
    for mask in sorted((root / "vascular-annotations").iterdir()):
        mask.rename(root / "vascular" / mask.name)
    (root / "vascular-annotations").rmdir()
    result = load_source("kid", root)
    assert not result.quarantined
    images = sorted(s.image for s in result.samples)
    assert "polypoids/1.png" in images and "vascular/2m.png" not in images
    assert len(next(s for s in result.samples if s.image == "vascular/2.png").regions) == 2

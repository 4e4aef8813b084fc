"""The pre-sliced 2-D corpus reader (``presliced_pairs``, source sa-med2d-20m): modality and
slice from the image name, one region per mask file named through the class map, union
classes left out, groups per dataset case, and the quarantine reasons."""

import numpy as np
import pytest

from medvqa_build.api import load_source
from medvqa_build.errors import SourceError
from medvqa_build.geometry import rle_decode

from ...fixtures.images import write_png
from ...fixtures.sources import sa_med2d_20m as corpus


def test_names_become_modality_slice_and_structures(tmp_path):
    result = load_source("sa-med2d-20m", corpus.write(tmp_path))
    by_id = {s.sample_id: s for s in result.samples}
    ct = by_id["sa-med2d-20m:ct_00--AbdomenCT1K--Case_00011--x_0041"]
    assert ct.modality == "ct" and ct.group_id == "AbdomenCT1K/Case_00011"
    assert (ct.attributes["slice_axis"], ct.attributes["slice_index"]) == ("x", "41")
    assert [r.label for r in ct.regions] == ["liver", "kidney", "kidney"]  # two instances
    assert ct.regions[2].bbox == (36.0, 24.0, 42.0, 34.0)  # x2/y2 exclusive
    mask = rle_decode(ct.regions[2].mask.size_hw, ct.regions[2].mask.counts)
    assert mask.sum() == 6 * 10 and ct.regions[2].mask.path.endswith("--0001_001.png")
    mr = by_id["sa-med2d-20m:mr_t1--BraTS2021--BraTS2021_00000--z_0077"]
    assert mr.modality == "mri" and mr.attributes["sequence"] == "t1"
    assert "union_tumor core" not in mr.labels and len(mr.regions) == 2
    us = by_id["sa-med2d-20m:ultrasound_00--CAMUS--patient0001_2CH_ED--x_0000"]
    assert us.modality == "ultrasound" and "sequence" not in us.attributes


def test_bad_slices_are_quarantined(tmp_path):
    root = corpus.write(tmp_path) / corpus.FOLDER
    stem = "ct_00--AbdomenCT1K--Case_00011--x_0040"
    write_png(root / "masks" / f"{stem}--0009_000.png", np.full(corpus.SIZE_HW, 255, np.uint8))
    write_png(root / "images" / "pet_00--X--c1--z_0001.png", np.zeros((8, 8), np.uint8))
    write_png(root / "images" / "oct_00--X--c1--z_0001.png", np.zeros((8, 8), np.uint8))
    small = "mr_t1--BraTS2021--BraTS2021_00000--z_0077"
    write_png(root / "masks" / f"{small}--0000_000.png", np.full((4, 4), 255, np.uint8))
    write_png(root / "images" / "notes.png", np.zeros((8, 8), np.uint8))
    result = load_source("sa-med2d-20m", root)
    reasons = {q.file: q.reason for q in result.quarantined}
    assert result.found == 8 and len(result.samples) == 4
    assert "class 9" in reasons[f"images/{stem}.png"]
    assert "no mask file" in reasons["images/pet_00--X--c1--z_0001.png"]
    assert (
        "'oct_00' is not in the manifest's modality_map"
        in reasons["images/oct_00--X--c1--z_0001.png"]
    )
    # a mask of another size is left out and counted; the slice keeps its other masks
    kept = next(x for x in result.samples if x.image == f"images/{small}.png")
    assert kept.labels == ("enhancing tumor",)
    assert result.counts_detail["labels_missing"] == {"mask (size differs from its image)": 1}
    assert "does not match" in reasons["images/notes.png"]


def test_missing_masks_folder_names_the_layout(tmp_path):
    root = corpus.write(tmp_path) / corpus.FOLDER
    (root / "masks").rename(root / "labels")
    with pytest.raises(SourceError, match="masks"):
        load_source("sa-med2d-20m", root)

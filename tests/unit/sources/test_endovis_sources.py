"""EndoVis 2017 / 2018 sources on tiny replicas of their release layouts."""

import json
import shutil

import numpy as np
import pytest

from medvqa_build.api import load_source
from medvqa_build.errors import SourceError
from medvqa_build.geometry import mask_to_xyxy, rle_decode

from ...fixtures.images import write_png
from ...fixtures.sources import endovis17, endovis18

SEQ1 = "miccai_challenge_2018_release_1/seq_1"
SEQ5 = "miccai_challenge_release_2/seq_5"
DS1 = "instrument_1_4_training/instrument_dataset_1"
DS6 = "instrument_5_8_training/instrument_dataset_6"


def _reasons(result):
    return sorted((q.file, q.reason) for q in result.quarantined)


# --- endovis18 (colour_label_masks) ---------------------------------------------------------


def test_endovis18_one_region_per_class_component(tmp_path):
    root = endovis18.write(tmp_path)
    result = load_source("endovis18", root)
    assert not result.quarantined
    by_id = {s.sample_id: s for s in result.samples}
    assert sorted(by_id) == [
        f"endovis18:{SEQ1}/frame000",
        f"endovis18:{SEQ1}/frame001",
        f"endovis18:{SEQ5}/frame000",
    ]
    s = by_id[f"endovis18:{SEQ1}/frame000"]
    assert s.image == f"{SEQ1}/left_frames/frame000.png"
    assert (s.frame, s.width, s.height) == (0, 128, 102)
    assert (s.group_id, s.attributes["sequence"]) == ("seq_1", "seq_1")
    assert s.labels == (
        "covered kidney",
        "instrument clasper",
        "instrument shaft",
        "instrument wrist",
    )
    assert s.attributes["source_label"] == (
        "covered-kidney,instrument-clasper,instrument-shaft,instrument-wrist"
    )
    # regions follow labels.json's class order; background-tissue is never a region
    assert [r.label for r in s.regions] == [
        "instrument shaft",
        "instrument clasper",
        "instrument wrist",
        "covered kidney",
    ]
    shaft = s.regions[0]
    assert shaft.bbox == (10.0, 10.0, 60.0, 30.0)  # x2/y2 exclusive
    mask = rle_decode(shaft.mask.size_hw, shaft.mask.counts)
    assert mask.shape == (102, 128) and int(mask.sum()) == 50 * 20
    assert mask_to_xyxy(mask) == shaft.bbox
    clamps = [r for r in by_id[f"endovis18:{SEQ1}/frame001"].regions if r.label == "clamps"]
    assert [r.bbox for r in clamps] == [(5.0, 5.0, 15.0, 15.0), (100.0, 5.0, 110.0, 15.0)]
    # the RGBA label of seq_5 reads like the RGB ones
    assert by_id[f"endovis18:{SEQ5}/frame000"].labels == ("small intestine", "suturing needle")
    assert by_id[f"endovis18:{SEQ5}/frame000"].group_id == "seq_5"


def test_endovis18_colour_table_found_above_the_sequence(tmp_path):
    root = endovis18.write(tmp_path)
    shutil.move(root / "miccai_challenge_2018_release_1" / "labels.json", root)
    result = load_source("endovis18", root)
    assert not result.quarantined and len(result.samples) == 3


def test_endovis18_quarantine_reasons(tmp_path):
    root = endovis18.write(tmp_path)
    labels = root / SEQ1 / "labels"
    rgb = endovis18.label_image([("thread", (0, 0, 10, 10))])
    rgb[50, 50] = (1, 2, 3)
    endovis18.write_label(labels / "frame000.png", rgb)
    endovis18.write_label(labels / "frame001.png", np.zeros((50, 64, 3), dtype=np.uint8))
    (root / SEQ5 / "labels" / "frame000.png").unlink()
    endovis18.write_frame(root / SEQ5 / "left_frames" / "frame001.png", 7)
    (root / SEQ5 / "left_frames" / "frame002.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    result = load_source("endovis18", root)
    assert result.samples == [] and result.found == 5
    assert _reasons(result) == sorted(
        [
            (
                f"{SEQ1}/left_frames/frame000.png",
                "label colour [1, 2, 3] (1 px) is not in labels.json",
            ),
            (f"{SEQ1}/left_frames/frame001.png", "label frame001.png is 64x50, image is 128x102"),
            (
                f"{SEQ5}/left_frames/frame000.png",
                f"label file {SEQ5}/labels/frame000.png is missing",
            ),
            (
                f"{SEQ5}/left_frames/frame001.png",
                f"label file {SEQ5}/labels/frame001.png is missing",
            ),
            (f"{SEQ5}/left_frames/frame002.png", result.quarantined[-1].reason),
        ]
    )
    assert "not a readable image" in result.quarantined[-1].reason


def test_endovis18_layout_errors_name_what_is_missing(tmp_path):
    with pytest.raises(SourceError, match=r"found none of its parts .*<folder matching \^seq_"):
        load_source("endovis18", tmp_path)
    root = endovis18.write(tmp_path / "data")
    (root / "miccai_challenge_2018_release_1" / "labels.json").unlink()
    with pytest.raises(SourceError, match="expected the colour table 'labels.json'"):
        load_source("endovis18", root)
    bad = json.dumps([{"name": "thread", "colour": [1, 2, 3]}])
    (root / "miccai_challenge_2018_release_1" / "labels.json").write_text(bad)
    with pytest.raises(SourceError, match="colour table is not a list of"):
        load_source("endovis18", root)


# --- endovis17 (instrument_label_folders) ---------------------------------------------------


def test_endovis17_one_region_per_instrument_mask(tmp_path):
    root = endovis17.write(tmp_path)
    result = load_source("endovis17", root)
    assert not result.quarantined
    by_id = {s.sample_id: s for s in result.samples}
    # keyed by the sequence folder's name: the same ids however the archives were unpacked
    assert sorted(by_id) == [
        "endovis17:instrument_dataset_1/frame000",
        "endovis17:instrument_dataset_1/frame001",
        "endovis17:instrument_dataset_6/frame000",
        "endovis17:instrument_dataset_7/frame000",
    ]
    s = by_id["endovis17:instrument_dataset_1/frame000"]
    assert (s.image, s.frame, s.width, s.height) == (f"{DS1}/left_frames/frame000.png", 0, 192, 108)
    assert s.group_id == "instrument_dataset_1"
    assert s.labels == ("bipolar forceps", "prograsp forceps")
    assert s.attributes["source_label"] == "Left_Prograsp_Forceps,Maryland_Bipolar_Forceps"
    first, second = s.regions
    assert (first.label, first.bbox) == ("prograsp forceps", (0.0, 8.0, 60.0, 22.0))
    assert first.mask.path == f"{DS1}/ground_truth/Left_Prograsp_Forceps_labels/frame000.png"
    assert first.mask.value is None  # every non-zero pixel of the file is the instrument
    assert s.attributes["region0.parts"] == "claspers,shaft,wrist"
    assert (second.label, second.bbox) == ("bipolar forceps", (130.0, 58.0, 192.0, 72.0))
    assert s.attributes["region1.source_label"] == "Maryland_Bipolar_Forceps"
    # empty masks (instrument out of view) give no region; Other has no documented parts
    later = by_id["endovis17:instrument_dataset_1/frame001"]
    assert later.labels == ("other instrument", "prograsp forceps")
    assert later.attributes["region1.parts"] == ""
    assert by_id["endovis17:instrument_dataset_6/frame000"].labels == (
        "large needle driver",
        "prograsp forceps",
    )


def test_endovis17_quarantine_reasons(tmp_path):
    root = endovis17.write(tmp_path)
    gt = root / DS1 / "ground_truth"
    (gt / "Other_labels" / "frame000.png").unlink()
    write_png(gt / "Other_labels" / "frame001.png", np.zeros((54, 96), dtype=np.uint8))
    stapler = root / DS6 / "ground_truth" / "Stapler_labels"
    write_png(stapler / "frame000.png", endovis17.mask_image([(10, (0, 0, 20, 20))]))
    test_seq = root / "test" / "instrument_dataset_9" / "left_frames"
    write_png(test_seq / "frame000.png", np.zeros((108, 192, 3), dtype=np.uint8))
    result = load_source("endovis17", root)
    assert [s.sample_id for s in result.samples] == ["endovis17:instrument_dataset_7/frame000"]
    assert result.found == 5
    assert _reasons(result) == sorted(
        [
            (
                f"{DS1}/left_frames/frame000.png",
                f"mask {DS1}/ground_truth/Other_labels/frame000.png is missing",
            ),
            (
                f"{DS1}/left_frames/frame001.png",
                f"mask {DS1}/ground_truth/Other_labels/frame001.png is 96x54, image is 192x108",
            ),
            (
                f"{DS6}/left_frames/frame000.png",
                "label 'Stapler' is not in the manifest's label_map",
            ),
            (
                "test/instrument_dataset_9/left_frames/frame000.png",
                "test/instrument_dataset_9 has no 'ground_truth' folder",
            ),
        ]
    )


def test_endovis17_layout_errors_name_what_is_missing(tmp_path):
    with pytest.raises(
        SourceError, match=r"found none of its parts .*<folder matching \^instrument_"
    ):
        load_source("endovis17", tmp_path)
    root = endovis17.write(tmp_path / "data")
    (root / DS6 / "ground_truth" / "Vessel_Sealer").mkdir()  # no _labels suffix: still read
    reasons = _reasons(load_source("endovis17", root))
    assert (
        f"{DS6}/left_frames/frame000.png",
        f"mask {DS6}/ground_truth/Vessel_Sealer/frame000.png is missing",
    ) in reasons

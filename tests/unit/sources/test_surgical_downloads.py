"""Cholec80, EndoVis 2017 and EndoVis 2018 as their downloads really unpack (issue 23): the
archive shapes, label files and quirks on each source's docs page ("Verified against")."""

import json
import shutil

import pytest

from medvqa_build.api import load_source
from medvqa_build.errors import SourceError

from ...fixtures.sources import cholec80, endovis17, endovis18


def _ids(result) -> list[str]:
    return sorted(s.sample_id for s in result.samples)


def _by_id(result) -> dict:
    return {s.sample_id.split(":", 1)[1]: s for s in result.samples}


def _reasons(result) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for q in result.quarantined:
        out.setdefault(q.file, []).append(q.reason)
    return out


def _edit_line(path, frame: int, cells: list[str]) -> None:
    """Replace the row of ``frame`` in a tab-separated Cholec80 table."""
    lines = path.read_text().splitlines()
    lines = [
        ("\t".join([str(frame), *cells]) if ln.split("\t")[0] == str(frame) else ln) for ln in lines
    ]
    path.write_text("\n".join(lines) + "\n")


# --- cholec80 ---------------------------------------------------------------------------------


def test_cholec80_short_tool_table_counts_the_tools_left_out(tmp_path):
    """video02's tool table stops one 1 fps sample before its phase table (as on the real
    videos): frame 50 keeps its phase, its tools are counted as left out, not as absent."""
    result = load_source("cholec80", cholec80.write(tmp_path))
    assert result.counts() == {"found": 6, "converted": 6, "quarantined": 0}
    assert result.counts_detail["labels_missing"] == {"tools": 1}
    assert result.counts_detail["samples_missing_labels"] == 1
    last = _by_id(result)["video02/000050"]
    assert last.attributes["phase"] == "gallbladder packaging" and last.labels == ()


@pytest.mark.parametrize("marker", ["", "NaN", "NA"])
def test_cholec80_empty_cells_drop_that_label_only(tmp_path, marker):
    root = cholec80.write(tmp_path)
    _edit_line(root / "phase_annotations" / "video01-phase.txt", 25, [marker])
    # columns: Grasper Bipolar Hook Scissors Clipper Irrigator SpecimenBag
    _edit_line(root / "tool_annotations" / "video01-tool.txt", 50, [marker, "0", "1"] + ["0"] * 4)
    result = load_source("cholec80", root)
    assert result.counts() == {"found": 6, "converted": 6, "quarantined": 0}
    assert result.counts_detail["labels_missing"] == {"Phase": 1, "Grasper": 1, "tools": 1}
    assert result.counts_detail["samples_missing_labels"] == 3
    by_id = _by_id(result)
    no_phase = by_id["video01/000025"]
    assert "phase" not in no_phase.attributes and "source_label" not in no_phase.attributes
    assert no_phase.labels == ("grasper", "hook")  # its tools are kept
    no_grasper = by_id["video01/000050"]
    assert no_grasper.attributes["phase"] == "calot triangle dissection"
    assert "tool:grasper" not in no_grasper.attributes  # unknown, not "0"
    assert no_grasper.attributes["tool:hook"] == "1" and no_grasper.labels == ("hook",)


def test_cholec80_tool_value_other_than_0_or_1_quarantines_that_frame(tmp_path):
    root = cholec80.write(tmp_path)
    _edit_line(root / "tool_annotations" / "video01-tool.txt", 25, ["2", ""] + ["0"] * 5)
    result = load_source("cholec80", root)
    # the quarantined frame's empty Bipolar cell is not counted as a label left out
    assert result.counts_detail["labels_missing"] == {"tools": 1}
    assert _reasons(result) == {
        "videos/video01.mp4": [
            "frame 25: Grasper = '2' in tool_annotations/video01-tool.txt is neither '1' nor '0'"
        ]
    }
    assert result.found == 6 and len(result.samples) == 5


def test_cholec80_video_without_phase_table_keeps_its_tool_frames(tmp_path):
    root = cholec80.write(tmp_path)
    (root / "phase_annotations" / "video01-phase.txt").unlink()
    result = load_source("cholec80", root)
    assert not result.quarantined
    assert result.counts_detail["labels_missing"] == {"Phase": 3, "tools": 1}
    frames = {k: s for k, s in _by_id(result).items() if k.startswith("video01/")}
    assert sorted(frames) == ["video01/000000", "video01/000025", "video01/000050"]
    assert all("phase" not in s.attributes for s in frames.values())
    assert frames["video01/000025"].labels == ("grasper", "hook")


def test_cholec80_repeated_row_counts_once_and_a_contradicting_one_is_quarantined(tmp_path):
    root = cholec80.write(tmp_path)
    table = root / "phase_annotations" / "video01-phase.txt"
    table.write_text(table.read_text() + "25\tPreparation\n50\tPreparation\n")
    result = load_source("cholec80", root)
    assert _reasons(result) == {
        "videos/video01.mp4": [
            "frame 50: listed twice in phase_annotations/video01-phase.txt with different values"
        ]
    }
    assert _by_id(result)["video01/000025"].attributes["phase"] == "preparation"
    assert result.found == 6


def test_cholec80_zip_unpacked_into_a_cholec80_folder(tmp_path):
    """Users often unzip cholec80.zip into cholec80/: that folder, the one above it and a
    download folder above that give the same ids."""
    expected = _ids(load_source("cholec80", cholec80.write(tmp_path / "plain")))
    unpacked = cholec80.write(tmp_path / "user" / "downloads" / "cholec80")
    for given in (unpacked, unpacked.parent, unpacked.parent.parent):
        assert _ids(load_source("cholec80", given)) == expected


# --- endovis17 --------------------------------------------------------------------------------


def test_endovis17_side_by_side_or_per_archive_folders_give_the_same_ids(tmp_path):
    """The training zips hold instrument_dataset_N/ at their top: unzipped into one folder
    or each into a folder of its own name, the samples are the same."""
    per_archive = load_source("endovis17", endovis17.write(tmp_path / "a"))
    flat = load_source("endovis17", endovis17.write(tmp_path / "b", flat=True))
    assert (
        _ids(flat)
        == _ids(per_archive)
        == [
            "endovis17:instrument_dataset_1/frame000",
            "endovis17:instrument_dataset_1/frame001",
            "endovis17:instrument_dataset_6/frame000",
            "endovis17:instrument_dataset_7/frame000",
        ]
    )
    assert _by_id(flat)["instrument_dataset_6/frame000"].image == (
        "instrument_dataset_6/left_frames/frame000.png"
    )
    # only the first archive, passed as its own folder: the same ids for its sequences
    only = load_source("endovis17", tmp_path / "a" / "instrument_1_4_training")
    assert _ids(only) == _ids(per_archive)[:2]


def test_endovis17_label_folders_without_suffix_and_colour_masks(tmp_path):
    """Datasets 6 and 7 ship Prograsp_Forceps, Left_Bipolar_Forceps and Right_Vessel_Sealer
    without the _labels suffix; dataset 7's masks are 3-channel PNGs."""
    result = load_source("endovis17", endovis17.write(tmp_path))
    assert not result.quarantined
    ds6 = _by_id(result)["instrument_dataset_6/frame000"]
    assert ds6.attributes["source_label"] == "Left_Large_Needle_Driver,Prograsp_Forceps"
    grasp = ds6.regions[1]
    assert (grasp.label, grasp.bbox) == ("prograsp forceps", (98.0, 0.0, 112.0, 50.0))
    assert grasp.mask.path.endswith(
        "instrument_dataset_6/ground_truth/Prograsp_Forceps/frame000.png"
    )
    ds7 = _by_id(result)["instrument_dataset_7/frame000"]
    assert ds7.labels == ("bipolar forceps", "vessel sealer")
    bipolar, sealer = ds7.regions
    assert bipolar.bbox == (0.0, 80.0, 60.0, 90.0) and ds7.attributes["region0.parts"] == (
        "shaft,wrist"
    )
    assert sealer.bbox == (146.0, 0.0, 164.0, 44.0)
    assert ds7.attributes["region1.parts"] == "claspers,shaft"
    assert ds7.attributes["region1.source_label"] == "Right_Vessel_Sealer"


@pytest.mark.parametrize("flat", [False, True])
def test_endovis17_test_frames_are_quarantined_with_the_reason(tmp_path, flat):
    """Testing archives add frames 225-299 to datasets 1-8 and datasets 9-10, all without
    per-instrument masks: quarantined, named, and the training samples unchanged."""
    root = endovis17.write(tmp_path, flat=flat, test_frames=True)
    result = load_source("endovis17", root)
    assert len(result.samples) == 4 and result.found == 6
    ds1 = "" if flat else "instrument_1_4_testing/"
    ds9 = "" if flat else "instrument_9_10_testing/"
    gt1 = f"{'' if flat else 'instrument_1_4_training/'}instrument_dataset_1/ground_truth"
    if flat:  # merged into the training sequence folder: no mask in any of its 4 folders
        reason = (
            f"no mask for frame225.png in any of the 4 folders of {gt1} (an unlabelled test frame?)"
        )
    else:
        reason = "instrument_1_4_testing/instrument_dataset_1 has no 'ground_truth' folder"
    assert _reasons(result) == {
        f"{ds1}instrument_dataset_1/left_frames/frame225.png": [reason],
        f"{ds9}instrument_dataset_9/left_frames/frame000.png": [
            f"{ds9}instrument_dataset_9 has no 'ground_truth' folder"
        ],
    }


def test_endovis17_a_frame_unpacked_twice_is_quarantined_once(tmp_path):
    root = endovis17.write(tmp_path)
    shutil.copytree(
        root / "instrument_1_4_training" / "instrument_dataset_1",
        root / "copy" / "instrument_dataset_1",
    )
    result = load_source("endovis17", root)
    assert len(result.samples) == 4 and result.found == 6
    first = "copy/instrument_dataset_1/left_frames"
    assert _reasons(result) == {
        f"instrument_1_4_training/instrument_dataset_1/left_frames/frame00{k}.png": [
            f"frame instrument_dataset_1/frame00{k} is also at {first}/frame00{k}.png "
            "(unpacked twice?)"
        ]
        for k in (0, 1)
    }


# --- endovis18 --------------------------------------------------------------------------------


def test_endovis18_macosx_shadow_tree_is_skipped(tmp_path):
    """Release 1's zip carries __MACOSX/ with seq_N/left_frames of ._frameNNN.png stubs."""
    expected = _ids(load_source("endovis18", endovis18.write(tmp_path / "a")))
    result = load_source("endovis18", endovis18.write(tmp_path / "b", macosx=True))
    assert not result.quarantined and _ids(result) == expected


def test_endovis18_ids_do_not_depend_on_the_folder_passed(tmp_path):
    """Releases unzipped into a download folder (with release 1's __MACOSX beside them): ROOT
    = that folder or one above gives <release>/seq_N/frameNNN ids either way."""
    root = endovis18.write(tmp_path / "downloads" / "endovis18", macosx=True)
    expected = _ids(load_source("endovis18", root))
    assert expected[0] == "endovis18:miccai_challenge_2018_release_1/seq_1/frame000"
    assert _ids(load_source("endovis18", root.parent)) == expected


def test_endovis18_release_unpacked_into_its_own_name_keeps_the_ids(tmp_path):
    """Extracting into a folder named after the zip gives <release>/<release>/seq_N (with
    __MACOSX beside the inner folder): the repeated folder counts once in sample ids."""
    plain = load_source("endovis18", endovis18.write(tmp_path / "a"))
    root = endovis18.write(tmp_path / "b", wrapped=True, macosx=True)
    for given in (root, root / "miccai_challenge_2018_release_1"):
        wrapped = load_source("endovis18", given)
        assert not wrapped.quarantined and _ids(wrapped) == _ids(plain)
    s = _by_id(wrapped)["miccai_challenge_2018_release_1/seq_1/frame000"]
    assert s.image == (
        "miccai_challenge_2018_release_1/miccai_challenge_2018_release_1/seq_1/left_frames/"
        "frame000.png"
    )


@pytest.mark.parametrize("gui", [False, True])
def test_endovis18_repairs_are_read_in_place_of_the_labels_they_fix(tmp_path, gui):
    root = endovis18.write(tmp_path, repairs=True, test_release=True)
    if gui:  # repairs.zip extracted into a folder of its own name
        (root / "repairs").rename(root / "tmp")
        (root / "repairs").mkdir()
        (root / "tmp").rename(root / "repairs" / "repairs")
    result = load_source("endovis18", root)
    assert not result.quarantined
    fixed = _by_id(result)["miccai_challenge_2018_release_1/seq_1/frame001"]
    assert fixed.labels == ("clamps", "thread")  # the original had kidney + two clamps
    # nothing is copied over the original; the test release's seq_1 is not repaired
    original = root / "miccai_challenge_2018_release_1" / "seq_1" / "labels" / "frame001.png"
    assert original.is_file()
    test_seq = _by_id(result)["seq_1-20180912-001/seq_1/frame000"]
    assert test_seq.labels == ("small intestine",)
    without = load_source("endovis18", endovis18.write(tmp_path / "plain"))
    assert _by_id(without)["miccai_challenge_2018_release_1/seq_1/frame001"].labels == (
        "clamps",
        "kidney parenchyma",
    )


def test_endovis18_test_release_colour_table_with_rgba_and_classes_key(tmp_path):
    root = endovis18.write(tmp_path, test_release=True)
    result = load_source("endovis18", root)
    assert not result.quarantined and len(result.samples) == 4
    s = _by_id(result)["seq_1-20180912-001/seq_1/frame000"]  # the last two folders
    assert s.labels == ("small intestine",) and s.attributes["source_label"] == "intestine"
    assert s.group_id == "seq_1"


def test_endovis18_colour_listed_twice(tmp_path):
    """The same colour twice under one name is harmless; under two names it is contradictory."""
    root = endovis18.write(tmp_path)
    table = root / "miccai_challenge_2018_release_1" / "labels.json"
    entries = json.loads(table.read_text())
    table.write_text(json.dumps([*entries, {**entries[6], "classid": 12}]))
    assert len(load_source("endovis18", root).samples) == 3
    table.write_text(json.dumps([*entries, {**entries[6], "name": "suture"}]))
    with pytest.raises(SourceError, match=r"colour \[187, 155, 25\] is 'thread' and 'suture'"):
        load_source("endovis18", root)

"""An empty or "not assessed" label cell drops that label only (issue 23): the image is kept,
its other values kept, and the cell counted; an unknown label is still quarantined."""

import shutil

import pytest

from medvqa_build.api import load_source
from medvqa_build.layouts.base import MISSING_MARKERS, is_missing


@pytest.mark.parametrize("marker", ["", "nan", "NaN", "N/A"])
def test_label_table_keeps_an_image_whose_label_cell_is_empty(synthetic_root, tmp_path, marker):
    root = tmp_path / "synthetic"
    shutil.copytree(synthetic_root, root)
    table = root / "labels.csv"
    header, first, second, *rest = table.read_text().splitlines()
    image, label, patient, split = first.split(",")
    assert label == "Polyp"
    other = second.split(",")
    other[3] = marker  # the split cell of the second row
    table.write_text(
        "\n".join([header, f"{image},{marker},{patient},{split}", ",".join(other), *rest]) + "\n"
    )
    result = load_source("synthetic-endo", root)
    by_id = {s.sample_id: s for s in result.samples}
    unlabelled = by_id[f"synthetic-endo:images/{image}"]
    assert unlabelled.labels == () and unlabelled.regions == ()
    assert "source_label" not in unlabelled.attributes and unlabelled.group_id == patient
    assert by_id[f"synthetic-endo:images/{other[0]}"].split is None
    assert result.counts_detail["labels_missing"] == {"finding": 1}
    assert result.counts_detail["samples_missing_labels"] == 1
    assert result.found == len(result.samples) + len(result.quarantined)


def test_an_unknown_label_is_still_quarantined(synthetic_root, tmp_path):
    root = tmp_path / "synthetic"
    shutil.copytree(synthetic_root, root)
    table = root / "labels.csv"
    table.write_text(table.read_text().replace(",Polyp,", ",Unicorn,", 1))
    result = load_source("synthetic-endo", root)
    assert any(
        "'Unicorn' is not in the manifest's label_map" in q.reason for q in result.quarantined
    )
    assert result.counts_detail["labels_missing"] == {}


def test_is_missing():
    assert all(is_missing(m) for m in MISSING_MARKERS)
    assert is_missing(None) and is_missing(float("nan")) and is_missing("  ")
    assert not is_missing("0") and not is_missing("Normal/Mild")
    assert is_missing("-1", ["-1"]) and not is_missing("-1")


def test_frame_tables_leave_out_an_empty_phase_or_tool_cell(synthetic_root, tmp_path):
    root = tmp_path / "synthetic"
    shutil.copytree(synthetic_root, root)
    phase = root / "phase_annotations" / "video01-phase.txt"
    header, first, *rest = phase.read_text().splitlines()
    frame, _ = first.split("\t")
    phase.write_text("\n".join([header, f"{frame}\t", *rest]) + "\n")
    tool = root / "tool_annotations" / "video01-tool.txt"
    theader, tfirst, *trest = tool.read_text().splitlines()
    cells = tfirst.split("\t")
    cells[1] = "NaN"
    tool.write_text("\n".join([theader, "\t".join(cells), *trest]) + "\n")
    result = load_source("synthetic-endo", root)
    frame_sample = next(
        s
        for s in result.samples
        if s.frame == int(frame) and s.attributes.get("video") == "video01"
    )
    assert "phase" not in frame_sample.attributes
    tool_name = theader.split("\t")[1]
    assert not any(
        k.startswith("tool:") and tool_name.lower() in k for k in frame_sample.attributes
    )
    assert result.counts_detail["labels_missing"] == {"Phase": 1, tool_name: 1}
    assert not result.quarantined or all("truncated" in q.reason for q in result.quarantined)

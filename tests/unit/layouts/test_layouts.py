"""Generic layouts on tiny replicas, including the per-file problems that go to quarantine."""

import re

import pytest

from medvqa_build.api import load_source
from medvqa_build.errors import SourceError
from medvqa_build.layouts.base import ScanContext, make_layout

from ...fixtures.images import write_jpeg as _jpeg
from ...fixtures.sources.kvasir import CLASSES as KVASIR_CLASSES
from ...fixtures.sources.kvasir import write as write_kvasir


def test_class_folders_kvasir_labels_and_quarantine(tmp_path):
    root = write_kvasir(tmp_path, per_class=2)
    _jpeg(root / "kvasir-dataset-v2" / "stray.jpg", 1)  # not inside a class folder
    _jpeg(root / "kvasir-dataset-v2" / "barretts" / "x.jpg", 2)  # class not in the label map
    (root / "kvasir-dataset-v2" / "polyps" / "broken.jpg").write_bytes(b"")
    result = load_source("kvasir", root)
    assert len(result.samples) == 2 * len(KVASIR_CLASSES)
    labels = {s.labels[0] for s in result.samples}
    assert {"polyp", "z-line", "ulcerative colitis", "dyed lifted polyps"} <= labels
    reasons = {q.file: q.reason for q in result.quarantined}
    assert reasons == {
        "kvasir-dataset-v2/stray.jpg": "expected 1 folder level(s) below 'kvasir-dataset-v2', found 0",  # noqa: E501
        "kvasir-dataset-v2/barretts/x.jpg": "label 'barretts' is not in the manifest's label_map",
        "kvasir-dataset-v2/polyps/broken.jpg": "empty file (0 bytes)",
    }
    assert result.found == len(result.samples) + 3
    s = result.samples[0]
    assert (s.width, s.height) == (64, 48) and s.modality == "endoscopy"


def test_class_folders_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(
        SourceError, match=r"found none of its parts \(images: kvasir-dataset-v2/\)"
    ):
        load_source("kvasir", tmp_path)


def _ctx(root, **kw):
    return ScanContext(source="t", root=root, part="p", modality="endoscopy", scene=None, **kw)


def test_label_table_names_missing_columns(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "labels.csv").write_text("image;finding\na;Polyp\n")
    layout = make_layout(
        "label_table",
        {
            "table": "labels.csv",
            "image_column": "image",
            "label_column": "finding",
            "image_dir": "images",
        },
        where="test",
    )
    with pytest.raises(SourceError) as err:
        list(layout.scan(_ctx(tmp_path)))
    assert "lacks column(s) ['image', 'finding']" in str(err.value)
    assert "['image;finding']" in str(err.value) and "separator" in str(err.value)


def test_label_table_unknown_option_is_named():
    with pytest.raises(SourceError, match="unknown key 'sepp'"):
        make_layout(
            "label_table",
            {"table": "x", "image_column": "i", "label_column": "l", "sepp": ";"},
            "m",
        )


def test_label_table_masks_and_quarantine(tmp_path):
    import cv2
    import numpy as np

    (tmp_path / "masks").mkdir()
    for stem in ("a", "b", "c"):
        _jpeg(tmp_path / "images" / f"{stem}.jpg", 3, size_wh=(40, 30))
    mask = np.zeros((30, 40), np.uint8)
    mask[5:10, 6:12] = 255
    mask[20:26, 30:38] = 255
    cv2.imwrite(str(tmp_path / "masks" / "a.png"), mask)
    cv2.imwrite(str(tmp_path / "masks" / "b.png"), np.zeros((10, 10), np.uint8))  # wrong size
    _jpeg(tmp_path / "images" / "unlisted.jpg", 4)
    (tmp_path / "labels.csv").write_text(
        "image,finding\na,Polyp\nb,Polyp\nc,Polyp\nmissing,Polyp\n"
    )
    layout = make_layout(
        "label_table",
        {
            "table": "labels.csv",
            "image_column": "image",
            "label_column": "finding",
            "image_dir": "images",
            "image_suffix": ".jpg",
            "masks": {"dir": "masks", "min_area_px": 4},
        },
        where="test",
    )
    out = list(layout.scan(_ctx(tmp_path, label_map={"Polyp": "polyp"})))
    samples = {o.image: o for o in out if hasattr(o, "sample_id")}
    quarantined = {o.file: o.reason for o in out if not hasattr(o, "sample_id")}
    assert [r.bbox for r in samples["images/a.jpg"].regions] == [
        (30.0, 20.0, 38.0, 26.0),
        (6.0, 5.0, 12.0, 10.0),
    ]
    assert all(r.label == "polyp" and r.mask.counts for r in samples["images/a.jpg"].regions)
    assert samples["images/c.jpg"].regions == ()
    assert quarantined == {
        "images/b.jpg": "mask b.png is 10x10, image is 40x30",
        "images/missing.jpg": "file not found",
        "images/unlisted.jpg": "image not listed in labels.csv",
    }
    assert len(out) == 5


def test_frame_folders_phase_and_tools(tmp_path):
    for f in (0, 25, 50):
        _jpeg(tmp_path / "videos" / "video01" / f"video01_{f:06d}.jpg", f)
    (tmp_path / "phase_annotations").mkdir()
    (tmp_path / "phase_annotations" / "video01-phase.txt").write_text(
        "Frame\tPhase\n0\tPreparation\n25\tClippingCutting\n"
    )
    (tmp_path / "tool_annotations").mkdir()
    (tmp_path / "tool_annotations" / "video01-tool.txt").write_text(
        "Frame\tGrasper\tHook\n0\t1\t0\n25\t1\t1\n"
    )
    layout = make_layout(
        "frame_folders",
        {
            "frames_dir": "videos",
            "phase_table": "phase_annotations/{video}-phase.txt",
            "tool_table": "tool_annotations/{video}-tool.txt",
        },
        "test",
    )
    out = list(layout.scan(_ctx(tmp_path)))
    assert [o.frame for o in out[:2]] == [0, 25]
    assert out[1].attributes["phase"] == "ClippingCutting" and out[1].labels == ("Grasper", "Hook")
    assert out[0].group_id == "video01" and out[0].attributes["tool:Hook"] == "0"
    assert out[2].reason == "no phase for frame 50 in phase_annotations/video01-phase.txt"


def test_label_table_is_read_in_chunks_with_the_same_result(tmp_path, monkeypatch):
    """A 10^6-row table is parsed a chunk at a time; chunking changes nothing: the same
    samples in the same order, the same unlisted images reported."""
    from medvqa_build.layouts import label_table

    for stem in ("a", "b", "c", "d", "e"):
        _jpeg(tmp_path / "images" / f"{stem}.jpg", 3)
    _jpeg(tmp_path / "images" / "unlisted.jpg", 4)
    (tmp_path / "labels.csv").write_text(
        "image,finding,patient\n" + "".join(f"{s},Polyp,p{i}\n" for i, s in enumerate("edcab"))
    )
    options = {
        "table": "labels.csv",
        "image_column": "image",
        "label_column": "finding",
        "group_column": "patient",
        "image_dir": "images",
        "image_suffix": ".jpg",
    }

    def scan():
        layout = make_layout("label_table", options, where="test")
        return list(layout.scan(_ctx(tmp_path, label_map={"Polyp": "polyp"})))

    whole = scan()
    monkeypatch.setattr(label_table, "CHUNK_ROWS", 2)
    chunked = scan()
    assert chunked == whole
    assert [getattr(o, "group_id", None) for o in whole] == ["p0", "p1", "p2", "p3", "p4", None]
    assert whole[-1].file == "images/unlisted.jpg" and "not listed" in whole[-1].reason


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"group_level": "video"}, "group_level 'video' names no folder level"),
        ({"parent_attributes": ["a"], "child_attributes": ["a"]}, "name(s) ['a'] used twice"),
        ({"child_attributes": ["source_label"]}, "name(s) ['source_label'] used twice"),
    ],
)
def test_class_folders_levels_are_named_once(options, problem):
    with pytest.raises(SourceError, match=re.escape(problem)):
        make_layout("class_folders", options, where="m.yaml: parts.images")


def test_class_folders_class_in_the_middle_and_group_from_a_parent(tmp_path):
    """``<patient>/<class>/<view>/<image>``: the group is the patient folder, wherever the class."""
    for patient, cls, view in [("p1", "a", "front"), ("p1", "b", "side"), ("p2", "a", "front")]:
        _jpeg(tmp_path / patient / cls / view / "x.jpg", len(patient + cls + view))
    layout = make_layout(
        "class_folders",
        {"parent_attributes": ["patient"], "child_attributes": ["view"], "group_level": "patient"},
        where="test",
    )
    assert layout.provides() == {
        "labels",
        "attribute:source_label",
        "attribute:patient",
        "attribute:view",
    }
    ctx = _ctx(tmp_path, label_map={"a": "a", "b": "b"})
    got = [layout.read(ctx, c) for c in layout.candidates(ctx)]
    assert sorted((s.image, s.labels, s.group_id, s.attributes) for s in got) == [
        ("p1/a/front/x.jpg", ("a",), "p1", {"source_label": "a", "patient": "p1", "view": "front"}),
        ("p1/b/side/x.jpg", ("b",), "p1", {"source_label": "b", "patient": "p1", "view": "side"}),
        ("p2/a/front/x.jpg", ("a",), "p2", {"source_label": "a", "patient": "p2", "view": "front"}),
    ]

"""Issue 27: a malformed entry of a dataset's annotation file quarantines only the samples it
describes; a malformed file (a field the whole source needs) is one line naming the file, the
field and what was expected. Readers: coco_json, json_boxes, keypoint_json, instrument_xml."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from medvqa_build.errors import ImageProblem, SourceError
from medvqa_build.layouts.base import ScanContext, make_layout
from medvqa_build.layouts.instrument_xml import InstrumentXmlOptions, xml_regions
from medvqa_build.records import QuarantineEntry, Sample


def _images(folder: Path, names: list[str], size=(40, 30)) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(names):
        Image.fromarray(np.full((size[1], size[0], 3), 40 * k, np.uint8)).save(folder / name)


def _scan(layout: str, options: dict, root: Path) -> tuple[list[Sample], list[QuarantineEntry]]:
    ctx = ScanContext(source="t", root=root, part="p", modality="endoscopy", scene=None)
    entries = list(make_layout(layout, options, "test").scan(ctx))
    return (
        [e for e in entries if isinstance(e, Sample)],
        [e for e in entries if isinstance(e, QuarantineEntry)],
    )


# -- coco_json ------------------------------------------------------------------------------------

COCO = {"annotations": "ann.json", "images_dir": "img"}


def _coco(root: Path, images: list, annotations: list, categories=None) -> None:
    _images(root / "img", ["a.png", "b.png", "c.png"])
    data = {
        "images": images,
        "annotations": annotations,
        "categories": categories if categories is not None else [{"id": 1, "name": "tool"}],
    }
    (root / "ann.json").write_text(json.dumps(data))


GOOD_IMAGES = [
    {"id": 1, "file_name": "a.png", "width": 40, "height": 30},
    {"id": 2, "file_name": "b.png", "width": 40, "height": 30},
    {"id": 3, "file_name": "c.png", "width": 40, "height": 30},
]


def _box(ann_id: int, image_id, bbox) -> dict:
    return {"id": ann_id, "image_id": image_id, "category_id": 1, "bbox": bbox}


def test_coco_bad_image_entries_quarantine_only_themselves(tmp_path):
    images = GOOD_IMAGES[:1] + [{"id": 2}, "c.png", {"id": [3], "file_name": "c.png"}]
    _coco(tmp_path, images, [_box(1, 1, [1, 1, 5, 5])])
    samples, bad = _scan("coco_json", COCO, tmp_path)
    assert [s.image for s in samples] == ["img/a.png"]
    assert samples[0].regions[0].bbox == (1.0, 1.0, 6.0, 6.0)
    assert [q.file for q in bad] == [
        "ann.json#images[1]",
        "ann.json#images[2]",
        "ann.json#images[3]",
    ]
    assert '"file_name": <text>' in bad[0].reason and "str 'c.png'" in bad[1].reason


def test_coco_bad_annotations_quarantine_their_image_or_the_file(tmp_path):
    anns = [
        _box(1, 1, ["x", 1, 5, 5]),  # a string coordinate: image a quarantined
        "not an annotation",  # names no image: the JSON file is at fault
        _box(3, [2], [1, 1, 5, 5]),  # an unhashable image id: unknown image
        _box(4, 3, [1, 1, 5, 5]),
    ]
    _coco(tmp_path, GOOD_IMAGES, anns)
    samples, bad = _scan("coco_json", COCO, tmp_path)
    assert [s.image for s in samples] == ["img/b.png", "img/c.png"]
    by_file = {q.file: q.reason for q in bad}
    assert "four numbers" in by_file["img/a.png"]
    reasons = [q.reason for q in bad if q.file == "ann.json"]
    assert reasons == [
        "annotations[1] is str 'not an annotation', not an object",
        "annotation 3 names unknown image [2]",
    ]


@pytest.mark.parametrize(
    "change, words",
    [
        ({"images": {"a": 1}}, ("'images'", "must be a list")),
        ({"categories": [{"id": 1}]}, ("categories[0]", '"name"')),
        ({"categories": ["tool"]}, ("categories[0]", "str 'tool'")),
    ],
)
def test_coco_unusable_file_is_one_line(tmp_path, change, words):
    _coco(tmp_path, GOOD_IMAGES, [])
    data = {**json.loads((tmp_path / "ann.json").read_text()), **change}
    (tmp_path / "ann.json").write_text(json.dumps(data))
    with pytest.raises(SourceError) as err:
        _scan("coco_json", COCO, tmp_path)
    for word in words:
        assert word in str(err.value)
    assert str(tmp_path / "ann.json") in str(err.value)


# -- json_boxes -----------------------------------------------------------------------------------

BOXES = {"images_dir": "img", "boxes": {"file": "boxes.json"}}


def test_json_boxes_bad_entries_quarantine_their_image(tmp_path):
    _images(tmp_path / "img", ["a.png", "b.png", "c.png", "d.png"])
    box = {"label": "polyp", "xmin": 1, "ymin": 1, "xmax": 9, "ymax": 9}
    entries = {
        "a": {"width": 40, "height": 30, "bbox": [box]},
        "b": "polyp",
        "c": {"width": "forty", "height": 30, "bbox": [box]},
        "d": {"bbox": {"xmin": 1}},
    }
    (tmp_path / "boxes.json").write_text(json.dumps(entries))
    samples, bad = _scan("json_boxes", BOXES, tmp_path)
    assert [s.image for s in samples] == ["img/a.png"]
    reasons = {q.file: q.reason for q in bad}
    assert "entry is str" in reasons["img/b.png"]
    assert "whole numbers" in reasons["img/c.png"]
    assert "'bbox' is dict" in reasons["img/d.png"]


# -- keypoint_json --------------------------------------------------------------------------------

KEYPOINTS = {"images_dir": "img", "json_dir": "ann", "label_key": "label"}


def test_keypoint_json_bad_files_quarantine_their_image(tmp_path):
    _images(tmp_path / "img", ["a.png", "b.png", "c.png", "d.png"])
    ann = tmp_path / "ann"
    ann.mkdir()
    good = {"label": "x", "imageWidth": 40, "imageHeight": 30, "shapes": []}
    (ann / "a.json").write_text(
        json.dumps({**good, "shapes": [{"label": "p", "points": [[1, 2]]}]})
    )
    (ann / "b.json").write_text(json.dumps([good]))
    (ann / "c.json").write_text(json.dumps({**good, "imageWidth": "wide"}))
    (ann / "d.json").write_text(json.dumps({**good, "shapes": {"p": [1, 2]}}))
    samples, bad = _scan("keypoint_json", KEYPOINTS, tmp_path)
    assert [s.image for s in samples] == ["img/a.png"]
    assert samples[0].regions[0].points == ((1.0, 2.0),)
    reasons = {q.file: q.reason for q in bad}
    assert "JSON list; expected an object" in reasons["img/b.png"]
    assert "whole numbers" in reasons["img/c.png"]
    assert "'shapes' is dict" in reasons["img/d.png"]


# -- instrument_xml -------------------------------------------------------------------------------

XML_LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE a [<!ENTITY l0 "lol">'
    + "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    + "]>\n<annotation><objects><name>&l9;</name></objects></annotation>\n"
)


@pytest.mark.parametrize(
    "text, words",
    [
        (XML_LAUGHS, ("not well-formed XML",)),
        (
            "<a><objects><name>clasper</name><bndbox><xmin>x</xmin><ymin>1</ymin>"
            "<xmax>5</xmax><ymax>5</ymax></bndbox></objects></a>",
            ("coordinate is not a number",),
        ),
        ("<a><objects><bndbox/></objects></a>", ("has no <name>",)),
    ],
    ids=["entity-bomb", "coordinate", "no-name"],
)
def test_instrument_xml_bad_file_is_a_per_frame_problem(tmp_path, text, words):
    path = tmp_path / "frame000.xml"
    path.write_text(text)
    ctx = ScanContext(source="t", root=tmp_path, part="p", modality="endoscopy", scene=None)
    with pytest.raises(ImageProblem) as err:
        xml_regions(ctx, InstrumentXmlOptions(), path, 40, 30, 0)
    for word in words:
        assert word in str(err.value)

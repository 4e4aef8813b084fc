"""``json_boxes`` (no shipped manifest uses it alone; users point it at a Simula box file):
a user manifest over Kvasir-SEG's images and ``kavsir_bboxes.json``, masks left aside."""

from __future__ import annotations

import json

import pytest
import yaml

from medvqa_build import sources
from medvqa_build.api import load_source

from ...fixtures.sources import kvasir_seg


@pytest.fixture
def boxes_only(tmp_path, monkeypatch):
    manifest = sources.get_source("kvasir-seg").manifest.model_dump(exclude_none=True)
    manifest.update(id="kvasir-seg-boxes", archives=[])
    manifest["parts"] = [
        {
            "name": "boxes",
            "layout": "json_boxes",
            "options": {"images_dir": "images", "boxes": {"file": "kavsir_bboxes.json"}},
        }
    ]
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "kvasir-seg-boxes.yaml").write_text(yaml.safe_dump(manifest))
    monkeypatch.setenv("MEDVQA_MANIFESTS", str(folder))
    sources._load_all.cache_clear()
    yield kvasir_seg.write(tmp_path / "data")
    monkeypatch.delenv("MEDVQA_MANIFESTS")
    sources._load_all.cache_clear()


def test_boxes_come_from_the_json_entry_of_each_image(boxes_only):
    result = load_source("kvasir-seg-boxes", boxes_only)
    assert not result.quarantined
    by_stem = {s.image.split("/")[-1].removesuffix(".jpg"): s for s in result.samples}
    assert set(by_stem) == set(kvasir_seg.POLYPS)
    for stem, polyps in kvasir_seg.POLYPS.items():
        sample = by_stem[stem]
        assert [r.bbox for r in sample.regions] == [tuple(map(float, p)) for p in polyps]
        assert {r.label for r in sample.regions} == {"polyp"} and sample.labels == ("polyp",)
        assert sample.attributes["box_count"] == str(len(polyps))
    assert sources.get_source("kvasir-seg-boxes").capabilities() == {
        "regions",
        "labels",
        "attribute:box_count",
    }


def test_an_image_the_json_leaves_out_is_quarantined(boxes_only):
    table = boxes_only / "kavsir_bboxes.json"
    entries = json.loads(table.read_text())
    dropped = sorted(entries)[0]
    del entries[dropped]
    table.write_text(json.dumps(entries))
    result = load_source("kvasir-seg-boxes", boxes_only)
    assert [(q.file, q.reason) for q in result.quarantined] == [
        (f"images/{dropped}.jpg", "image not listed in kavsir_bboxes.json")
    ]
    assert result.found == len(result.samples) + 1

"""The worked examples of CONTRIBUTING.md, run. A source whose layout almost fits is one
manifest plus its fixture (``examples/source/``). A renderer and an exporter are each one module
that registers itself (plus its import line in the package's ``__init__``), and a recipe can
use them at once. The renderer's body is written inline here; the exporter is
``examples/exporter_jsonl.py`` itself, the file CONTRIBUTING.md shows. Both are registered for
the test only, in a copy of their registry without their names (so a contributor who followed
the walk-through and registered ``jsonl`` in ``src/`` does not collide with the test).

``bold_box`` draws the box level's outline at twice the stroke; ``jsonl`` writes one JSON
object per multiple-choice item with its images copied beside it. The demo recipe, cut down,
asks for one task at ``bold_box`` and for the ``jsonl`` format: the task plans box shapes, the
render stage draws them, the alignment check and the validate rules accept them, and the export
holds every item.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from medvqa_build import sources
from medvqa_build.api import build, load_recipe, load_source
from medvqa_build.errors import RecipeError
from medvqa_build.export import EXPORTERS
from medvqa_build.pipeline.build_dir import BuildDir
from medvqa_build.render import RENDERERS, prompt_levels
from medvqa_build.render.base import PlannedRenderer
from medvqa_build.render.box import plan_box_mark

REPO = Path(__file__).resolve().parents[2]
EXPORTER = REPO / "examples" / "exporter_jsonl.py"


# --- src/medvqa_build/render/bold_box.py --------------------------------------------------
class BoldBoxRenderer(PlannedRenderer):
    """``bold_box``: the box level's outline at twice its stroke, for small images."""

    name = "bold_box"
    shape_kind = "box"  # what a task plans and the alignment check verifies

    def plan_mark(self, mark, style, h, w, root=None, channels="rgb"):
        bold = dataclasses.replace(style, thickness_px=2 * style.thickness_for(h, w))
        return plan_box_mark(mark, bold, h, w, root, channels)


def _recipe(tmp_path: Path) -> Path:
    """The demo, cut down to its box task at ``bold_box``, exported as VLMEvalKit and jsonl."""
    recipe = yaml.safe_load((REPO / "recipes" / "demo.yaml").read_text())
    recipe["sources"][0]["generate"] = {"n_images": 30, "n_videos": 0}
    (task,) = [t for t in recipe["tasks"] if t["name"] == "region-box"]
    recipe["tasks"] = [{**task, "prompt_level": "bold_box", "quota": 12}]
    recipe["export"]["formats"] = ["vlmeval", "jsonl"]
    path = tmp_path / "bold.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


@pytest.fixture
def unregistered(monkeypatch):
    """The registries without the examples' names (the registries are process-wide)."""
    renderers = {k: v for k, v in RENDERERS._entries.items() if k != "bold_box"}
    monkeypatch.setattr(RENDERERS, "_entries", renderers)
    monkeypatch.setattr(
        EXPORTERS, "_entries", {k: v for k, v in EXPORTERS._entries.items() if k != "jsonl"}
    )


def test_a_recipe_cannot_name_them_before_they_are_registered(unregistered, tmp_path):
    text = _recipe(tmp_path).read_text()
    assert "prompt_level: bold_box" in text and "- jsonl\n" in text
    (tmp_path / "fmt.yaml").write_text(text.replace("prompt_level: bold_box", "prompt_level: box"))
    with pytest.raises(RecipeError, match=r"unknown format\(s\) \['jsonl'\]"):
        load_recipe(tmp_path / "fmt.yaml")
    recipe = yaml.safe_load(text)
    recipe["export"]["formats"].remove("jsonl")
    (tmp_path / "bold.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    with pytest.raises(RecipeError, match="tasks.0.prompt_level='bold_box': unknown prompt"):
        load_recipe(tmp_path / "bold.yaml")


@pytest.fixture
def registered(unregistered, monkeypatch):
    """The two registrations, undone after the test: the exporter by running its file."""
    RENDERERS.add("bold_box", BoldBoxRenderer())
    spec = importlib.util.spec_from_file_location("examples_exporter_jsonl", EXPORTER)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its code addresses the export stage
    spec.loader.exec_module(module)  # registers "jsonl"


def test_a_new_renderer_and_exporter_build_end_to_end(registered, tmp_path):
    assert prompt_levels()[-1] == "bold_box" and EXPORTERS.registered()[-1] == "jsonl"
    recipe = load_recipe(_recipe(tmp_path))  # the recipe check knows both names now
    result = build(recipe, tmp_path / "out", progress=False)

    assert result.report["validation"]["problems"] == 0
    items = list(result.items)
    assert len(items) == 12 and {i.prompt_level for i in items} == {"bold_box"}
    item = items[0]
    (shape,) = item.prompt_geometry
    assert shape.kind == "box" and shape.thickness_px >= 4  # twice the box level's 2 px

    # the outline is as thick as recorded: the top edge's band, and nothing just inside it
    path = BuildDir.open(result.out_dir).resolver()(item.images[0])
    image = np.asarray(Image.open(path).convert("RGB"), dtype=int)
    x1, y1, x2, _ = (int(v) for v in shape.bbox)
    t = shape.thickness_px
    band = image[y1 : y1 + t, x1 + t : x2 - t]
    assert np.abs(band - [255, 0, 0]).max(axis=-1).mean() < 60  # red (JPEG-close)

    export = tmp_path / "out" / "jsonl"
    records = [json.loads(line) for line in (export / "MedVQA_Demo.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == [i.item_id for i in items]
    assert all((export / path).is_file() for r in records for path in r["images"])
    (stats,) = [s.stats for s in result.stages if s.name == "export" and "jsonl" in s.path.name]
    assert stats["written"] == 12 and stats["left_out"] == {}


def test_the_walkthrough_shows_the_example_file():
    """CONTRIBUTING.md's exporter walk-through is ``examples/exporter_jsonl.py``, verbatim."""
    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    head = "```python\n# examples/exporter_jsonl.py\n"
    assert head in text
    block = text[text.index(head) + len(head) :]
    assert block[: block.index("```\n")] == EXPORTER.read_text(encoding="utf-8")


# --- examples/source/: a source whose layout almost fits -----------------------------------
SOURCE = REPO / "examples" / "source"


@pytest.fixture
def example_source(tmp_path, monkeypatch):
    """The example manifest registered through ``MEDVQA_MANIFESTS`` (no file in ``src/``) and
    its fixture written by the example's own ``write``."""
    spec = importlib.util.spec_from_file_location(
        "bowel_prep_example", SOURCE / "bowel_prep_example.py"
    )
    fixture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixture)
    monkeypatch.setenv("MEDVQA_MANIFESTS", str(SOURCE))
    sources._load_all.cache_clear()
    yield fixture, fixture.write(tmp_path / "data")
    monkeypatch.delenv("MEDVQA_MANIFESTS")
    sources._load_all.cache_clear()


def test_a_near_fit_source_is_one_manifest_and_its_fixture(example_source):
    """``<score>/<video>/<frame>.jpg``: the class is the score folder, the video an attribute
    and the group, so a video's frames share one group and cannot straddle splits."""
    fixture, root = example_source
    assert [p.name for p in SOURCE.iterdir() if p.suffix == ".yaml"] == ["bowel-prep-example.yaml"]
    result = load_source("bowel-prep-example", root)
    assert not result.quarantined
    frames = [(s.labels, s.attributes, s.group_id) for s in result.samples]
    expected = [
        ((f"bbps {score}",), {"source_label": score, "video": video}, video)
        for score, videos in fixture.VIDEOS.items()
        for video, n in videos.items()
        for _ in range(n)
    ]
    assert sorted(frames, key=repr) == sorted(expected, key=repr)
    # the splitter sees one group per video, not one per frame
    groups = Counter(f"{s.source}:{s.group_id}" for s in result.samples)
    assert groups == Counter(
        {
            f"bowel-prep-example:{v}": n
            for videos in fixture.VIDEOS.values()
            for v, n in videos.items()
        }
    )


def test_a_frame_outside_a_video_folder_is_quarantined_by_name(example_source):
    _, root = example_source
    stray = root / "frames" / "2" / "stray.jpg"
    stray.write_bytes((root / "frames" / "2" / "v04" / "v04_00000.jpg").read_bytes())
    result = load_source("bowel-prep-example", root)
    assert [(q.file, q.reason) for q in result.quarantined] == [
        ("frames/2/stray.jpg", "expected 2 folder level(s) below 'frames', found 1")
    ]


def test_the_source_walkthrough_shows_the_example_manifest():
    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    head = "```yaml\n# examples/source/bowel-prep-example.yaml\n"
    assert head in text
    block = text[text.index(head) + len(head) :]
    manifest = SOURCE / "bowel-prep-example.yaml"
    assert block[: block.index("```\n")] == manifest.read_text(encoding="utf-8")

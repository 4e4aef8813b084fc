"""The worked examples of CONTRIBUTING.md, run: a renderer and an exporter are each one module
that registers itself (plus its import line in the package's ``__init__``), and a recipe can
use them at once. Here the module's body is written inline and registered for the test only.

``bold_box`` draws the box level's outline at twice the stroke; ``jsonl`` writes one JSON
object per item. The demo recipe, cut down, asks for one task at ``bold_box`` and for the
``jsonl`` format: the task plans box shapes, the render stage draws them, the alignment check
and the validate rules accept them, and the export holds every item.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from medvqa_build.api import build, load_recipe
from medvqa_build.errors import RecipeError
from medvqa_build.export import EXPORTERS, ExportContext
from medvqa_build.pipeline.build_dir import BuildDir
from medvqa_build.render import RENDERERS, prompt_levels
from medvqa_build.render.base import PlannedRenderer
from medvqa_build.render.box import plan_box_mark
from medvqa_build.store.atomic import write_atomic

REPO = Path(__file__).resolve().parents[2]


# --- src/medvqa_build/render/bold_box.py --------------------------------------------------
class BoldBoxRenderer(PlannedRenderer):
    """``bold_box``: the box level's outline at twice its stroke, for small images."""

    name = "bold_box"
    shape_kind = "box"  # what a task plans and the alignment check verifies

    def plan_mark(self, mark, style, h, w, root=None, channels="rgb"):
        bold = dataclasses.replace(style, thickness_px=2 * style.thickness_for(h, w))
        return plan_box_mark(mark, bold, h, w, root, channels)


# --- src/medvqa_build/export/jsonl.py -----------------------------------------------------
def export_jsonl(ctx: ExportContext, out: Path) -> dict:
    """``jsonl``: ``<name>.jsonl``, one object per item, in item order (byte-identical)."""
    lines = [
        json.dumps(
            {
                "id": i.item_id,
                "question": i.question,
                "options": list(i.options),
                "answer": i.answer,
            },
            sort_keys=True,
        )
        for i in ctx.items
    ]
    write_atomic(out / f"{ctx.name}.jsonl", "".join(line + "\n" for line in lines))
    return {"items": len(lines)}


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


def test_a_recipe_cannot_name_them_before_they_are_registered(tmp_path):
    text = _recipe(tmp_path).read_text()
    assert "prompt_level: bold_box" in text and "- jsonl\n" in text
    (tmp_path / "fmt.yaml").write_text(text.replace("prompt_level: bold_box", "prompt_level: box"))
    with pytest.raises(RecipeError, match=r"unknown format\(s\) \['jsonl'\]"):
        load_recipe(tmp_path / "fmt.yaml")
    (tmp_path / "bold.yaml").write_text(text.replace("- jsonl\n", ""))
    with pytest.raises(RecipeError, match="tasks.0.prompt_level='bold_box': unknown prompt"):
        load_recipe(tmp_path / "bold.yaml")


@pytest.fixture
def registered(monkeypatch):
    """The two registrations, undone after the test (the registries are process-wide)."""
    monkeypatch.setattr(RENDERERS, "_entries", dict(RENDERERS._entries))
    monkeypatch.setattr(EXPORTERS, "_entries", dict(EXPORTERS._entries))
    RENDERERS.add("bold_box", BoldBoxRenderer())
    EXPORTERS.add("jsonl", export_jsonl)


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

    lines = (tmp_path / "out" / "jsonl" / "MedVQA_Demo.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [i.item_id for i in items]

"""The worked examples of CONTRIBUTING.md, run: each is a file under ``examples/``, and each
walk-through shows its file verbatim (the last tests compare them).

- ``examples/source/``: a source whose layout almost fits is one manifest plus its fixture;
- ``examples/layout_file_name_labels.py``: a layout reading the class from the file name;
- ``examples/task_scene_identification.py``: a task asking for the image's procedure;
- ``examples/renderer_bold_box.py``: the box level at twice the stroke;
- ``examples/exporter_jsonl.py``: one JSON object per multiple-choice item, images beside it.

The plug-ins are registered for the test only, by running their files, in a copy of their
registry without their names (so a contributor who followed a walk-through and registered the
same name in ``src/`` does not collide with the test). The demo recipe, cut down, asks for one
task at ``bold_box`` and for the ``jsonl`` format: the task plans box shapes, the render stage
draws them, the alignment check and the validate rules accept them, and the export holds every
item.
"""

from __future__ import annotations

import importlib.util
import json
import re
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
from medvqa_build.layouts import LAYOUTS
from medvqa_build.pipeline.build_dir import BuildDir
from medvqa_build.render import RENDERERS, prompt_levels
from medvqa_build.tasks import TASKS

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
EXPORTER = EXAMPLES / "exporter_jsonl.py"
RENDERER = EXAMPLES / "renderer_bold_box.py"
TASK = EXAMPLES / "task_scene_identification.py"
LAYOUT = EXAMPLES / "layout_file_name_labels.py"
NAMES = {
    RENDERERS: "bold_box",
    EXPORTERS: "jsonl",
    TASKS: "scene_identification",
    LAYOUTS: "file_name_labels",
}


def _run(path: Path, monkeypatch) -> object:
    """Run an example file as a module (it registers its plug-in), as ``src/`` would import it."""
    spec = importlib.util.spec_from_file_location(f"examples_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its code addresses the stages
    spec.loader.exec_module(module)
    return module


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
    for registry, name in NAMES.items():
        kept = {k: v for k, v in registry._entries.items() if k != name}
        monkeypatch.setattr(registry, "_entries", kept)


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
    """The renderer and the exporter, registered by running their files; undone after."""
    _run(RENDERER, monkeypatch)
    _run(EXPORTER, monkeypatch)


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


# --- examples/layout_file_name_labels.py ---------------------------------------------------
PATTERN = r"^(?P<group>bowel_\d+)_score_(?P<label>\d)_"


@pytest.fixture
def file_name_source(unregistered, tmp_path, monkeypatch):
    """A user manifest over the example layout: frames named ``bowel_<n>_score_<s>_<k>.jpg``."""
    _run(LAYOUT, monkeypatch)
    manifest = yaml.safe_load((SOURCE / "bowel-prep-example.yaml").read_text(encoding="utf-8"))
    manifest["id"] = "bowel-prep-names"
    manifest["archives"][0].update(parts=["named"])
    manifest["parts"] = [
        {
            "name": "named",
            "layout": "file_name_labels",
            "options": {"images_dir": "frames", "pattern": PATTERN},
        }
    ]
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "bowel-prep-names.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    monkeypatch.setenv("MEDVQA_MANIFESTS", str(folder))
    sources._load_all.cache_clear()
    frames = tmp_path / "data" / "frames"
    frames.mkdir(parents=True)
    pixels = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    names = [
        "bowel_1_score_0_001.jpg",
        "bowel_1_score_0_002.jpg",
        "bowel_2_score_3_001.jpg",
        "notes.jpg",
    ]
    for name in names:
        Image.fromarray(pixels).save(frames / name)
    yield tmp_path / "data"
    monkeypatch.delenv("MEDVQA_MANIFESTS")
    sources._load_all.cache_clear()


def test_a_new_layout_reads_class_and_group_from_the_file_name(file_name_source):
    result = load_source("bowel-prep-names", file_name_source)
    got = sorted((s.image, s.labels, s.group_id) for s in result.samples)
    assert got == [
        ("frames/bowel_1_score_0_001.jpg", ("bbps 0",), "bowel_1"),
        ("frames/bowel_1_score_0_002.jpg", ("bbps 0",), "bowel_1"),
        ("frames/bowel_2_score_3_001.jpg", ("bbps 3",), "bowel_2"),
    ]
    assert [(q.file, q.reason) for q in result.quarantined] == [
        ("frames/notes.jpg", f"file name does not match {PATTERN!r}")
    ]


# --- examples/task_scene_identification.py ------------------------------------------------
def test_a_new_task_builds_end_to_end(unregistered, tmp_path, monkeypatch):
    """The demo's source, asked only which procedure each image comes from."""
    recipe = yaml.safe_load((REPO / "recipes" / "demo.yaml").read_text())
    recipe["sources"][0]["generate"] = {"n_images": 20, "n_videos": 1, "frames_per_video": 8}
    task = {"name": "procedure", "generator": "scene_identification", "category": "Scene"}
    recipe["tasks"] = [{**task, "task": "Procedure Identification", "quota": 12, "n_options": 2}]
    recipe["export"]["formats"] = ["hf"]
    path = tmp_path / "scene.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    with pytest.raises(RecipeError, match="scene_identification"):
        load_recipe(path)  # unknown until its file runs
    module = _run(TASK, monkeypatch)

    result = build(load_recipe(path), tmp_path / "out", progress=False)
    items = list(result.items)
    assert len(items) == 12 and result.report["validation"]["problems"] == 0
    samples = {s.sample_id: s for s in BuildDir.open(result.out_dir).samples()}
    for item in items:
        assert item.gt == samples[item.sample_ids[0]].scene
        assert sorted(item.options) == ["Colonoscopy", "Surgical Endoscopy"]
        k = int(item.template_id.rsplit("/", 1)[1])
        assert item.question == module.SceneIdentification.templates[k]
    assert Counter(i.gt for i in items) == {"Colonoscopy": 6, "Surgical Endoscopy": 6}


# --- the walk-throughs are the files --------------------------------------------------------
@pytest.mark.parametrize(
    ("lang", "path"),
    [
        ("yaml", SOURCE / "bowel-prep-example.yaml"),
        ("python", LAYOUT),
        ("python", TASK),
        ("python", RENDERER),
        ("python", EXPORTER),
    ],
    ids=lambda v: v if isinstance(v, str) else v.name,
)
def test_the_walkthrough_shows_the_example_file(lang, path):
    """CONTRIBUTING.md shows each example as a block headed by its path, verbatim."""
    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    head = f"```{lang}\n# {path.relative_to(REPO).as_posix()}\n"
    assert text.count(head) == 1, f"CONTRIBUTING.md shows {path.name} {text.count(head)} times"
    block = text[text.index(head) + len(head) :]
    assert block[: block.index("```\n")] == path.read_text(encoding="utf-8")


def test_every_example_is_run_here():
    """A new file under examples/ gets a test here (the notebook has its own)."""
    here = Path(__file__).read_text(encoding="utf-8")
    files = [p for p in EXAMPLES.rglob("*") if p.is_file() and p.suffix in (".py", ".yaml")]
    named = {p for p in files if re.search(rf"\b{re.escape(p.stem)}\b", here) or p.name in here}
    assert sorted(map(str, set(files) - named)) == []

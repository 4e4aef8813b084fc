"""Items, tables and builds in a notebook, on a real build: thumbnails of the build's own
images, a seeded grid, the preview page built from the same fragment, and a build whose
rendered images are gone shown without them."""

import json
import shutil

import pytest

import medvqa_build as mb
from medvqa_build import view
from medvqa_build.cli import main
from medvqa_build.pipeline import BuildDir, BuildResult
from medvqa_build.review.preview import write_preview

SMALL = [
    "--set", "sources.0.generate.n_images=30", "--set", "sources.0.generate.frames_per_video=6",
    "--set", "tasks.0.quota=6", "--set", "tasks.1.quota=4", "--set", "tasks.2.quota=6",
    "--set", "tasks.3.quota=4", "--set", "tasks.4.quota=4", "--set", "tasks.5.quota=4",
]  # fmt: skip


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory, request):
    out = tmp_path_factory.mktemp("display")
    recipe = str(request.config.rootpath / "recipes" / "demo.yaml")
    assert main(["run", recipe, "-o", str(out), "-q", *SMALL]) == 0
    return out


@pytest.fixture(autouse=True)
def no_builds(monkeypatch):
    monkeypatch.setattr(view, "_THUMBNAILERS", {})


def test_a_build_shows_its_items_with_thumbnails(build_dir):
    result = mb.open_build(build_dir)
    assert isinstance(result, BuildResult) and result.recipe.name == "demo"
    html = result._repr_html_()
    assert html.count('src="data:image/jpeg;base64,') == 4 and "demo (benchmark" in html
    table = result.items._repr_html_()
    assert "ItemTable" in table and table.count("<img") == 4
    assert "task: Region Recognition</th><td>14" in table
    grid = result.show(task="Region Recognition", n=5, seed=1)
    again = result.show(task="Region Recognition", n=5, seed=1)
    assert [i.item_id for i in grid.items] == [i.item_id for i in again.items]
    assert len(grid) == 5 and all(i.task == "Region Recognition" for i in grid.items)
    assert grid.html.count('src="data:image/jpeg;base64,') == 5
    # the draw from the table is the draw from the same items as a list
    listed = view.pick_items(list(result.items), 5, 1, task="Region Recognition")
    assert [i.item_id for i in listed] == [i.item_id for i in grid.items]
    box = next(i for i in result.items if i.prompt_level == "box")
    assert box._repr_html_().count('src="data:image/jpeg;base64,') == 1


def test_a_build_without_rendered_images_shows_without_them(build_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(build_dir, copy, symlinks=True)
    meta = json.loads((copy / "build.json").read_text())
    shutil.rmtree(copy / meta["render_dir"] / "images")
    result = BuildResult.open(copy)
    boxes = result.show(task="Region Recognition", n=20)
    html = boxes.html
    rendered = [i for i in boxes.items if i.images[0].startswith("render://")]
    assert rendered and html.count("(no image file)") == len(rendered)
    assert html.count("<img") == len(boxes.items) - len(rendered)


def test_the_preview_page_embeds_the_same_fragment(build_dir, tmp_path):
    page = write_preview(build_dir, tmp_path / "p" / "index.html")
    data = json.loads(page.read_text().split('id="data">', 1)[1].split("</script>", 1)[0])
    items = {i.item_id: i for i in BuildDir.open(build_dir).items()}
    for entry in data["items"]:
        expected = view.item_html(items[entry["item_id"]], entry["images"], entry["clean"])
        assert entry["html"] == expected
    assert all((page.parent / s).is_file() for e in data["items"] for s in e["images"])

"""Recipe errors name the key, the bad value and the allowed values; the CLI exits 2."""

import copy

import pytest
import yaml

from medvqa_build.cli import main
from medvqa_build.errors import RecipeError
from medvqa_build.pipeline import build
from medvqa_build.pipeline.recipes import recipe_from_dict
from medvqa_build.recipe import Recipe


@pytest.fixture
def demo(repo):
    return yaml.safe_load((repo / "recipes" / "demo.yaml").read_text())


def test_demo_recipe_loads(repo):
    recipe = Recipe.from_yaml(repo / "recipes" / "demo.yaml")
    assert recipe.seed == 0 and [t.generator for t in recipe.tasks][0] == "image_classification"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["tasks"][0].update(generator="nope"),
            ["tasks.0.generator='nope'", "image_classification", "region_recognition"],
        ),
        (
            lambda d: d["tasks"][0].update(prompt_level="arrow"),
            ["tasks.0.prompt_level='arrow'", "image, box, contour, multi, coord"],
        ),
        (
            lambda d: d["tasks"][1].update(negatives={"strategy": "magic"}),
            ["tasks.1.negatives.strategy='magic'", "label_pool"],
        ),
        (lambda d: d.update(colour="red"), ["unknown key 'colour'"]),
        (
            lambda d: d["sources"][0].update(id="nowhere"),
            ["sources.0.id='nowhere'", "synthetic-endo"],
        ),
        (
            lambda d: d["tasks"][0].update(n_options=9),
            ["tasks.0.n_options=9", "less than or equal to 6"],
        ),
        (
            lambda d: d["export"].update(formats=["hf", "pdf"]),
            ["export.formats", "allowed: hf,", "vlmeval"],
        ),
        (lambda d: d["tasks"][0].update(where={"colour": "red"}), ["tasks.0.where", "modality"]),
    ],
)
def test_bad_values_are_named(demo, mutate, expected):
    data = copy.deepcopy(demo)
    mutate(data)
    with pytest.raises(RecipeError) as err:
        recipe_from_dict(data, where="demo.yaml")
    message = str(err.value)
    assert "\n" not in message
    for part in expected:
        assert part in message


def test_set_overrides(demo):
    recipe = Recipe.from_dict(copy.deepcopy(demo), ["seed=7", "tasks.0.quota=5", "export.name=X"])
    assert recipe.seed == 7 and recipe.tasks[0].quota == 5 and recipe.export.name == "X"
    with pytest.raises(RecipeError, match="not an index"):
        Recipe.from_dict(copy.deepcopy(demo), ["tasks.9.quota=5"])


def test_export_name_that_switches_vlmevalkit_to_circular_is_refused(demo):
    with pytest.raises(RecipeError, match="circular"):
        Recipe.from_dict(copy.deepcopy(demo), ["export.name=MyMMBench"])


def test_cli_bad_recipe_key_is_one_line_exit_2(tmp_path, demo, capsys):
    demo["tasks"][0]["generator"] = "nope"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(demo))
    assert main(["run", str(path), "-o", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert "tasks.0.generator='nope'" in err and "fix:" in err


def test_cli_missing_recipe_and_missing_root(tmp_path, demo, capsys):
    assert main(["run", str(tmp_path / "none.yaml")]) == 2
    assert "recipe file not found" in capsys.readouterr().err
    demo["sources"] = [{"id": "kvasir", "root": str(tmp_path / "absent")}]
    demo["tasks"] = [dict(demo["tasks"][0], where={})]  # kvasir has image labels only
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(demo))
    assert main(["run", str(path), "-o", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "1 source(s) missing: kvasir (expected at" in err and "kvasir-dataset-v2.zip" in err


def test_unset_environment_variable_in_root(tmp_path, demo, capsys, monkeypatch):
    monkeypatch.delenv("KVASIR_ROOT", raising=False)
    demo["sources"] = [{"id": "kvasir", "root": "${KVASIR_ROOT}"}]
    demo["tasks"] = [dict(demo["tasks"][0], where={})]
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(demo))
    assert main(["run", str(path), "-o", str(tmp_path / "out"), "-q"]) == 2
    assert "root ${KVASIR_ROOT} uses an unset environment variable" in capsys.readouterr().err


def test_task_its_sources_cannot_feed_is_rejected_at_load(demo):
    data = copy.deepcopy(demo)
    data["sources"] = [{"id": "kvasir", "root": "/data/kvasir"}]
    data["tasks"] = [dict(data["tasks"][2], where={})]  # region recognition needs regions
    with pytest.raises(RecipeError) as err:
        recipe_from_dict(data, where="demo.yaml")
    assert "tasks.0 (region-box)" in str(err.value) and "needs regions" in str(err.value)


def test_quota_scale(demo):
    recipe = Recipe.from_dict(copy.deepcopy(demo), ["quota_scale=0.1"])
    assert [recipe.quota(t) for t in recipe.tasks] == [8, 4, 6, 3, 3, 4]


def test_the_recipe_model_leaves_plugin_names_to_the_pipeline(demo, tmp_path):
    """recipe.py imports no plug-in: a generator name is checked by pipeline.recipes (which
    loads the plug-ins), and build() checks a Recipe made in Python the same way."""
    data = copy.deepcopy(demo)
    data["tasks"][0]["generator"] = "nope"
    recipe = Recipe.from_dict(copy.deepcopy(data), where="demo.yaml")
    assert recipe.tasks[0].generator == "nope"
    with pytest.raises(RecipeError, match=r"tasks\.0\.generator='nope': unknown task generator"):
        build(recipe, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()

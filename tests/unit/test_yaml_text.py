"""Issue 27: recipe and manifest YAML read defensively (store.yaml_text and its callers)."""

from __future__ import annotations

import pytest

from medvqa_build.errors import RecipeError
from medvqa_build.recipe import Recipe, apply_override, file_name
from medvqa_build.store.yaml_text import YamlProblem, check_sizes, load, read_utf8

BASE = {"name": "r", "benchmark": "B", "sources": [], "tasks": []}


def test_alias_bomb_stops_at_the_budget():
    text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{k}: &{k} [{', '.join(['*' + p] * 10)}]\n"
        for p, k in zip("abcdefgh", "bcdefghi", strict=True)
    )
    with pytest.raises(YamlProblem, match="aliases are expanded"):
        load(text)
    # a few repeated anchors are fine: 10 x 10 values
    assert len(load("a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nb: [*a, *a, *a]\n")["b"]) == 3


def test_an_alias_inside_its_own_anchor_stops_at_the_depth_cap():
    """``&a [*a, *a]`` nests without end: refused in one line, with bounded memory (the
    walk's key paths grew with the depth and filled memory before the node budget)."""
    for text in ("x: &a [*a, *a]", "x: &a {k: *a, j: *a}"):
        with pytest.raises(YamlProblem, match="nested more than 64 levels"):
            load(text)


def test_sizes_name_the_key():
    with pytest.raises(YamlProblem, match=r"^tasks\.0\.params\.text: string of 5,000"):
        check_sizes({"tasks": [{"params": {"text": "x" * 5000}}]})
    with pytest.raises(YamlProblem, match=r"^curate\.ids: list of 10,001 items"):
        check_sizes({"curate": {"ids": list(range(10_001))}})
    with pytest.raises(YamlProblem, match=r"^\(top level\): 10,001 keys"):
        check_sizes({str(i): i for i in range(10_001)})
    check_sizes({"tasks": [{"name": "x" * 4096}]})  # at the limit: fine


def test_read_utf8(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("name: café\n", encoding="utf-8")
    assert read_utf8(good) == "name: café\n"
    bad = tmp_path / "bad.yaml"
    bad.write_bytes("name: café\n".encode("latin-1"))
    with pytest.raises(YamlProblem, match="byte 0xe9 at offset 9"):
        read_utf8(bad)
    with pytest.raises(YamlProblem, match="not a regular file"):
        read_utf8(tmp_path)
    with pytest.raises(YamlProblem, match="more than the 10 allowed"):
        read_utf8(good, max_bytes=10)


def test_yaml_error_is_one_line():
    with pytest.raises(YamlProblem) as err:
        load("a: [1, 2\nb: {")
    assert "\n" not in str(err.value) and str(err.value).startswith("not valid YAML")


def test_recipe_from_dict_checks_sizes():
    with pytest.raises(RecipeError, match="benchmark: string of 10,000 characters"):
        Recipe.from_dict({**BASE, "benchmark": "x" * 10_000})
    with pytest.raises(RecipeError, match="benchmark"):  # the model's own cap, 200
        Recipe.from_dict({**BASE, "benchmark": "x" * 201})


@pytest.mark.parametrize(
    "name, ok",
    [
        ("lesion-type", True),
        ("Region Box v2.1", True),
        ("a" * 100, True),
        ("a" * 101, False),
        ("../escape", False),
        ("a/b", False),
        (".hidden", False),
        ("trailing.", False),
        ("nul\x00", False),
        ("", False),
    ],
)
def test_file_names(name, ok):
    if ok:
        assert file_name(name) == name
    else:
        with pytest.raises(ValueError, match="cannot name a file"):
            file_name(name)


def test_recipe_and_task_names_are_checked():
    with pytest.raises(RecipeError, match=r"name=.*cannot name a file"):
        Recipe.from_dict({**BASE, "name": "x/y"})


def test_set_invalid_yaml_names_the_text():
    with pytest.raises(RecipeError) as err:
        apply_override({}, "seed={oops", "recipe.yaml")
    line = str(err.value)
    assert "--set 'seed={oops'" in line and "'{oops'" in line and "\n" not in line


def test_set_value_alias_bomb():
    levels = ["&l0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"&l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 8)]
    with pytest.raises(RecipeError, match="aliases are expanded"):
        apply_override({}, f"curate.x=[{', '.join(levels)}]", "r")

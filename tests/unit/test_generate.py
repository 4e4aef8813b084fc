"""Generation rules: balanced letters, deterministic items, group-disjoint instruction split."""

import yaml

from medvqa_build.api import load_source
from medvqa_build.generate import generate_items
from medvqa_build.recipe import Recipe
from medvqa_build.sources import get_source


def _recipe(repo, **task_changes):
    data = yaml.safe_load((repo / "recipes" / "demo.yaml").read_text())
    data["tasks"] = [
        dict(data["tasks"][0], quota=5),
        dict(data["tasks"][0], name="train", quota=40, split="train"),
    ]
    return Recipe.from_dict(data)


def test_train_split_is_disjoint_by_group(synthetic_root, repo):
    samples = load_source("synthetic-endo", synthetic_root).samples
    manifests = {"synthetic-endo": get_source("synthetic-endo").manifest}
    result = generate_items(_recipe(repo), samples, manifests, progress=False)
    by_id = {s.sample_id: s for s in samples}
    test = [i for i in result.items if i.split == "test"]
    train = [i for i in result.items if i.split == "train"]
    assert len(test) == 5 and train
    test_groups = {by_id[i.sample_ids[0]].group_id for i in test}
    train_groups = {by_id[i.sample_ids[0]].group_id for i in train}
    assert test_groups and train_groups and not test_groups & train_groups
    assert result.shortfall.get("train", 0) == 40 - len(train)


def test_generation_is_deterministic_and_balanced(synthetic_root, repo):
    samples = load_source("synthetic-endo", synthetic_root).samples
    manifests = {"synthetic-endo": get_source("synthetic-endo").manifest}
    a = generate_items(_recipe(repo), samples, manifests, progress=False).items
    b = generate_items(_recipe(repo), samples, manifests, progress=False).items
    assert a == b
    letters = [i.answer for i in a if i.split == "test"]
    assert sorted(letters.count(x) for x in "ABCD") == [1, 1, 1, 2]
    for item in a:
        assert item.options[ord(item.answer) - 65] == item.gt
        assert len(set(item.options)) == 4 and item.gt not in item.negatives.candidates

"""Generation rules: balanced letters, deterministic items, group-disjoint instruction split,
and the round-robin order over truths."""

from array import array
from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from medvqa_build.api import load_source
from medvqa_build.recipe import Recipe
from medvqa_build.sources import get_source
from medvqa_build.stages import generate
from medvqa_build.stages.generate import generate_items


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


def _round_robin_lists(truths, rng):
    """The list-based round robin the array one replaced (generate.py before it)."""
    by_truth = defaultdict(list)
    for k, truth in enumerate(truths):
        by_truth[truth].append(k)
    queues = []
    for truth in sorted(by_truth):
        group = by_truth[truth]
        queues.append([group[i] for i in rng.permutation(len(group))])
    order = []
    for depth in range(max((len(q) for q in queues), default=0)):
        order += [q[depth] for q in queues if depth < len(q)]
    return order


@pytest.mark.parametrize("seed", range(6))
def test_round_robin_order_and_draws_equal_the_list_version(seed):
    rng = np.random.default_rng(seed)
    labels = [f"label {k}" for k in rng.permutation(int(rng.integers(1, 12)))]
    n = int(rng.integers(0, 400)) if seed else 0
    weights = rng.random(len(labels))
    truths = [labels[i] for i in rng.choice(len(labels), n, p=weights / weights.sum())]
    a, b = np.random.default_rng(seed + 100), np.random.default_rng(seed + 100)
    got = generate._round_robin(truths, a)
    assert got.dtype == np.int64 and got.tolist() == _round_robin_lists(truths, b)
    assert a.bit_generator.state == b.bit_generator.state  # the same draws, in the same order
    # a plan's truth codes (first-seen order) rank by name alike
    task = SimpleNamespace(truth_names={}, truth_codes=array("i"), source_codes=array("H"))
    for t in truths:
        task.truth_codes.append(task.truth_names.setdefault(t, len(task.truth_names)))
        task.source_codes.append(0)  # one source: its order is the plain round robin
    c = np.random.default_rng(seed + 100)
    assert generate._order_of_plan(task, c).tolist() == got.tolist()


def test_round_robin_gives_every_source_its_turn_within_a_truth():
    """Answer balance may keep a few candidates per truth: they come from every source."""
    truths = ["polyp"] * 9 + ["ulcer"] * 3
    sources = ["big"] * 8 + ["small"] + ["big", "small", "small"]
    order = generate._round_robin(truths, np.random.default_rng(0), sources).tolist()
    polyps = [sources[k] for k in order if truths[k] == "polyp"]
    assert "small" in polyps[:2] and sorted(polyps) == sorted(sources[:9])
    ulcers = [sources[k] for k in order if truths[k] == "ulcer"]
    assert ulcers[:2] in (["big", "small"], ["small", "big"])
    again = generate._round_robin(truths, np.random.default_rng(0), sources).tolist()
    assert again == order


def test_round_robin_takes_a_one_truth_source_last_within_a_truth():
    """Issue 32: a source that answers fewer truths than an item has options (a polyp-only
    set) gives its candidates after the sources that answer several, so the answer is not
    read off the source (the audit's answer share per source)."""
    truths = ["polyp"] * 6 + ["ulcer", "erosion", "bleeding"] * 2
    sources = ["cvc"] * 4 + ["edd"] * 2 + ["edd"] * 6
    for seed in range(5):
        order = generate._round_robin(truths, np.random.default_rng(seed), sources, 4).tolist()
        polyps = [sources[k] for k in order if truths[k] == "polyp"]
        assert polyps == ["edd", "edd", "cvc", "cvc", "cvc", "cvc"]
    # without n_options (free-form answers) the sources keep taking turns
    order = generate._round_robin(truths, np.random.default_rng(0), sources).tolist()
    polyps = [sources[k] for k in order if truths[k] == "polyp"]
    assert polyps[:4].count("cvc") >= 2
    poor = generate._poor_sources(np.array([0, 0, 1, 2, 3]), np.array([0, 0, 1, 1, 1]), 4)
    assert poor.tolist() == [True, True]  # 1 and 3 distinct truths, both under 4 options
    poor = generate._poor_sources(np.array([0, 1, 2, 3, 0]), np.array([1, 1, 1, 1, 0]), 4)
    assert poor.tolist() == [True, False]

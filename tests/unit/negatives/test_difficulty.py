"""Hard negatives make items measurably harder than random label-pool distractors."""

import numpy as np
import pytest

from medvqa_build.negatives import (
    SAMPLERS,
    BalancedSlots,
    OptionRequest,
    class_centroids,
    difficulty_report,
    format_difficulty,
    place_answer,
)
from medvqa_build.negatives.frequency import FrequencyLedger
from medvqa_build.negatives.offline_embedder import OfflineEmbedder
from medvqa_build.records import Item


def build_items(strategy, samples, emb, labels, n_options=4, seed=0, ledger=None, task=None):
    sampler = SAMPLERS.get(strategy)().fit(samples, emb, labels)
    rng = np.random.default_rng(seed)
    slots = BalancedSlots(rng)
    pool = tuple(sorted(set(labels)))
    items = []
    for s, truth in zip(samples, labels, strict=True):
        req = OptionRequest(truth, pool, n_options, sample=s, ledger=ledger)
        neg = sampler.sample(req, rng)
        options, pos = place_answer(truth, neg.candidates, slots.next(strategy, n_options), rng)
        items.append(
            Item(
                item_id=s.sample_id,
                benchmark="t",
                category="c",
                task=task or strategy,
                subtask="",
                source=s.source,
                sample_ids=(s.sample_id,),
                images=(s.image,),
                question="Which?",
                options=tuple(options),
                answer="ABCD"[pos],
                gt=truth,
                negatives=neg,
            )
        )
    return items


@pytest.fixture(scope="module")
def embedded(blob_dataset):
    samples, paths, labels = blob_dataset
    emb = OfflineEmbedder(workers=2).embed_paths(paths)
    return samples, emb, labels


def test_visual_class_is_harder_than_label_pool(embedded):
    samples, emb, labels = embedded
    by_id = {s.sample_id: e for s, e in zip(samples, emb, strict=True)}
    cents = class_centroids(emb, labels)
    easy = build_items("label_pool", samples, emb, labels)
    hard = build_items("visual_class", samples, emb, labels)
    report = difficulty_report(easy + hard, by_id, cents)
    lp, vc = report["label_pool"], report["visual_class"]
    assert lp["items"] == vc["items"] == len(samples) == vc["scored"]
    assert vc["distractor_truth_sim"] > lp["distractor_truth_sim"] + 0.01
    assert vc["image_distractor_sim"] > lp["image_distractor_sim"] + 0.01
    assert vc["ncc_accuracy"] < lp["ncc_accuracy"] - 0.05
    assert lp["chance"] == vc["chance"] == 0.25
    assert "| visual_class |" in format_difficulty(report)
    for row in (lp, vc):  # nothing is more similar than the most similar classes
        assert row["distractor_truth_sim"] <= row["hardest_truth_sim"]
    assert vc["hardest_truth_sim"] == lp["hardest_truth_sim"]  # the same truths


def test_balanced_frequency_costs_some_hardness_and_the_table_shows_it(embedded):
    """Issue 32.2: visual_class with the task's ledger stays harder than label_pool, a little
    less hard than pure visual ranking; the gap to ``hardest_truth_sim`` is the cost."""
    samples, emb, labels = embedded
    by_id = {s.sample_id: e for s, e in zip(samples, emb, strict=True)}
    cents = class_centroids(emb, labels)
    order = np.random.default_rng(0).permutation(len(samples))  # not class by class
    samples, emb = [samples[i] for i in order], emb[order]
    labels = [labels[i] for i in order]
    items = build_items("label_pool", samples, emb, labels, ledger=FrequencyLedger())
    items += build_items("visual_class", samples, emb, labels)
    items += build_items(
        "visual_class", samples, emb, labels, ledger=FrequencyLedger(), task="balanced"
    )
    report = difficulty_report(items, by_id, cents)
    lp, vc, bal = report["label_pool"], report["visual_class"], report["balanced"]
    sim = "distractor_truth_sim"
    assert lp[sim] < bal[sim] <= vc[sim] <= vc["hardest_truth_sim"]
    assert bal["ncc_accuracy"] < lp["ncc_accuracy"]


def test_report_skips_items_without_embeddings():
    item = Item(
        item_id="x",
        benchmark="b",
        category="c",
        task="t",
        subtask="",
        source="s",
        sample_ids=("missing",),
        images=("a.png",),
        question="q",
        options=("a", "b"),
        answer="A",
        gt="a",
    )
    rep = difficulty_report([item], {}, {"a": np.ones(2) / np.sqrt(2)})
    assert rep["t"]["items"] == 1 and rep["t"]["scored"] == 0

"""Hard negatives make items measurably harder than random label-pool distractors."""

import numpy as np
import pytest

from medvqa_build.negatives import (
    SAMPLERS,
    BalancedSlots,
    OfflineEmbedder,
    OptionRequest,
    class_centroids,
    difficulty_report,
    format_difficulty,
    place_answer,
)
from medvqa_build.records import Item


def build_items(strategy, samples, emb, labels, n_options=4, seed=0):
    sampler = SAMPLERS.get(strategy)().fit(samples, emb, labels)
    rng = np.random.default_rng(seed)
    slots = BalancedSlots(rng)
    pool = tuple(sorted(set(labels)))
    items = []
    for s, truth in zip(samples, labels, strict=True):
        neg = sampler.sample(OptionRequest(truth, pool, n_options, sample=s), rng)
        options, pos = place_answer(truth, neg.candidates, slots.next(strategy, n_options), rng)
        items.append(
            Item(
                item_id=s.sample_id,
                benchmark="t",
                category="c",
                task=strategy,
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

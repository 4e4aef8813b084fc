"""How hard the options of a set of items are, measured in an embedding space.

Per task: the mean cosine similarity of each distractor's class centroid to the truth's, the
same for the most similar classes there were (the hardest choice, ignoring the ontology: what
balancing distractor frequency gives up shows as the gap, issue 32.2), the mean similarity of
the item's image to its distractors' centroids, and the accuracy of a nearest-class-centroid
classifier that may only answer one of the item's options (chance is 1/n_options; hard
negatives push it down towards chance).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..records import Item
from .embedder import l2_normalise


def class_centroids(embeddings: np.ndarray, labels: Sequence[str | None]) -> dict[str, np.ndarray]:
    """Unit-norm mean embedding of each label (``None`` labels are skipped)."""
    embeddings = np.asarray(embeddings, dtype=np.float32)
    out: dict[str, np.ndarray] = {}
    for lab in sorted({lab for lab in labels if lab}):
        rows = [i for i, x in enumerate(labels) if x == lab]
        out[lab] = l2_normalise(embeddings[rows].mean(axis=0))
    return out


def _item_vector(item: Item, embeddings: Mapping[str, np.ndarray]) -> np.ndarray | None:
    vecs = [embeddings[s] for s in item.sample_ids if s in embeddings]
    return l2_normalise(np.mean(vecs, axis=0)) if vecs else None


def difficulty_report(
    items: Iterable[Item],
    embeddings: Mapping[str, np.ndarray],
    centroids: Mapping[str, np.ndarray],
) -> dict[str, dict[str, float | int]]:
    """``{task: {items, scored, distractor_truth_sim, hardest_truth_sim, image_distractor_sim,
    image_truth_sim, ncc_accuracy, chance}}``. Items whose image, truth centroid or every
    distractor centroid is unknown are counted in ``items`` but not ``scored``. ``items`` is
    read once; per item only its six scores are kept (as floats, for exact means)."""
    acc: dict[str, dict[str, array]] = {}
    n_items: Counter[str] = Counter()
    hardest: dict[str, np.ndarray] = {}  # truth -> the other classes' similarity, best first
    for item in items:
        stats = acc.get(item.task)
        if stats is None:
            keys = ("dt", "hard", "id", "it", "ok", "chance")
            stats = acc[item.task] = {k: array("d") for k in keys}
        n_items[item.task] += 1
        vec = _item_vector(item, embeddings)
        truth = centroids.get(item.gt)
        distractors = [o for o in item.options if o != item.gt and o in centroids]
        if vec is None or truth is None or not distractors:
            continue
        d = np.stack([centroids[o] for o in distractors])
        stats["dt"].append(float((d @ truth).mean()))
        if item.gt not in hardest:
            sims = [float(c @ truth) for k, c in centroids.items() if k != item.gt]
            hardest[item.gt] = -np.sort(-np.array(sims))
        stats["hard"].append(float(hardest[item.gt][: len(distractors)].mean()))
        stats["id"].append(float((d @ vec).mean()))
        stats["it"].append(float(truth @ vec))
        known = [o for o in item.options if o in centroids]
        sims = np.array([float(centroids[o] @ vec) for o in known])
        stats["ok"].append(float(known[int(np.argmax(sims))] == item.gt))
        stats["chance"].append(1.0 / len(item.options))

    def mean(xs: array) -> float:
        return round(float(np.mean(xs)), 4) if xs else float("nan")

    return {
        task: {
            "items": n_items[task],
            "scored": len(s["ok"]),
            "distractor_truth_sim": mean(s["dt"]),
            "hardest_truth_sim": mean(s["hard"]),
            "image_distractor_sim": mean(s["id"]),
            "image_truth_sim": mean(s["it"]),
            "ncc_accuracy": mean(s["ok"]),
            "chance": mean(s["chance"]),
        }
        for task, s in sorted(acc.items())
    }


def format_difficulty(report: Mapping[str, Mapping[str, float | int]]) -> str:
    """The report as a Markdown table (for the build report)."""
    cols = ["items", "scored", "distractor_truth_sim", "hardest_truth_sim", "image_distractor_sim"]
    cols += ["ncc_accuracy", "chance"]
    lines = ["| task | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for task, row in report.items():
        lines.append(f"| {task} | " + " | ".join(str(row[c]) for c in cols) + " |")
    return "\n".join(lines)

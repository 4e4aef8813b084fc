"""The build report (report.json + report.md): counts that add up, what was left out and why,
letters per task, and the difficulty of the distractors."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable

import numpy as np

from .records import Item
from .runner import write_text_atomic
from .validate.checks import LetterTally


def difficulty(items: Iterable[Item], samples, embeddings) -> dict:
    """Per (task, negative strategy): distractor similarity and nearest-centroid accuracy.

    Two passes over ``items`` (a list or a table): the first sums, per truth label, the
    embeddings of its items' first samples into that label's centroid; the second scores the
    items one by one. ``samples`` is not read.
    """
    if embeddings is None:
        return {}
    from .negatives import difficulty_report
    from .negatives.embedder import l2_normalise

    # the centroids of class_centroids (the unit-norm float32 mean of each label's vectors,
    # in item order) from running sums: numpy's mean over rows adds them one after another
    # in float32, so the sums are the same to the bit, without holding every vector
    sums: dict[str, list] = {}
    labelled = False
    for i in items:
        sid = i.sample_ids[0]
        if sid not in embeddings:
            continue
        labelled = True
        if not i.gt:
            continue
        row = np.asarray(embeddings[sid], dtype=np.float32)
        acc = sums.get(i.gt)
        if acc is None:
            sums[i.gt] = [np.array(row, dtype=np.float32, copy=True), 1]
        else:
            acc[0] += row
            acc[1] += 1
    if not labelled:
        return {}
    centroids = {}
    for label in sorted(sums):
        total, n = sums[label]
        # the division np.mean makes
        np.true_divide(total, np.intp(n), out=total, casting="unsafe", subok=False)
        centroids[label] = l2_normalise(total)
    tagged = (
        i.replace(task=f"{i.task} [{i.negatives.strategy if i.negatives else '-'}]") for i in items
    )
    report = difficulty_report(tagged, embeddings, centroids)
    # NaN (nothing scored) is not valid JSON: report it as null
    return {
        t: {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
        for t, row in report.items()
    }


def write_report(
    out,
    recipe,
    stages,
    source_counts,
    quarantine,
    gen,
    val,
    items,
    checksums,
    difficulty=None,
    missing=(),
) -> dict:
    from .baselines import ENDOBENCH_RANDOM, ChanceTally, baseline_rows

    ren_stats = next((s.stats for s in stages if s.name == "render"), {})
    # one pass over the items, keeping counts only
    n_items, per_task, letters = 0, Counter(), LetterTally()
    test = ChanceTally()  # the random baseline is that of the test split (or of all items)
    for item in items:
        n_items += 1
        per_task[item.task] += 1
        letters.add(item)
        if item.split in (None, "test"):
            test.add(item)
    # expected accuracy of random guessing per task (percent), beside EndoBench's published
    # random row when the build is an EndoBench rebuild
    published = ENDOBENCH_RANDOM if recipe.benchmark == "EndoBench" else {}
    report = {
        "recipe": recipe.name,
        "benchmark": recipe.benchmark,
        "seed": recipe.seed,
        "sources": source_counts,
        "missing_sources": list(missing),
        "quarantined": [
            {"file": q.file, "source": q.source, "reason": q.reason} for q in quarantine
        ],
        "items": n_items,
        "items_per_task": dict(sorted(per_task.items())),
        "dropped": gen.stats.get("dropped", 0),
        "render_quarantined": ren_stats.get("quarantined", 0),
        "shortfall": gen.stats.get("shortfall", {}),
        "validation": val.stats,
        "answer_letters": letters.histogram(),
        "stages": [
            {"stage": s.name, "path": s.path.relative_to(out).as_posix(), "reused": s.reused}
            for s in stages
        ],
        "random_baseline": baseline_rows(test, published=published),
        "difficulty": difficulty or {},
        "exports": checksums,
    }
    write_text_atomic(out / "report.json", json.dumps(report, indent=2, sort_keys=False) + "\n")
    lines = [
        f"# Build report: {recipe.name}",
        "",
        "| source | found | converted | quarantined |",
        "|---|---|---|---|",
    ]
    for sid, c in source_counts.items():
        lines.append(f"| {sid} | {c['found']} | {c['converted']} | {c['quarantined']} |")
    if missing:
        lines += ["", "Missing sources (left out with --allow-missing):"] + [
            f"- {m}" for m in missing
        ]
    lines += ["", "| task | items |", "|---|---|"]
    lines += [f"| {t} | {n} |" for t, n in report["items_per_task"].items()]
    lines += [
        "",
        f"Dropped candidates: {report['dropped']}; "
        f"quota shortfall: {report['shortfall'] or 'none'}.",
        f"Validation problems: {val.stats['problems']}.",
        "",
    ]
    if report["random_baseline"]:
        from .baselines import format_baseline_table

        lines += [
            "## Random-guess baseline",
            "",
            format_baseline_table(report["random_baseline"]),
            "",
        ]
    if difficulty:
        from .negatives import format_difficulty

        lines += ["## Difficulty of the distractors", "", format_difficulty(difficulty), ""]
    if quarantine:
        lines += (
            ["## Quarantine", ""]
            + [f"- `{q.file}` ({q.source}): {q.reason}" for q in quarantine]
            + [""]
        )
    write_text_atomic(out / "report.md", "\n".join(lines))
    return report

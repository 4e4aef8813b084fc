"""The build report (report.json + report.md): counts that add up, what was left out and why,
letters per task, and the difficulty of the distractors."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np

from .records import Item, Sample
from .runner import write_text_atomic
from .validate import letter_histogram


def difficulty(items: list[Item], samples: list[Sample], embeddings) -> dict:
    """Per (task, negative strategy): distractor similarity and nearest-centroid accuracy."""
    if embeddings is None:
        return {}
    from .negatives import class_centroids, difficulty_report

    labelled = [(embeddings[i.sample_ids[0]], i.gt) for i in items if i.sample_ids[0] in embeddings]
    if not labelled:
        return {}
    centroids = class_centroids(np.stack([v for v, _ in labelled]), [g for _, g in labelled])
    tagged = [
        i.replace(task=f"{i.task} [{i.negatives.strategy if i.negatives else '-'}]") for i in items
    ]
    report = difficulty_report(tagged, embeddings, centroids)
    # NaN (nothing scored) is not valid JSON: report it as null
    return {
        t: {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
        for t, row in report.items()
    }


def _baselines(recipe, items: list[Item]) -> list[dict]:
    """Expected accuracy of random guessing per task (percent), beside EndoBench's published
    random row when the build is an EndoBench rebuild."""
    from .baselines import ENDOBENCH_RANDOM, baseline_rows

    published = ENDOBENCH_RANDOM if recipe.benchmark == "EndoBench" else {}
    return baseline_rows([i for i in items if i.split in (None, "test")], published=published)


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
    ren_stats = next((s.stats for s in stages if s.name == "render"), {})
    report = {
        "recipe": recipe.name,
        "benchmark": recipe.benchmark,
        "seed": recipe.seed,
        "sources": source_counts,
        "missing_sources": list(missing),
        "quarantined": [
            {"file": q.file, "source": q.source, "reason": q.reason} for q in quarantine
        ],
        "items": len(items),
        "items_per_task": dict(sorted(Counter(i.task for i in items).items())),
        "dropped": gen.stats.get("dropped", 0),
        "render_quarantined": ren_stats.get("quarantined", 0),
        "shortfall": gen.stats.get("shortfall", {}),
        "validation": val.stats,
        "answer_letters": letter_histogram(items),
        "stages": [
            {"stage": s.name, "path": s.path.relative_to(out).as_posix(), "reused": s.reused}
            for s in stages
        ],
        "random_baseline": _baselines(recipe, items),
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

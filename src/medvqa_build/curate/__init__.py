"""Curation: deduplication (exact, perceptual, embedding), k-center selection balanced over
labels, and group-aware stratified splits. Recipe key ``curate`` (docs/curation.md)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..media.phash import hamming, phash_array, phash_bytes, phash_file
from ..records import Item, Sample, item_groups
from .dedup import DuplicateGroup, content_key, duplicates_of, find_duplicates
from .facts import SampleFacts
from .select import kcenter_greedy, label_key, select_rows, select_samples, water_fill
from .spec import CurateSpec, DedupSpec, SelectSpec, SplitSpec, parse_curate_spec
from .splits import assign_splits_with


def curate_samples(
    spec_dict: dict[str, Any] | CurateSpec | None,
    samples: Sequence[Sample],
    embeddings: dict[str, np.ndarray] | None,
    roots: dict[str, Path],
    seed: int,
) -> tuple[list[Sample], dict]:
    """Deduplicate, then select; returns the kept samples (input order) and the report section.

    The report's counts add up: ``kept + len(removed) == input``; every removed sample names
    its stage, its duplicate group and representative (dedup) or its label (selection).
    """
    samples = list(samples)
    report = curate_report(spec_dict, samples, embeddings, roots, seed)
    removed = {r["sample_id"] for r in report["removed"]}
    return [s for s in samples if s.sample_id not in removed], report


def curate_report(
    spec_dict: dict[str, Any] | CurateSpec | None,
    samples: Iterable[Sample],
    embeddings: dict[str, np.ndarray] | None,
    roots: dict[str, Path],
    seed: int,
) -> dict:
    """The report of :func:`curate_samples` without the kept samples: ``samples`` are read
    once (a list, or a :class:`~medvqa_build.tables.SampleTable` a batch at a time) and
    only their :class:`~.facts.SampleFacts` are kept."""
    spec = parse_curate_spec(spec_dict)
    facts = SampleFacts.collect(samples, spec.dedup, roots)
    ids = facts.ids
    removed: list[dict] = []
    report: dict[str, Any] = {"input": len(facts), "spec": spec.model_dump(mode="json")}
    kept: Iterable[int] = range(len(facts))
    if spec.dedup is not None:
        groups, stats = duplicates_of(facts, spec.dedup, embeddings)
        criteria_of: dict[str, set[str]] = {}
        for g in groups:
            for e in g.edges:
                for sid in (e["a"], e["b"]):
                    criteria_of.setdefault(sid, set()).add(e["criterion"])
            for sid in g.members[1:]:
                removed.append(
                    {
                        "sample_id": sid,
                        "stage": "dedup",
                        "group": g.group_id,
                        "representative": g.representative,
                        "criteria": sorted(criteria_of.get(sid, ())),
                    }
                )
        dropped = {r["sample_id"] for r in removed}
        kept = [i for i, sid in enumerate(ids) if sid not in dropped]
        report["dedup"] = {
            **stats,
            "groups": len(groups),
            "removed": len(dropped),
            "cross_source_groups": sum(
                1 for g in groups if len({m.split(":", 1)[0] for m in g.members}) > 1
            ),
            "duplicate_groups": [g.to_dict() for g in groups],
        }
    if spec.select is not None:
        before = list(kept)
        chosen, sel = select_rows(facts, before, spec.select, embeddings, seed)
        for i in before:
            if i not in chosen:
                label = facts.label_names[facts.labels[i]]
                removed.append({"sample_id": ids[i], "stage": "select", "label": label})
        report["select"] = {"input": len(before), "removed": len(before) - len(chosen), **sel}
        kept = chosen
    report["kept"] = len(kept)
    report["removed"] = removed
    return report


def duplicate_groups(report: dict) -> list[list[str]]:
    """The members of every duplicate group of a curate report (for the split-leak rule)."""
    return [g["members"] for g in (report.get("dedup") or {}).get("duplicate_groups", [])]


def assign_splits(
    spec_dict: dict[str, Any] | CurateSpec | None,
    items: Sequence[Item],
    samples_by_id: dict[str, Sample],
    seed: int,
) -> list[Item]:
    """Items with ``split`` set by the recipe's ``curate.split`` (unchanged without one)."""
    spec = parse_curate_spec(spec_dict)
    if spec.split is None:
        return list(items)
    return assign_splits_with(spec.split, items, samples_by_id, seed)


__all__ = [
    "CurateSpec",
    "DedupSpec",
    "DuplicateGroup",
    "SelectSpec",
    "SplitSpec",
    "assign_splits",
    "content_key",
    "curate_report",
    "curate_samples",
    "duplicate_groups",
    "find_duplicates",
    "hamming",
    "item_groups",
    "kcenter_greedy",
    "label_key",
    "parse_curate_spec",
    "phash_array",
    "phash_bytes",
    "phash_file",
    "select_samples",
    "water_fill",
]

"""Candidates from Arrow columns of the sample table, for planning without a Sample per row
(:mod:`medvqa_build.stages.plan_columns`).

A generator's ``column_candidates(batch, pool)`` gets a batch of columns (``plan_columns``, Parquet
column paths, a nested one reading only that field, plus ``sample_id``, ``source``,
``modality``, ``group_id``; keyed by top-level name) and the positions of the batch's pool
samples (ascending), and returns its candidates as the row pass would find them: their
positions, their ordinals among their sample's candidates, and their truths, ordered by
position, then ordinal. Data the columns cannot stand for exactly raises :class:`NotColumnar`
(the task is then planned from Samples).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Columns = tuple[np.ndarray, np.ndarray, pa.Array]  # positions, ordinals, truths (strings)


class NotColumnar(Exception):
    """The batch holds data the columns cannot plan exactly (e.g. a null label)."""


def _of_pool(column: pa.Array, pool: np.ndarray) -> pa.Array:
    """The values of ``column`` at the pool's positions (the column itself when every sample
    of the batch is in the pool)."""
    if len(pool) == len(column):
        return column
    return column.take(pa.array(pool, pa.int64()))


def single_labels(batch: dict[str, pa.Array], pool: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """The pool positions whose ``labels`` hold exactly one label, and those labels."""
    labels = _of_pool(batch["labels"], pool)
    one = np.asarray(pc.list_value_length(labels).fill_null(0)) == 1
    values = pc.list_flatten(labels.filter(pa.array(one)))
    if values.null_count:
        raise NotColumnar("a null label")
    return pool[one], values


def attribute_values(batch: dict[str, pa.Array], pool: np.ndarray, key: str) -> pa.Array:
    """Each pool sample's value of the attribute ``key`` (the last one, as a dict of the map
    keeps it), None where it has none."""
    attrs = _of_pool(batch["attributes"], pool)
    if attrs.items.null_count or attrs.keys.null_count:
        raise NotColumnar("a null attribute")
    return pc.map_lookup(attrs, pa.scalar(key, pa.string()), "last")


Entries = tuple[np.ndarray, pa.Array, pa.Array]  # pool indices, keys, values (strings)


def map_entries(batch: dict[str, pa.Array], pool: np.ndarray) -> Entries:
    """The pool samples' ``attributes`` as flat arrays: each entry's pool index, key, value."""
    attrs = _of_pool(batch["attributes"], pool)
    entry = pa.struct([("key", attrs.type.key_type), ("value", attrs.type.item_type)])
    try:
        rows = attrs.cast(pa.list_(entry))  # (list_flatten of a map itself aborts)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise NotColumnar("an attributes column that is not a map of strings") from None
    flat = pc.list_flatten(rows)
    keys, values = pc.struct_field(flat, "key"), pc.struct_field(flat, "value")
    if keys.null_count or values.null_count:
        raise NotColumnar("a null attribute")
    return np.asarray(pc.list_parent_indices(rows), np.int64), keys, values


def tool_flags(batch: dict[str, pa.Array], pool: np.ndarray, prefix: str) -> Entries:
    """The pool samples' attributes whose key starts with ``prefix``: each one's pool index,
    name (the key less the prefix) and value. A key twice in a sample (a dict would keep one)
    is for the row pass."""
    parents, keys, values = map_entries(batch, pool)
    mine = np.asarray(pc.starts_with(keys, prefix))
    parents = parents[mine]
    keys = keys.filter(pa.array(mine))
    values = values.filter(pa.array(mine))
    codes = np.asarray(keys.dictionary_encode().indices, np.int64)
    pairs = parents * (int(codes.max()) + 1 if len(codes) else 1) + codes
    if len(np.unique(pairs)) != len(pairs):
        raise NotColumnar("an attribute twice in a sample")
    names = pc.utf8_slice_codeunits(keys, len(prefix))
    return parents, names, values


def one_per_sample(pool: np.ndarray, values: Iterable[str | None], keep: Callable) -> Columns:
    """At most one candidate per pool sample (``values`` aligned with ``pool``): those whose
    value ``keep`` maps to a truth (None: no candidate), each distinct value mapped once."""
    encoded = pa.array(values, pa.string()).dictionary_encode()
    truths = [keep(v) for v in encoded.dictionary.to_pylist()]
    codes = np.asarray(encoded.indices.fill_null(len(truths)), np.int64)
    kept = np.array([t is not None for t in truths] + [False], bool)[codes]
    mapped = pa.array([t if t is not None else "" for t in truths], pa.string())
    truth = mapped.take(pa.array(codes[kept], pa.int64()))
    return pool[kept], np.zeros(int(kept.sum()), np.int64), truth


def strings(values: Iterable) -> list[str]:
    """``values`` (a recipe parameter) as a list of strings; anything else is for the row
    pass (a set of non-strings compares as the row pass compares it, not as Arrow would)."""
    out = list(values)
    if not all(isinstance(v, str) for v in out):
        raise NotColumnar("a parameter that is not a list of strings")
    return out


def per_sample_hits(batch: dict[str, pa.Array], pool: np.ndarray, allowed, excluded) -> Columns:
    """One candidate per pool sample none of whose ``labels`` is in ``excluded`` and exactly
    one of whose labels (counted with repeats) is in ``allowed``: truth that label. A null
    label is in neither (as ``None in set_of_strings`` is not)."""
    labels = _of_pool(batch["labels"], pool)
    parents = np.asarray(pc.list_parent_indices(labels), np.int64)
    flat = pc.list_flatten(labels)
    hit = np.asarray(pc.is_in(flat, pa.array(strings(allowed), pa.string())).fill_null(False))
    out = np.asarray(pc.is_in(flat, pa.array(strings(excluded), pa.string())).fill_null(False))
    n = len(pool)
    ok = (np.bincount(parents[out], minlength=n) == 0) & (
        np.bincount(parents[hit], minlength=n) == 1
    )
    take = np.flatnonzero(hit & ok[parents]) if len(parents) else np.zeros(0, np.int64)
    return pool[ok], np.zeros(int(ok.sum()), np.int64), flat.take(pa.array(take, pa.int64()))


def region_columns(batch: dict[str, pa.Array], pool: np.ndarray, labels: Iterable[str]) -> Columns:
    """:func:`~.common.region_candidates` from the ``regions`` column: one candidate per
    region with a box (only ``labels``, when given), truth its label."""
    at, ordinals, label, _ = _boxed_regions(batch, pool, labels)
    return at, ordinals, label


def region_boxes(batch: dict[str, pa.Array], pool: np.ndarray, labels: Iterable[str]):
    """The regions of :func:`region_columns`, with their boxes: positions, labels and boxes
    (float64, (n, 4)), as :meth:`~.box_options.BoxPool.of` reads them from Samples."""
    at, _, label, boxes = _boxed_regions(batch, pool, labels)
    values = pc.list_flatten(boxes)
    if values.null_count or len(values) != 4 * len(boxes):
        raise NotColumnar("a box without four numbers")
    return at, label, np.asarray(values, np.float64).reshape(-1, 4)


def _boxed_regions(batch: dict[str, pa.Array], pool: np.ndarray, labels: Iterable[str]):
    regions = _of_pool(batch["regions"], pool)
    parents = np.asarray(pc.list_parent_indices(regions), np.int64)
    flat = pc.list_flatten(regions)
    if flat.null_count:
        raise NotColumnar("a null region")
    label = pc.struct_field(flat, "label")
    if label.null_count:
        raise NotColumnar("a region without a label")
    bbox = pc.struct_field(flat, "bbox")
    keep = np.asarray(pc.is_valid(bbox))
    only = sorted(set(strings(labels)))
    if only:
        keep &= np.asarray(pc.is_in(label, pa.array(only, pa.string())).fill_null(False))
    idx = np.flatnonzero(keep)
    owner = parents[idx]
    take = pa.array(idx, pa.int64())
    return pool[owner], run_ordinals(owner), label.take(take), bbox.take(take)


def run_ordinals(at: np.ndarray) -> np.ndarray:
    """Each candidate's ordinal among its sample's (``at``: their positions, ascending)."""
    if not len(at):
        return np.zeros(0, np.int64)
    starts = np.flatnonzero(np.r_[True, at[1:] != at[:-1]])
    return np.arange(len(at), dtype=np.int64) - np.repeat(starts, np.diff(np.r_[starts, len(at)]))


def first_label_or_modality(batch: dict[str, pa.Array], pool: np.ndarray) -> Columns:
    """One candidate per pool sample, truth its first label, or its modality when it has
    none (a null label or modality: a null truth, for the row pass)."""
    labels = _of_pool(batch["labels"], pool)
    parents = np.asarray(pc.list_parent_indices(labels), np.int64)
    owners, first = np.unique(parents, return_index=True)
    truths = _of_pool(batch["modality"], pool).to_numpy(zero_copy_only=False).astype(object)
    truths[owners] = (
        pc.list_flatten(labels).take(pa.array(first, pa.int64())).to_numpy(zero_copy_only=False)
    )
    return pool, np.zeros(len(pool), np.int64), pa.array(truths, pa.string())


__all__ = [
    "Columns",
    "NotColumnar",
    "attribute_values",
    "first_label_or_modality",
    "map_entries",
    "one_per_sample",
    "region_boxes",
    "region_columns",
    "run_ordinals",
    "per_sample_hits",
    "single_labels",
    "strings",
    "tool_flags",
]

"""Plan ``per_sample`` tasks from a few columns of the sample table, without a Sample per row.

Planning a task (:func:`~.generate._plan_pools`) needs, per pool sample, only whether it is in
the task's pool and its candidates' truths; decoding every row into a :class:`Sample` (its
regions, masks and polygons) for that made the plan the one cost of the embed and generate
stages that grew with the raw download (issue 35). A generator that can compute its
candidates' truths from Arrow columns says so with ``plan_columns`` (the columns it reads) and
``column_candidates``; its tasks are then planned here, batch by batch over just those
columns, into exactly the plan the row pass makes: the same rows, ordinals, truth codes (in
order of first appearance), source codes, vocabulary samples (the first sample of each truth
per source, read by row number) and, for a visual task, the same fit references and labels.

A generator that reads its whole pool before its candidates (``scans_pool``) is planned from
columns only where it also offers ``column_scan`` (each batch's pool) and ``column_scanned``
(after the last batch), written next to its ``scan``: with ``scan_first`` its candidates depend
on the scan (the columns are then read twice), else the scan is made as the task is planned.

A generator whose ``candidates`` is not the one its ``column_candidates`` was written for (a
subclass overriding it), one that draws from its pool, a ``where`` value that is not
a string, a list of samples instead of a table, or data the columns cannot stand for (a null
label) leave the task to the row pass, which plans it as before.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..store.parquet import iter_batches, open_parquet
from ..store.tables import SampleTable
from ..tasks.columns import NotColumnar

BASE_COLUMNS = ("sample_id", "source", "modality", "group_id")
_INT = np.dtype(f"i{array('i').itemsize}")


def columnar(gen) -> bool:
    """Whether ``gen``'s candidates can be planned from columns: its class's
    ``column_candidates`` was written next to the ``candidates`` it uses."""
    cls = type(gen)
    if not gen.per_sample or gen.draws_from_pool or gen.groups_pool:
        return False
    owner = next((c for c in cls.__mro__ if "column_candidates" in c.__dict__), None)
    if owner is None or cls.candidates is not owner.__dict__.get("candidates"):
        return False
    if not gen.scans_pool:
        return True
    # a task that reads its whole pool first: its scan too, written next to its column_scan
    scanner = next((c for c in cls.__mro__ if "column_scan" in c.__dict__), None)
    return scanner is not None and cls.scan is scanner.__dict__.get("scan")


def _where_ok(where: dict) -> bool:
    for wanted in where.values():
        values = [wanted] if isinstance(wanted, str) else wanted
        if not isinstance(values, list | tuple) or not all(isinstance(v, str) for v in values):
            return False
    return True


def plan_by_columns(tasks: list, source, embeddings) -> list:
    """Plan the ``tasks`` that can be planned from columns (their ``rows``, ``ordinals``,
    ``truth_codes``, ``source_codes``, ``truth_names``, ``vocab_samples``, ``fit_refs`` and
    ``fit_labels``, as :func:`~.generate._plan_pools` fills them); returns the others."""
    if not isinstance(source, SampleTable):
        return list(tasks)
    mine = [t for t in tasks if columnar(t.gen) and _where_ok(t.spec.where)]
    rest = [t for t in tasks if t not in mine]
    if not mine:
        return rest
    columns = list(BASE_COLUMNS)
    for t in mine:
        for c in (*t.spec.where, *t.gen.plan_columns):
            if c not in columns:
                columns.append(c)
    plans = {id(t): _ColumnPlan(t) for t in mine}
    for plan in plans.values():
        plan.embeddings = embeddings

    def give_up(t) -> None:  # planned from Samples instead, from the start
        mine.remove(t)
        rest.append(t)
        t.truth_names.clear()
        t.fit_refs, t.fit_labels = type(t.fit_refs)(), []  # a plan's fit starts empty

    # a generator whose candidates depend on its whole pool (scan_first: which tools a source
    # annotates) reads it in a pass of its own first; another scans as it plans
    first = [t for t in mine if t.gen.scans_pool and t.gen.scan_first]
    if first:
        for batch, keep, _ in _batches(source, columns):
            for t in [t for t in first if t in mine]:
                try:
                    t.gen.column_scan(batch, plans[id(t)].pool(batch, keep))
                except NotColumnar:
                    give_up(t)
        for t in first:
            if t in mine:
                t.gen.column_scanned()
    for batch, keep, offset in _batches(source, columns):
        for t in list(mine):
            try:
                plans[id(t)].add(batch, keep, offset)
            except NotColumnar:
                give_up(t)
    for t in mine:
        if t.gen.scans_pool and not t.gen.scan_first:
            t.gen.column_scanned()
        plans[id(t)].finish(source)
    return [t for t in tasks if t in rest]  # in the phase's order


def _batches(source: SampleTable, columns: list[str]):
    """(batch of ``columns`` by name, which of its rows are not excluded, its first row's
    number) for each batch of the table."""
    offset = 0
    for table in _read(source, columns):
        batch = {c: table.column(c).combine_chunks() for c in table.column_names}
        keep = np.ones(table.num_rows, bool)
        if source.exclude:
            excluded = pc.is_in(batch["sample_id"], pa.array(sorted(source.exclude)))
            keep &= ~np.asarray(excluded.fill_null(False))
        yield batch, keep, offset
        offset += table.num_rows


def _read(source: SampleTable, columns: list[str]):
    """The table's batches (as :meth:`SampleTable.numbered_batches` numbers them) with only
    ``columns``; a nested path (``regions.list.element.label``) reads only that field, or its
    whole top-level column where the file names it otherwise."""
    for path in source.paths:
        pf = open_parquet(path)
        leaves = [pf.schema.column(i).path for i in range(len(pf.schema))]
        wanted: list[str] = []
        for c in columns:
            found = any(leaf == c or leaf.startswith(c + ".") for leaf in leaves)
            name = c if found else c.split(".", 1)[0]
            if name not in wanted:
                wanted.append(name)
        wanted = [c for c in wanted if "." not in c or c.split(".", 1)[0] not in wanted]
        for batch in iter_batches(pf, source.batch_rows, wanted):
            yield pa.Table.from_batches([batch])


def _is_in(values: pa.Array, allowed: Sequence[str]) -> np.ndarray:
    return np.asarray(pc.is_in(values, pa.array(list(allowed), pa.string())).fill_null(False))


class _ColumnPlan:
    """One task's plan, gathered batch by batch."""

    def __init__(self, task) -> None:
        self.task = task
        # the plan, grown batch by batch in its final arrays (one block each, no parts)
        self.rows, self.ordinals = array("q"), array("i")
        self.codes, self.source_codes = array("i"), array("H")
        self.vocab_rows: dict[tuple[int, int], int] = {}  # (source code, truth code) -> row
        self.embeddings = None  # set by plan_by_columns: what decides a pool sample's fit

    def pool(self, batch: dict[str, pa.Array], keep: np.ndarray) -> np.ndarray:
        """The positions of the batch's samples in the task's pool."""
        task = self.task
        ok = keep & _is_in(batch["source"], task.sources)
        for key, wanted in task.spec.where.items():
            ok &= _is_in(batch[key], [wanted] if isinstance(wanted, str) else wanted)
        if task.groups:
            ok &= ~_is_in(batch["group_id"].fill_null(""), sorted(task.groups))
        return np.flatnonzero(ok)

    def add(self, batch: dict[str, pa.Array], keep: np.ndarray, offset: int) -> None:
        task = self.task
        pool = self.pool(batch, keep)
        if task.gen.scans_pool and not task.gen.scan_first:
            task.gen.column_scan(batch, pool)
        at, ordinals, truths = task.gen.column_candidates(batch, pool)
        if truths.null_count:
            raise NotColumnar("a candidate without a truth")
        # codes in order of first appearance: the batch's, then mapped onto the task's
        encoded = truths.dictionary_encode()
        names = task.truth_names
        to_task = np.array(
            [names.setdefault(t, len(names)) for t in encoded.dictionary.to_pylist()], np.int64
        )
        codes = to_task[np.asarray(encoded.indices, np.int64)] if len(truths) else to_task[:0]
        at_rows = pa.array(at, pa.int64())
        sources = pc.index_in(batch["source"].take(at_rows), pa.array(task.sources))
        source_codes = np.asarray(sources.fill_null(0), np.int64)
        # the first sample of each (source, truth): the vocabulary's samples
        pair = source_codes * (len(task.truth_names) + 1) + codes
        _, first = np.unique(pair, return_index=True)
        for k in np.sort(first).tolist():
            self.vocab_rows.setdefault((int(source_codes[k]), int(codes[k])), offset + int(at[k]))
        self.rows.frombytes((at.astype(np.int64) + offset).tobytes())
        self.ordinals.frombytes(np.asarray(ordinals).astype(_INT).tobytes())
        self.codes.frombytes(codes.astype(_INT).tobytes())
        self.source_codes.frombytes(source_codes.astype(np.uint16).tobytes())
        if task.visual:
            label = np.full(len(pool), -1, np.int64)  # each pool sample's first truth
            first_of_row = np.flatnonzero(np.r_[True, at[1:] != at[:-1]]) if len(at) else at
            label[np.searchsorted(pool, at[first_of_row])] = codes[first_of_row]
            self._add_fit(batch, pool, label)

    def _add_fit(self, batch: dict[str, pa.Array], pool: np.ndarray, label: np.ndarray) -> None:
        """The batch's pool samples that go into the task's fit, added to its fit refs and
        labels straight from the columns (a Python string per sample, four per pool row
        held until the last batch, was the plan's one cost growing with the table)."""
        task = self.task
        ids = batch["sample_id"].take(pa.array(pool, pa.int64()))
        fits = _fits(task, ids, self.embeddings)
        keep = pool if fits is None else pool[fits]
        if fits is not None:
            ids, label = ids.filter(pa.array(fits)), label[fits]
        take = pa.array(keep, pa.int64())
        sources, modalities = batch["source"].take(take), batch["modality"].take(take)
        groups = batch["group_id"].take(take).fill_null("")
        if ids.null_count or sources.null_count or modalities.null_count:
            task.fit_refs.extend(
                ids.to_pylist(), sources.to_pylist(), modalities.to_pylist(), groups.to_pylist()
            )
        else:
            task.fit_refs.extend_arrow(ids, sources, modalities, groups)
        by_code = [*task.truth_names, None]  # code -1: a pool sample without a candidate
        task.fit_labels.extend(by_code[code] for code in label.tolist())

    def finish(self, source: SampleTable) -> None:
        task = self.task
        task.rows, task.ordinals = self.rows, self.ordinals
        task.truth_codes, task.source_codes = self.codes, self.source_codes
        names = list(task.truth_names)
        found = source.take(self.vocab_rows.values()) if self.vocab_rows else {}
        for (src, code), row in self.vocab_rows.items():
            task.vocab_samples[task.sources[src]][names[code]] = found[row]


def fits_on(task, sample_id: str, embeddings) -> bool:
    """Whether a pool sample goes into the task's fit. When the embed stage embedded only
    what generation can use (``embeddings.left_out``), a sampler that draws its library
    (``draws_library``) is fitted on every sample that did not fail, as if all were embedded
    (it draws the same library the embed stage drew, and reads only those rows); another on
    the task's own embedded pool (its capped draw and its candidates)."""
    left_out = getattr(embeddings, "left_out", None)
    if left_out is None:
        return sample_id in embeddings
    if getattr(task.sampler, "draws_library", False):
        return left_out.failed.index(sample_id) is None
    pool = left_out.pools.get(task.spec.name)
    if pool is not None and pool.index(sample_id) is None:
        return False
    return sample_id in embeddings


def _fits(task, ids: pa.Array, embeddings) -> np.ndarray | None:
    """Which pool samples (``ids``: their sample ids) go into the task's fit
    (:func:`fits_on`); None: all."""
    if getattr(embeddings, "plans_everything", False):
        return None
    left_out = getattr(embeddings, "left_out", None)
    if (
        left_out is not None
        and getattr(task.sampler, "draws_library", False)
        and not len(left_out.failed)
    ):
        return None
    return np.fromiter((fits_on(task, sid, embeddings) for sid in ids.to_pylist()), bool, len(ids))


__all__ = ["BASE_COLUMNS", "columnar", "fits_on", "plan_by_columns"]

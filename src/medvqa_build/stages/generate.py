"""The generate stage: samples -> items, task by task, with distractors and balanced letters.

Candidates are taken round-robin over truth labels (each label's candidates in seeded random
order) until the task's quota is met, so classes are balanced as far as the data allows.
Items that cannot get enough distinct options are reported as dropped, never emitted short.

Memory stays bounded for the tasks that ask about one sample at a time (``per_sample``
generators, most of them): the pool is streamed once into a compact plan (sample id,
position and truth of each candidate), then items are made in blocks, fetching only the
block's samples; a task whose candidates also depend on the whole pool (instrument presence:
the tools its source annotates) first reads it streamed through ``scan``; a task whose items
come from groups of samples (MedSG object tracking: a volume's slices) is planned a group at a
time; a task whose items show other samples of the pool (MedSG cross-modal partners, referring
fillers) gets its pool spilled to a temporary file and reads back only the samples it draws.
"""

from __future__ import annotations

import json
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..curate.balance import BalanceGate, policy_for
from ..curate.blind_drop import drop_blind_solvable
from ..curate.splits import SplitPlan
from ..errors import ImageProblem, RecipeError
from ..manifest import SourceManifest
from ..media.video import VideoProblem
from ..media.volume import VolumeProblem
from ..negatives import SAMPLERS, NotEnoughOptions
from ..negatives.frequency import expected_answers
from ..negatives.placement import BalancedSlots
from ..ontology import Ontology
from ..recipe import BlindSpec, Recipe, TaskSpec
from ..records import Item, QuarantineEntry, Sample
from ..render import RENDERERS
from ..rng import rng_for, salt_for
from ..store.memory import release_freed_memory
from ..store.packed import PackedStrings
from ..store.parquet import ItemWriter
from ..store.quarantine import write_quarantine
from ..store.sample_spill import SampleSpill
from ..store.tables import ItemTable, SampleTable, as_sample_source
from ..tasks import TASKS, Candidate, GenContext, ItemProblem
from ..tasks.repeats import AnswerRepeats
from .base import BuildContext, Stage, StageResult
from .plan_columns import fits_on as _fits_on
from .plan_columns import plan_by_columns


@dataclass
class GenerateResult:
    items: list[Item] = field(default_factory=list)  # empty when a sink took them
    dropped: list[dict] = field(default_factory=list)  # {task, sample_id, reason}
    # candidates whose file could not be read ({task, sample_id, file, source, reason}): the
    # build's quarantine entries of stage generate
    quarantined: list[dict] = field(default_factory=list)
    shortfall: dict[str, int] = field(default_factory=dict)  # task name -> quota not met
    # task name -> candidates dropped as repeating their images' answer (also in ``dropped``)
    repeats: dict[str, int] = field(default_factory=dict)
    balance: dict[str, dict] = field(default_factory=dict)  # task name -> BalanceGate.summary
    box_pools: dict[str, dict] = field(default_factory=dict)  # task name -> BoxPool.summary
    count: int = 0  # items made (kept here or given to the sink)


def _round_robin(
    truths: Sequence[str],
    rng,
    sources: Sequence[str] | None = None,
    n_options: int | None = None,
) -> np.ndarray:
    """Candidate positions, one truth label after another (labels sorted, each label's
    candidates in seeded random order, taken in turn from each of their ``sources``), so
    classes are balanced as far as the data allows. With ``n_options``, a source that answers
    fewer distinct truths than that gives its candidates after the others
    (:func:`_poor_sources`)."""
    names = sorted(set(truths))
    rank = {name: r for r, name in enumerate(names)}
    codes = None
    if sources is not None:
        source_code = {name: k for k, name in enumerate(sorted(set(sources)))}
        codes = np.fromiter((source_code[s] for s in sources), np.int64, len(sources))
    ranks = np.fromiter((rank[t] for t in truths), np.int64, len(truths))
    return _round_robin_codes(ranks, rng, codes, n_options)


def _poor_sources(ranks: np.ndarray, sources: np.ndarray, n_options: int | None) -> np.ndarray:
    """Per source code: whether the source answers fewer distinct truths in the task than an
    item has options (a polyp-only segmentation set in Region Recognition, Kvasir's three
    landmarks among EndoBench's nine).

    Such a source's options need texts it never answers (the task's vocabulary): over a
    task, its own few truths are read off the source ("in CVC frames it is the polyp"), the
    shortcut the text-only audit's answer share per source finds (issue 32). A truth that
    richer sources also answer takes their candidates first, so a rich source answers all
    its truths (EndoBench's EDD2020 gives polyps too, not only its other findings) and a
    poor one fills only what they lack.
    """
    size = int(sources.max()) + 1 if len(sources) else 0
    poor = np.zeros(size, bool)
    if not n_options or n_options < 2 or not len(sources):
        return poor
    width = int(ranks.max()) + 1
    distinct = np.bincount(np.unique(sources * width + ranks) // width, minlength=size)
    return (distinct > 0) & (distinct < n_options)


def _by_source_turns(
    group: np.ndarray, sources: np.ndarray, rng, poor: np.ndarray | None = None
) -> np.ndarray:
    """``group`` (candidate positions) reordered so that its sources take turns: one candidate
    of every source, then a second, ...; within a turn the sources come in a seeded random
    order, each as likely to come first whatever its size. One source leaves the group as it
    is (and draws nothing). The sources ``poor`` marks (per source code) take their turns
    after every other source's candidates (:func:`_poor_sources`)."""
    src = sources[group]
    names = np.unique(src)
    if len(names) < 2:
        return group
    by_src = np.argsort(src, kind="stable")
    runs = np.flatnonzero(np.r_[True, src[by_src][1:] != src[by_src][:-1]])
    turn = np.empty(len(group), np.int64)
    turn[by_src] = np.arange(len(group)) - np.repeat(runs, np.diff(np.r_[runs, len(group)]))
    priority = np.empty(int(names.max()) + 1, np.int64)
    priority[names] = rng.permutation(len(names))
    last = poor[src] if poor is not None else np.zeros(len(src), bool)
    return group[np.lexsort((priority[src], turn, last))]


def _round_robin_codes(
    ranks: np.ndarray, rng, sources: np.ndarray | None = None, n_options: int | None = None
) -> np.ndarray:
    """:func:`_round_robin` over each candidate's truth as its rank among the sorted truth
    names (and its source as a code): 8 bytes a candidate (the lists of Python ints it
    replaced took ~60)."""
    by_rank = np.argsort(ranks, kind="stable")  # each truth's candidates, in position order
    counts = np.bincount(ranks) if len(ranks) else np.zeros(0, np.int64)
    poor = None if sources is None else _poor_sources(ranks, sources, n_options)
    depth = np.empty(len(ranks), np.int64)
    start = 0
    for n in counts.tolist():  # truths in sorted order, as the seeded draws always came
        if n:
            group = by_rank[start : start + n][rng.permutation(n)]
            if sources is not None:  # every source of the task gets its turn (balance)
                group = _by_source_turns(group, sources, rng, poor)
            by_rank[start : start + n] = group
            depth[start : start + n] = np.arange(n)
            start += n
    # depth first, then truth: the first candidate of every truth, then the second, ...
    return by_rank[np.lexsort((ranks[by_rank], depth))]


BLOCK = 4096  # candidates turned into items per block (their samples are fetched together)
FIRST_FACTOR = 2  # a task's first block: 2 x its quota + 64 candidates (then doubling)


@dataclass(frozen=True, slots=True)
class _FitRef:
    """What a visual sampler's fit reads of a sample (its table keeps no Sample objects)."""

    sample_id: str
    source: str
    modality: str
    group_id: str


class _FitRefs:
    """The :class:`_FitRef` of every embedded sample of a pool, packed: ids and groups as
    :class:`PackedStrings`, sources and modalities as small codes (~60 bytes a sample
    instead of ~200 as objects); a ref is built when it is read."""

    def __init__(self) -> None:
        self.ids, self.groups = PackedStrings(), PackedStrings()
        self.names: list[str] = []  # sources and modalities
        self._code: dict[str, int] = {}
        self.sources, self.modalities = array("H"), array("H")

    def _code_of(self, name: str) -> int:
        code = self._code.get(name)
        if code is None:
            code = self._code[name] = len(self.names)
            self.names.append(name)
        return code

    def append(self, s: Sample) -> None:
        self.add(s.sample_id, s.source, s.modality, s.group_id)

    def add(self, sample_id: str, source: str, modality: str, group_id: str | None) -> None:
        self.ids.append(sample_id)
        self.groups.append(group_id or "")
        self.sources.append(self._code_of(source))
        self.modalities.append(self._code_of(modality))

    def extend(self, ids: list[str], sources: list[str], modalities: list[str], groups) -> None:
        """:meth:`add` of each of these (aligned lists), the strings packed at once."""
        self.ids.extend(ids)
        self.groups.extend([g or "" for g in groups])
        code = {name: self._code_of(name) for name in dict.fromkeys([*sources, *modalities])}
        self.sources.extend(code[s] for s in sources)
        self.modalities.extend(code[m] for m in modalities)

    def extend_arrow(self, ids, sources, modalities, groups) -> None:
        """:meth:`extend` of aligned Arrow string arrays (``groups`` without nulls): the
        strings copied from their buffers, sources and modalities coded by their distinct
        values, named in the order :meth:`extend` names them (no Python object a sample)."""
        self.ids.extend_arrow(ids)
        self.groups.extend_arrow(groups)
        src, mod = sources.dictionary_encode(), modalities.dictionary_encode()
        names = dict.fromkeys([*src.dictionary.to_pylist(), *mod.dictionary.to_pylist()])
        code = {name: self._code_of(name) for name in names}
        for encoded, out in ((src, self.sources), (mod, self.modalities)):
            to_code = np.array([code[n] for n in encoded.dictionary.to_pylist()], np.uint16)
            indices = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), np.int64)
            out.frombytes(to_code[indices].tobytes())

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, k: int) -> _FitRef:
        if not -len(self) <= k < len(self):
            raise IndexError(k)
        names = self.names
        return _FitRef(
            self.ids[k], names[self.sources[k]], names[self.modalities[k]], self.groups[k]
        )

    def __iter__(self):
        return (self[k] for k in range(len(self)))


@dataclass
class _Task:
    """One task being generated: its generator, sampler and pool filter, and for a
    ``per_sample`` task the plan of its pool, filled by :func:`_plan_pools`: every candidate
    as (sample row, position among that sample's candidates, truth code), a few bytes each,
    one sample per answer of each source (enough for the vocabulary) and what a visual
    sampler is fitted on. No other Sample of the pool is kept."""

    spec: TaskSpec
    gen: object
    sampler: object
    sources: list[str]
    visual: bool
    groups: frozenset[str]  # groups the pool must avoid (the benchmark's, for "train" tasks)
    rows: array = field(default_factory=lambda: array("q"))
    ordinals: array = field(default_factory=lambda: array("i"))
    truth_codes: array = field(default_factory=lambda: array("i"))
    source_codes: array = field(default_factory=lambda: array("H"))  # index in ``sources``
    truth_names: dict[str, int] = field(default_factory=dict)
    vocab_samples: dict[str, dict[str, Sample]] = field(default_factory=dict)
    fit_refs: _FitRefs = field(default_factory=_FitRefs)
    fit_labels: list[str | None] = field(default_factory=list)
    # a task planned by groups (``pool_group``): the rows of each group, in key order; its
    # plan's ``rows`` then hold group numbers
    members: list[array] | None = None
    pool: SampleSpill | list | None = None  # a draws_from_pool task's pool (on disk)

    def in_pool(self, s: Sample) -> bool:
        return s.source in self.sources and self.spec.accepts(s) and s.group_id not in self.groups


def _new_pool(task: _Task, source) -> SampleSpill | list | None:
    """Where a ``draws_from_pool`` task's pool is gathered while it is planned: on disk from a
    table (its samples round-trip through their rows exactly), as references from a list that
    is held anyway."""
    if not task.gen.draws_from_pool:
        return None
    return SampleSpill() if isinstance(source, SampleTable) else []


def _plan_pools(tasks: list[_Task], source, embeddings) -> None:
    """One streaming pass over the samples plans every ``per_sample`` task of a phase; the
    tasks whose generator reads its candidates from columns are planned from those columns
    instead (:mod:`.plan_columns`), with no Sample made per row."""
    for task in tasks:
        task.vocab_samples = {src: {} for src in task.sources}
        task.pool = _new_pool(task, source)
    tasks = plan_by_columns(tasks, source, embeddings)
    release_freed_memory(collect=False)  # the column batches read: not held into the next step
    if not tasks:
        return
    for task in tasks:
        if task.gen.scans_pool:  # what one sample's candidates need to know of the others
            task.gen.scan(s for b in source.numbered_batches() for _, s in b if task.in_pool(s))
    for batch in source.numbered_batches():
        for row, s in batch:
            for task in tasks:
                if not task.in_pool(s):
                    continue
                if task.pool is not None:
                    task.pool.append(s)
                cands = task.gen.candidates([s])
                for k, c in enumerate(cands):
                    task.rows.append(row)
                    task.ordinals.append(k)
                    task.truth_codes.append(
                        task.truth_names.setdefault(c.truth, len(task.truth_names))
                    )
                    task.source_codes.append(task.sources.index(c.sample.source))
                    # a per-sample task's vocabulary is the set of its candidates' truths (plus
                    # fixed extras), so one sample per truth gives the same vocabulary
                    task.vocab_samples[s.source].setdefault(c.truth, s)
                if task.visual and _fits_on(task, s.sample_id, embeddings):
                    task.fit_refs.append(s)
                    task.fit_labels.append(cands[0].truth if cands else None)


def _plan_grouped(task: _Task, source) -> dict[str, list[str]]:
    """Plan a task whose candidates come from groups of samples (``pool_group``: a volume's
    slices along one axis, a video's frames) without holding the pool: one pass collects each
    group's row numbers, a second hands each group's samples to ``candidates`` as soon as the
    group is complete and keeps only the truths. Returns the vocabulary per source."""
    gen = task.gen
    keyed: dict = {}
    for batch in source.numbered_batches():
        for row, s in batch:
            if task.in_pool(s) and (key := gen.pool_group(s)) is not None:
                keyed.setdefault(key, array("q")).append(row)
    keys = sorted(keyed)  # the order the held pool's candidates come in
    number = {key: g for g, key in enumerate(keys)}
    task.members = [keyed.pop(key) for key in keys]
    pending: dict[int, list[Sample]] = {}
    codes: list[array] = [array("i") for _ in keys]
    source_codes = array("H", bytes(2 * len(keys)))  # a group's key names one source
    truths: dict[str, set[str]] = defaultdict(set)
    for batch in source.numbered_batches():
        for _, s in batch:
            if not task.in_pool(s) or (key := gen.pool_group(s)) is None:
                continue
            g = number[key]
            group = pending.setdefault(g, [])
            group.append(s)
            if len(group) < len(task.members[g]):
                continue
            del pending[g]
            for c in gen.candidates(group):
                codes[g].append(task.truth_names.setdefault(c.truth, len(task.truth_names)))
                truths[c.sample.source].add(c.truth)
                source_codes[g] = task.sources.index(c.sample.source)
    for g, group_codes in enumerate(codes):
        for k, code in enumerate(group_codes):
            task.rows.append(g)
            task.ordinals.append(k)
            task.truth_codes.append(code)
            task.source_codes.append(source_codes[g])
    return {src: sorted(truths.get(src, ())) for src in task.sources}


def _fit(sampler, spec: TaskSpec, refs, labels, embeddings, seed: int) -> None:
    """Give a visual sampler the embedded samples of the task's pool, labelled by their truth.

    A sampler that reads only some rows (``reads_rows``: ``visual_class`` compares with a
    drawn library) gets them on demand; one that indexes every vector gets one array of them.
    """
    if not refs:
        raise RecipeError(f"task {spec.name!r}: none of its samples could be embedded")
    rows = _PoolVectors(refs, embeddings)
    if getattr(sampler, "reads_rows", False):
        vectors = rows
    else:
        first = rows[0]
        vectors = np.empty((len(refs), first.shape[-1]), np.float32)  # filled row by row: no
        for k in range(len(refs)):  # list of per-row views, no second stacked copy
            vectors[k] = rows[k]
    sampler.fit(refs, vectors, labels, rng=rng_for(seed, "fit", spec.name))


class _PoolVectors:
    """Row ``k`` = the vector of ``refs[k]``, read from ``embeddings`` (sample id -> vector)
    when asked for; indexed like an array by a row number or an array of row numbers."""

    def __init__(self, refs, embeddings):
        self.refs, self.embeddings = refs, embeddings

    def __len__(self) -> int:
        return len(self.refs)

    def has(self, row: int) -> bool:
        """Whether row ``row`` has a vector (a capped build embeds only what is read)."""
        return self.refs[int(row)].sample_id in self.embeddings

    def __getitem__(self, rows) -> np.ndarray:
        if isinstance(rows, int | np.integer):
            return np.asarray(self.embeddings[self.refs[rows].sample_id])
        rows = np.asarray(rows).tolist()
        if not rows:
            return np.zeros((0, 0), np.float32)
        out = np.empty((len(rows), self[rows[0]].shape[-1]), np.float32)
        for k, r in enumerate(rows):
            out[k] = self[r]
        return out


def _no_embeddings(spec: TaskSpec) -> RecipeError:
    return RecipeError(
        f"task {spec.name!r}: strategy {spec.negatives.strategy!r} needs image embeddings",
        fix="this is a bug: the pipeline embeds samples when a visual strategy is used",
    )


def _blocks(task: _Task, order: Sequence[int], first: int = BLOCK) -> Iterator[Sequence[int]]:
    """``order`` cut into blocks of at most ``size`` candidates whose samples (the group's,
    for a task planned by groups) number at most ``size`` too, unless one group has more;
    ``size`` is ``first``, doubled after each block up to ``BLOCK``: a task that needs a few
    candidates of a large pool fetches a few, not ``BLOCK`` (each fetch reads the row groups
    its samples are in)."""
    members = task.members
    size = max(1, min(first, BLOCK))
    if members is None:
        start = 0
        while start < len(order):
            yield order[start : start + size]
            start, size = start + size, min(2 * size, BLOCK)
        return
    block: list[int] = []
    units: set[int] = set()
    fetched = 0
    for k in order:
        unit = task.rows[k]
        if unit not in units and block and fetched + len(members[unit]) > size:
            yield block
            block, units, fetched, size = [], set(), 0, min(2 * size, BLOCK)
        if unit not in units:
            units.add(unit)
            fetched += len(members[unit])
        block.append(k)
        if len(block) == size:
            yield block
            block, units, fetched, size = [], set(), 0, min(2 * size, BLOCK)
    if block:
        yield block


def _planned_candidates(
    task: _Task, order: Sequence[int], source, first: int = BLOCK
) -> Iterable[Candidate]:
    """The candidates at ``order``, rebuilt block by block (the first of ``first``) from
    freshly fetched samples."""
    names = list(task.truth_names)
    members = task.members
    for block in _blocks(task, order, first):
        units = {task.rows[k] for k in block}
        if members is None:
            found = source.take(units)
            samples_of = {u: [found[u]] for u in units}
        else:
            found = source.take(r for u in units for r in members[u])
            samples_of = {u: [found[r] for r in members[u]] for u in units}
        cands: dict[int, list[Candidate]] = {}
        for k in block:
            row = task.rows[k]
            if row not in cands:
                cands[row] = task.gen.candidates(samples_of[row])
            cand = cands[row][task.ordinals[k]]
            if cand.truth != names[task.truth_codes[k]]:  # the table changed: never guess
                raise RuntimeError(f"sample {cand.sample.sample_id!r} changed during generate")
            yield cand
        del found, samples_of, cands
        release_freed_memory(collect=False)


def _order_of_plan(task: _Task, rng) -> np.ndarray:
    """The round-robin order of a planned task's candidates (truth codes ranked by name)."""
    names = list(task.truth_names)
    rank_of_code = np.empty(len(names), np.int64)
    rank_of_code[np.argsort(np.array(names, dtype=object))] = np.arange(len(names))
    codes = np.frombuffer(task.truth_codes, f"i{task.truth_codes.itemsize}")  # C int: no copy
    sources = np.frombuffer(task.source_codes, np.uint16).astype(np.int64)
    n_options = getattr(getattr(task, "gen", None), "n_options", None)
    return _round_robin_codes(rank_of_code[codes], rng, sources, n_options)


def _candidates_in_order(
    task: _Task, source, embeddings, seed: int, rng, quota: int = BLOCK, fetched=None
):
    """``(vocab, pool, order, fetch, available)`` of one task: ``order`` the candidates'
    positions round-robin over truths, ``fetch(positions)`` yields ``(position, candidate)``
    (the first fetch of a planned task about ``2 x quota`` candidates, then more as needed,
    through ``fetched`` when the phase read them ahead), ``available`` the candidates per
    truth (what answer balance spreads)."""
    spec, gen = task.spec, task.gen
    if gen.per_sample or (gen.groups_pool and not task.visual):
        if gen.per_sample:  # planned by the phase's shared pass
            vocab = {s: gen.vocabulary(list(task.vocab_samples[s].values())) for s in task.sources}
            if task.visual:
                _fit(task.sampler, spec, task.fit_refs, task.fit_labels, embeddings, seed)
            task.fit_refs, task.fit_labels, task.vocab_samples = _FitRefs(), [], {}
            pool, task.pool = task.pool if task.pool is not None else (), None
        else:  # planned group by group, the pool not held
            vocab, pool = _plan_grouped(task, source), ()
        codes = np.frombuffer(task.truth_codes, f"i{task.truth_codes.itemsize}")
        per_code = np.bincount(codes, minlength=len(task.truth_names)).tolist()
        available = dict(zip(task.truth_names, per_code, strict=True))
        return (
            vocab,
            pool,
            _order_of_plan(task, rng),
            lambda ks: zip(
                ks,
                _planned_candidates(task, ks, fetched or source, FIRST_FACTOR * quota + 64),
                strict=True,
            ),
            available,
        )
    # any other task (a custom one pairing samples across the pool): the pool is held
    pool = tuple(s for batch in source.numbered_batches() for _, s in batch if task.in_pool(s))
    vocab = {src: gen.vocabulary([s for s in pool if s.source == src]) for src in task.sources}
    if task.visual:
        refs, labels = [], []
        for s in pool:
            if s.sample_id in embeddings:
                truths = [c.truth for c in gen.candidates([s])]
                refs.append(_FitRef(s.sample_id, s.source, s.modality, s.group_id))
                labels.append(truths[0] if truths else None)
        _fit(task.sampler, spec, refs, labels, embeddings, seed)
    cands = gen.candidates(pool)
    order = _round_robin(
        [c.truth for c in cands], rng, [c.sample.source for c in cands], gen.n_options
    )
    available = dict(Counter(c.truth for c in cands))
    return vocab, pool, order, lambda ks: ((k, cands[k]) for k in ks), available


def generate_items(
    recipe: Recipe,
    samples: Iterable[Sample],
    manifests: dict[str, SourceManifest],
    progress: bool = True,
    embeddings: dict[str, np.ndarray] | None = None,
    out_dir: Path | None = None,
    roots: dict[str, Path] | None = None,
    sink: Callable[[Item], None] | None = None,
) -> GenerateResult:
    """Items for every task of the recipe; ``embeddings`` (sample_id -> vector) feed the
    visual negative strategies; ``out_dir`` receives images a task synthesises. With ``sink``
    each item is handed to it as it is made (e.g. written out) instead of kept in memory.

    ``samples`` may be a list or a :class:`~medvqa_build.tables.SampleTable`; a table is
    read a batch at a time and never held whole (except by tasks that pair samples across it)."""
    result = GenerateResult()
    run = _Run(
        recipe=recipe,
        source=as_sample_source(samples),
        embeddings=embeddings,
        ontologies={sid: Ontology.from_mapping(m.ontology) for sid, m in manifests.items()},
        slots=BalancedSlots(rng_for(recipe.seed, "answer-slots")),
        manifests=manifests,
        out_dir=out_dir,
        roots=dict(roots or {}),
        keep=sink if sink is not None else result.items.append,
        result=result,
        test_groups=set(),
        progress=progress,
    )
    # benchmark tasks first, so instruction-tuning ("train") tasks can avoid their groups
    specs = sorted(recipe.tasks, key=lambda t: t.split != "test")
    phases = [[t for t in specs if t.split == "test"], [t for t in specs if t.split != "test"]]
    for phase in phases:
        tasks = []
        for spec in phase:
            sampler = SAMPLERS.get(spec.negatives.strategy)(**spec.negatives.params)
            visual = bool(getattr(sampler, "needs_embeddings", False))
            if visual and embeddings is None:
                raise _no_embeddings(spec)
            tasks.append(
                _Task(
                    spec=spec,
                    gen=generator_for(recipe, spec),
                    sampler=sampler,
                    sources=spec.sources or [s.id for s in recipe.sources],
                    visual=visual,
                    groups=frozenset(run.test_groups) if spec.split == "train" else frozenset(),
                )
            )
        _plan_pools([t for t in tasks if t.gen.per_sample], run.source, embeddings)
        for task in tasks:  # what a task kept of its pool at plan time (its box pool's cap)
            summary = getattr(task.gen, "pool_summary", lambda: None)()
            if summary is not None:
                result.box_pools[task.spec.name] = summary
        run.fetched = _first_blocks(tasks, run)
        for task in tasks:
            _generate_task(task, run)
            task.rows = task.ordinals = task.truth_codes = array("q")  # free the plan
            task.source_codes = array("H")
        run.fetched = None
    return result


def generator_for(recipe: Recipe, spec: TaskSpec):
    """The task's generator, its plan-time draws seeded by the recipe's seed and the task."""
    gen = TASKS.get(spec.generator)(spec.params, spec.n_options)
    gen.seed = salt_for(recipe.seed, "plan", spec.name)
    return gen


PREFETCH_MAX = 512  # a task's first block is read ahead with the others' when this small


def _first_blocks(tasks: list[_Task], run: _Run) -> _Fetched | None:
    """The samples of every planned task's first block, read in one sweep of the table: each
    task's few candidates lie in every row group of a large table, so reading them task by
    task read each row group once per task. The orders are those :func:`_generate_task`
    draws (the same seeded generator, first used for the order)."""
    if not isinstance(run.source, SampleTable):
        return None
    rows: set[int] = set()
    for task in tasks:
        if not task.gen.per_sample or task.members is not None or not len(task.rows):
            continue
        first = FIRST_FACTOR * run.recipe.quota(task.spec) + 64
        if first > PREFETCH_MAX:
            continue
        order = _order_of_plan(task, rng_for(run.recipe.seed, "generate", task.spec.name))
        wanted = rows.union(task.rows[int(k)] for k in order[:first])
        if len(wanted) > BLOCK:
            # what is read ahead stays alive for the whole phase: at most one block of
            # samples, so generate holds at most two blocks (this and the one being made)
            continue
        rows = wanted
    return _Fetched(run.source, run.source.take(rows)) if rows else None


class _Fetched:
    """A table's ``take`` that serves the rows read ahead from memory."""

    def __init__(self, source: SampleTable, found: dict[int, Sample]):
        self.source, self.found = source, found

    def take(self, rows: Iterable[int]) -> dict[int, Sample]:
        rows = list(rows)
        missing = [r for r in rows if r not in self.found]
        more = self.source.take(missing) if missing else {}
        return {r: self.found[r] if r in self.found else more[r] for r in rows}


@dataclass
class _Run:
    """What every task of one ``generate_items`` call shares."""

    recipe: Recipe
    source: object  # SampleTable | SampleList
    embeddings: object
    ontologies: dict[str, Ontology]
    slots: BalancedSlots
    manifests: dict[str, SourceManifest]
    out_dir: Path | None
    roots: dict[str, Path]
    keep: Callable[[Item], None]
    result: GenerateResult
    test_groups: set[str]  # groups of the benchmark items made so far
    progress: bool
    fetched: _Fetched | None = None  # the phase's first blocks, read ahead (_first_blocks)


def _generate_task(task: _Task, run: _Run) -> None:
    """Make one task's items, in round-robin order, until its quota is met or its answer
    balance (:class:`~medvqa_build.curate.balance.BalanceGate`) holds the rest back."""
    spec = task.spec
    rng = rng_for(run.recipe.seed, "generate", spec.name)
    quota = run.recipe.quota(spec)
    vocab, pool, order, fetch, available = _candidates_in_order(
        task, run.source, run.embeddings, run.recipe.seed, rng, quota, run.fetched
    )
    ctx = GenContext(
        recipe=run.recipe,
        spec=spec,
        rng=rng,
        sampler=task.sampler,
        slots=run.slots,
        vocab=vocab,
        ontologies=run.ontologies,
        manifests=run.manifests,
        out_dir=run.out_dir,
        pool=pool,
        roots=dict(run.roots),
        shape_kind=RENDERERS.get(spec.prompt_level).shape_kind,
    )
    policy = policy_for(run.recipe, spec, task.gen.answer_is_truth)
    gate = BalanceGate(available, quota, policy, spec.name)
    if task.gen.answer_is_truth and not policy.active:  # answers left skewed: distractor
        planned = gate.allocation  # showings paced by the planned answers (issue 32.2)
        ctx.ledger.expect(expected_answers(available, planned.total, planned.level), planned.total)
    repeats = AnswerRepeats(task.gen)  # one image, one answer text per task (issue 32.3)
    # a question's wording rotates within each answer: by item count alone, with answers dealt
    # round-robin, the template named the answer (6 grades, 6 templates; issue 32)
    first_turn: dict[str, int] = {}
    made_of: Counter[str] = Counter()
    bar = tqdm(total=quota, desc=f"generate {spec.name}", disable=not run.progress, leave=False)
    todo: Sequence[int] = order
    stop = False
    while not stop:  # a pass over the candidates; again over those held back if the plan grew
        held, plan = array("q"), gate.allocation
        for k, cand in fetch(todo):
            if gate.full():
                break
            if not gate.admit(cand.truth):
                held.append(k)
                continue
            wording = first_turn.setdefault(cand.truth, len(first_turn)) + made_of[cand.truth]
            made = _make_one(task, run, ctx, cand, wording, repeats)
            if made is None:  # the embedded candidates ran out
                stop = True
                break
            if made:
                made_of[cand.truth] += 1
                gate.took(cand.truth)
                bar.update()
            else:
                gate.failed(cand.truth)
        if not held or gate.full() or gate.allocation == plan:
            break
        todo = held
    bar.close()
    run.result.balance[spec.name] = gate.summary()
    if gate.total < quota:
        run.result.shortfall[spec.name] = quota - gate.total


def _make_one(
    task: _Task, run: _Run, ctx: GenContext, cand: Candidate, index: int, repeats: AnswerRepeats
) -> bool | None:
    """Make and keep the item of one candidate; False (the candidate reported as dropped or
    quarantined) when it cannot become one (a repeat of its images' answer too), None when
    it is past the candidates embedded for the task (:func:`_past_the_cap`: the task stops)."""
    spec = task.spec
    if task.visual and cand.sample.sample_id not in run.embeddings:
        if _past_the_cap(task, cand, run):
            return None
        run.result.dropped.append(
            {
                "task": spec.name,
                "sample_id": cand.sample.sample_id,
                "reason": "image could not be embedded for visual negatives",
            }
        )
        return False
    if (repeat := repeats.reason(cand)) is not None:
        run.result.dropped.append(
            {"task": spec.name, "sample_id": cand.sample.sample_id, "reason": repeat}
        )
        run.result.repeats[spec.name] = run.result.repeats.get(spec.name, 0) + 1
        return False
    try:
        item = task.gen.make_item(cand, ctx, index)
        if spec.split != "test":
            item = item.replace(split=spec.split)
    except (NotEnoughOptions, ItemProblem) as exc:
        run.result.dropped.append(
            {"task": spec.name, "sample_id": cand.sample.sample_id, "reason": str(exc)}
        )
        return False
    except (ImageProblem, VideoProblem, VolumeProblem) as exc:  # a file the task reads
        run.result.quarantined.append(
            {
                "task": spec.name,
                "sample_id": cand.sample.sample_id,
                "file": cand.sample.image,
                "source": cand.sample.source,
                "reason": " ".join(str(exc).split()),
            }
        )
        return False
    run.keep(item)
    repeats.add(cand)
    run.result.count += 1
    if spec.split == "test":
        by_id = {s.sample_id: s for s in cand.all_samples}
        missing = [i for i in item.sample_ids if i not in by_id]
        if missing:  # an item may show pool samples besides its candidate's
            by_id.update(run.source.get(missing))
        run.test_groups.update(by_id[i].group_id for i in item.sample_ids if i in by_id)
    return True


def _past_the_cap(task: _Task, cand: Candidate, run: _Run) -> bool:
    """A candidate left unembedded on purpose: the embed stage embedded the task's first
    ``embed_candidates`` and this one comes after them, so the task stops here (one dropped
    entry says why; the quota not met is the task's shortfall)."""
    left_out = getattr(run.embeddings, "left_out", None)
    if left_out is None or left_out.failed.index(cand.sample.sample_id) is not None:
        return False
    run.result.dropped.append(
        {
            "task": task.spec.name,
            "sample_id": cand.sample.sample_id,
            "reason": "the candidates embedded for visual negatives ran out (raise "
            "negatives.params.embed_candidates, or set it to 'all')",
        }
    )
    return True


class Generate(Stage):
    """``items.parquet``: every task's items (questions, options, answers, planned prompt
    geometry); ``dropped.json``: the candidates that could not become items, and why.

    With a curate ``split`` the splits are assigned over the whole set: items go to a first
    file while a packed plan of their strata and samples is kept, then are copied with the
    splits the plan assigns. With ``curate.drop_blind_solvable`` the items the text-only
    audit answers confidently are then removed (``blind_removed.json`` lists them)."""

    name = "generate"

    @staticmethod
    def _blind_drop(ctx: BuildContext) -> BlindSpec | None:
        """The audit's settings when the recipe asks to drop blind-solvable items."""
        spec = ctx.curate_spec
        if spec is None or not spec.drop_blind_solvable:
            return None
        return ctx.recipe.blind or BlindSpec()

    def inputs(self, ctx: BuildContext, key: str) -> Any:
        recipe = ctx.recipe
        drop = self._blind_drop(ctx)
        blind = {} if drop is None else {"drop_blind_solvable": drop.model_dump(mode="json")}
        return blind | {
            "convert": ctx.fingerprints("convert"),
            "tasks": [t.model_dump(mode="json") for t in recipe.tasks],
            "balance": recipe.balance.model_dump(mode="json"),
            "seed": recipe.seed,
            "benchmark": recipe.benchmark,
            "embed": next(iter(ctx.fingerprints("embed")), None),
            "curate": next(iter(ctx.fingerprints("curate")), None),
        }

    def plugins(self, ctx: BuildContext, key: str) -> list[str]:
        """Each task's generator, option sampler and renderer (its shapes are planned with the
        shape kind of the renderer of its prompt level)."""
        modules = []
        for t in ctx.recipe.tasks:
            generator = TASKS.get(t.generator)
            modules += [generator.__module__, SAMPLERS.module(t.negatives.strategy)]
            modules.append(RENDERERS.module(t.prompt_level))
        return modules

    def run(self, ctx: BuildContext, key: str, out: Path) -> dict[str, Any]:
        split = ctx.curate_spec.split if ctx.curate_spec is not None else None
        plan = SplitPlan(split) if split is not None else None
        first = out / ("items.unsplit.parquet" if plan is not None else "items.parquet")
        with ItemWriter(first) as writer:

            def keep(item: Item) -> None:
                if plan is not None:
                    plan.add(item)
                writer.add(item)

            result = generate_items(
                ctx.recipe,
                ctx.samples,
                ctx.manifests,
                progress=ctx.progress,
                embeddings=ctx.embeddings,
                out_dir=out,
                roots=ctx.roots,
                sink=keep,
            )
        if plan is not None:
            splits = plan.assign(ctx.samples, ctx.recipe.seed)
            with ItemWriter(out / "items.parquet") as writer:
                for k, item in enumerate(ItemTable(first)):
                    writer.add(item.replace(split=splits[k]))
            first.unlink()
        (out / "dropped.json").write_text(json.dumps(result.dropped, indent=2) + "\n")
        counts: dict[str, Any] = {"items": result.count}
        if (drop := self._blind_drop(ctx)) is not None:
            report = drop_blind_solvable(out / "items.parquet", drop, ctx.recipe.seed)
            removed = report["confident"]
            (out / "blind_removed.json").write_text(json.dumps(report, indent=2) + "\n")
            counts = {
                "items": result.count - len(removed),
                "generated": result.count,
                "blind_removed": len(removed),
            }
        (out / "quarantine.json").write_text(json.dumps(result.quarantined, indent=2) + "\n")
        return {
            **counts,
            "dropped": len(result.dropped),
            "answer_repeats": dict(sorted(result.repeats.items())),
            "quarantined": len(result.quarantined),
            "shortfall": {**result.shortfall, **ctx.skipped},
            "balance": result.balance,
            **({"box_pools": result.box_pools} if result.box_pools else {}),
        }

    def finish(self, ctx: BuildContext, results: list[StageResult]) -> None:
        (result,) = results
        path = result.path / "quarantine.json"
        bad = json.loads(path.read_text()) if path.is_file() else []
        if bad:
            ctx.quarantine += generate_failures(bad)
            write_quarantine(ctx.quarantine, ctx.out / "quarantine.json")


def generate_failures(bad: list[dict]) -> list[QuarantineEntry]:
    """Candidates whose file a task could not read, as quarantine entries of stage
    ``generate`` (the task in the reason)."""
    return [
        QuarantineEntry(
            file=b["file"],
            reason=f"{b['reason']} (task {b['task']})",
            source=b["source"],
            stage="generate",
        )
        for b in bad
    ]

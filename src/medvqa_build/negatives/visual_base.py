"""What the visual samplers share: the fitted table of labelled pool samples, row-wise
normalisation, and the final choice of distractors from scored candidate classes."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..records import Negatives, Sample
from ..store.packed import SortedStrings
from ..vocab import first_apart, unnested
from .base import OptionRequest, not_enough
from .embedder import l2_normalise
from .frequency import owed_order


@dataclass
class PoolTable:
    """The labelled samples of a fitted pool as codes, row-aligned with the pool's vectors
    (about 20 bytes and the id's text a sample, where Python strings in lists and a dict
    cost ~300: 10^6 pool images would hold ~300 MiB of bookkeeping)."""

    keep: np.ndarray  # row of the fit's inputs per table row (int64)
    ids: SortedStrings  # table row r = position r
    label_names: list[str]  # sorted; ``labels`` are indices into it
    labels: np.ndarray  # int32
    names: list[str]  # sources and modalities; ``sources``/``modalities`` index it
    sources: np.ndarray  # int32
    modalities: np.ndarray  # int32
    group_keys: np.ndarray  # the distinct group ids, sorted UTF-8 bytes
    groups: np.ndarray  # int32 index into ``group_keys``

    @classmethod
    def build(cls, samples: Sequence[Sample], labels: Sequence[str | None]) -> PoolTable:
        """The samples with a label (anything with ``sample_id``, ``source``, ``modality``
        and ``group_id``, as generate's packed refs)."""
        if len(samples) != len(labels):
            raise ValueError(
                f"fit needs aligned inputs: {len(samples)} samples, {len(labels)} labels"
            )
        keep = [i for i, lab in enumerate(labels) if lab]
        label_names = sorted({str(labels[i]) for i in keep})
        label_code = {lab: c for c, lab in enumerate(label_names)}
        name_code: dict[str, int] = {}
        ids, groups = [], []
        codes = np.empty((len(keep), 3), np.int32)  # label, source, modality
        for r, i in enumerate(keep):
            s = samples[i]
            ids.append(s.sample_id)
            groups.append((s.group_id or "").encode())
            source = name_code.setdefault(s.source, len(name_code))
            modality = name_code.setdefault(s.modality, len(name_code))
            codes[r] = (label_code[str(labels[i])], source, modality)
        group_keys, group_codes = np.unique(np.array(groups, dtype=bytes), return_inverse=True)
        return cls(
            keep=np.array(keep, dtype=np.int64),
            ids=SortedStrings(ids),
            label_names=label_names,
            labels=np.ascontiguousarray(codes[:, 0]),
            names=list(name_code),
            sources=np.ascontiguousarray(codes[:, 1]),
            modalities=np.ascontiguousarray(codes[:, 2]),
            group_keys=group_keys if len(keep) else np.array([], "S1"),
            groups=group_codes.astype(np.int32).reshape(-1),
        )

    def __len__(self) -> int:
        return len(self.keep)

    def row(self, sample_id: str) -> int | None:
        return self.ids.index(sample_id)

    def name_code(self, name: str) -> int:
        """The code of a source or modality (-1: none in the pool)."""
        try:
            return self.names.index(name)
        except ValueError:
            return -1

    def group_code(self, group: str) -> int:
        """The code of a group id (-1: none in the pool)."""
        key = group.encode()
        pos = int(np.searchsorted(self.group_keys, key))
        if pos < len(self.group_keys) and self.group_keys[pos] == key:
            return pos
        return -1

    def label_code(self, label: str) -> int:
        pos = bisect.bisect_left(self.label_names, label)
        return pos if pos < len(self.label_names) and self.label_names[pos] == label else -1


def unfitted_query(request: OptionRequest) -> ValueError:
    """The error for a query whose sample the sampler was not fitted on, without a vector."""
    sid = request.sample.sample_id if request.sample is not None else None
    return ValueError(
        f"no embedding for query sample {sid!r}: fit the sampler on it or pass "
        "OptionRequest(embedding=...)"
    )


NORMALISE_ROWS = 8192  # rows normalised at a time: no full-size temporaries


def normalise_rows(x: np.ndarray) -> np.ndarray:
    """:func:`l2_normalise` of a large matrix into one new array, a block of rows at a time
    (each row is normalised on its own, so the values are those of the one-shot call)."""
    out = np.empty(x.shape, np.float32)
    for start in range(0, len(x), NORMALISE_ROWS):
        out[start : start + NORMALISE_ROWS] = l2_normalise(x[start : start + NORMALISE_ROWS])
    return out


def allowed_classes(request: OptionRequest, classes: Sequence[str]) -> list[str]:
    """Classes that may be distractors: not the truth, a relative of it, or a mandatory
    option, and inside ``request.pool`` when the pool is not empty."""
    taken = {m.casefold() for m in request.mandatory_distractors()}
    pool = {p.casefold() for p in request.pool}
    cands = [c for c in classes if c.casefold() not in taken and (not pool or c.casefold() in pool)]
    return request.ontology.allowed_distractors(request.truth, cands)


def choose_top(
    strategy: str,
    request: OptionRequest,
    class_scores: Mapping[str, float],
    what: str,
    balance: Balance | None = None,
) -> Negatives:
    """Mandatory options first, then the ``need`` highest-scoring allowed classes (ties by
    name), none whose text contains another option's unless every allowed class is shown;
    scores are aligned with candidates, NaN where a mandatory option has no score.

    With ``balance`` and the task's ledger in the request, the ``need`` are taken among the
    ``balance.window(need)`` most similar classes, those owed showings first
    (:func:`owed_order`), and the item is recorded; returned in score order either way."""
    mandatory = request.mandatory_distractors()
    need = request.distractors_needed()
    allowed = allowed_classes(request, sorted(class_scores))
    if need < 0 or len(allowed) < need:
        raise not_enough(request, len(allowed), need, what)
    ranked = sorted(allowed, key=lambda c: (-class_scores[c], c))
    ledger = request.ledger if balance is not None else None
    if len(allowed) > need:  # a choice: skip a class whose text nests with an option taken
        ranked = unnested([request.truth, *mandatory], ranked)
        if ledger is not None:
            k = balance.window(need)
            head = owed_order(ranked[:k], ledger, request.n_options, balance.hardness)
            ranked = head + ranked[k:]
        ranked = first_apart(ranked, need)
        if len(ranked) < need:
            raise not_enough(request, len(ranked), need, what + " whose texts do not nest")
    ranked = sorted(ranked[:need], key=lambda c: (-class_scores[c], c))
    if request.ledger is not None:
        request.ledger.record(request.truth, mandatory + ranked)
    scores = [float(class_scores.get(m, np.nan)) for m in mandatory]
    scores += [float(class_scores[c]) for c in ranked]
    return Negatives(
        strategy=strategy,
        candidates=tuple(mandatory + ranked),
        scores=tuple(round(s, 6) for s in scores),
        pool_size=len(allowed),
    )


@dataclass(frozen=True)
class Balance:
    """How a visual sampler trades hardness for distractor frequency (issue 32.2): the
    distractors are chosen among the ``breadth x need`` most similar classes, a class climbing
    one rank per ``hardness`` answers' worth (``n_options - 1`` showings) it is owed."""

    breadth: float = 2.0
    hardness: float = 1.0

    def __post_init__(self) -> None:
        if self.breadth < 1 or self.hardness < 0:
            raise ValueError(
                f"need breadth >= 1 and hardness >= 0, got {self.breadth=}, {self.hardness=}"
            )

    def window(self, need: int) -> int:
        return max(need, int(np.ceil(self.breadth * need)))

    @classmethod
    def of(cls, balance_frequency: bool, breadth: float, hardness: float) -> Balance | None:
        """The sampler parameters as a policy (``None``: frequency ignored, pure hardness)."""
        return cls(float(breadth), float(hardness)) if balance_frequency else None


def per_class_cap(value: int | str, name: str) -> int | None:
    """A per-class cap: a positive count, or ``"all"`` (None: no cap)."""
    if value == "all" or value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) < 1:
        raise ValueError(f"{name} must be a positive count or 'all', not {value!r}")
    return int(value)


def draw_per_class(
    labels: Sequence[str | None], keep: Sequence[int], size: int | None, rng: np.random.Generator
) -> list[tuple[str, list[int]]]:
    """``(class, table rows)`` for each class in name order: up to ``size`` rows of it drawn
    with ``rng`` (sorted), every row when ``size`` is None or the class is smaller. Table row
    ``r`` is pool index ``keep[r]``; the embed stage and the fit draw through this one function,
    so they draw the same images."""
    rows_by_class: dict[str, list[int]] = {}
    for r, i in enumerate(keep):
        rows_by_class.setdefault(str(labels[i]), []).append(r)
    out = []
    for lab in sorted(rows_by_class):
        rows = np.array(rows_by_class.pop(lab))
        if size is not None and len(rows) > size:
            rows = np.sort(rng.choice(rows, size=size, replace=False))
        out.append((lab, rows.tolist()))
    return out

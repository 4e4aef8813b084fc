"""MedSG pool tasks draw partners and fillers from an index built once per pool; the draws
must be exactly those of a scan of the whole pool (same samples, same generator calls), whether
the pool is held or kept on disk (``SampleSpill``, as the generate stage gives it)."""

from types import SimpleNamespace

import numpy as np
import pytest

from medvqa_build.records import Region, Sample, SliceRef
from medvqa_build.store.sample_spill import SampleSpill
from medvqa_build.tasks.base import ItemProblem
from medvqa_build.tasks.medsg_common import find_region
from medvqa_build.tasks.medsg_refer import Crossmodal, Referring

LABELS = ("liver", "spleen", "tumour", "kidney")


def _pool(rng, n: int) -> tuple[Sample, ...]:
    pool = []
    for i in range(n):
        labels = [lab for lab in LABELS if rng.random() < 0.35]
        regions = tuple(Region(label=lab, bbox=(1.0, 1.0, 5.0, 5.0)) for lab in labels)
        pool.append(
            Sample(
                f"s:{i}",
                "s",
                f"case{i % 7}.nii.gz",
                8,
                8,
                str(rng.choice(["CT", "MRI"])),
                regions=regions,
                group_id="" if rng.random() < 0.1 else f"case{int(rng.integers(9))}",
                slice=SliceRef("axial", int(rng.integers(3))),
                attributes={"sequence": str(rng.choice(["t1", "t2", "flair"]))},
            )
        )
    return tuple(pool)


def _scan_fillers(ctx, anchor, label, k, other_modality=False):
    """The scan the index replaced (tasks/medsg_refer.py before it)."""
    pool = [
        s
        for s in ctx.pool
        if s.group_id != anchor.group_id
        and find_region(s, label) is None
        and s.regions
        and (not other_modality or s.modality != anchor.modality)
    ]
    if len(pool) < k:
        raise ItemProblem(f"only {len(pool)} images without {label!r} to add, need {k}")
    return [pool[i] for i in sorted(ctx.rng.choice(len(pool), size=k, replace=False))]


def _scan_partner(ctx, a, label):
    with_label = [s for s in ctx.pool if find_region(s, label) is not None]
    same_case = [
        s
        for s in with_label
        if s.group_id == a.group_id
        and s.slice == a.slice
        and s.attributes.get("sequence", "") != a.attributes.get("sequence", "")
    ]
    other = same_case or [s for s in with_label if s.modality != a.modality]
    if not other:
        raise ItemProblem(f"no image of {label!r} in another modality or sequence")
    return other[int(ctx.rng.integers(len(other)))]


def _spilled(pool):
    """The pool as the generate stage gives it: on disk, a few samples cached."""
    spill = SampleSpill(cache=8)
    for s in pool:
        spill.append(s)
    return spill


@pytest.mark.parametrize("held", [True, False])
@pytest.mark.parametrize("n", [12, 80, 300])
def test_fillers_and_partners_equal_a_scan_of_the_pool(n, held):
    rng = np.random.default_rng(n)
    pool = _pool(rng, n)
    given = pool if held else _spilled(pool)
    if not held:
        assert list(given) == list(pool) and given[-1] == pool[-1] and len(given) == n
    task, crossmodal = Referring(), Crossmodal()
    for trial in range(60):
        anchor = pool[int(rng.integers(n))]
        label = str(rng.choice(LABELS))
        k = int(rng.integers(0, 5 if trial % 10 else n))  # sometimes more than there are
        for other_modality in (False, True):
            new = SimpleNamespace(pool=given, rng=np.random.default_rng(trial))
            old = SimpleNamespace(pool=pool, rng=np.random.default_rng(trial))
            try:
                got = [s.sample_id for s in task.fillers(new, anchor, label, k, other_modality)]
            except ItemProblem as exc:
                got = str(exc)
            try:
                want = [s.sample_id for s in _scan_fillers(old, anchor, label, k, other_modality)]
            except ItemProblem as exc:
                want = str(exc)
            assert got == want
            assert new.rng.bit_generator.state == old.rng.bit_generator.state
        if find_region(anchor, label) is None:
            continue
        try:
            got = crossmodal.partner(new, anchor, label).sample_id
        except ItemProblem as exc:
            got = str(exc)
        try:
            want = _scan_partner(old, anchor, label).sample_id
        except ItemProblem as exc:
            want = str(exc)
        assert got == want
        assert new.rng.bit_generator.state == old.rng.bit_generator.state

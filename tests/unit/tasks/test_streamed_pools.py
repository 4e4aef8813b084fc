"""Tasks moved from holding their pool to streaming it (``per_sample``) make exactly the items
they made when they held it: instrument presence (whose absent tools come from the whole pool,
read by ``scan``), the MedSG tasks asking about one slice's structure (concept, patch,
multi-view, the two diffs, and cross-modal and referring, whose partners and fillers are read
back from the pool by row number) and object tracking, planned one sequence at a time."""

import pytest

from medvqa_build.api import load_source
from medvqa_build.recipe import Recipe
from medvqa_build.sources import get_source
from medvqa_build.stages import generate
from medvqa_build.stages.generate import generate_items
from medvqa_build.store.parquet import write_samples
from medvqa_build.store.sample_spill import SampleSpill
from medvqa_build.store.tables import SampleTable
from medvqa_build.tasks.medsg_crops import Concept, Patch
from medvqa_build.tasks.medsg_diff import NonRegisteredDiff, RegisteredDiff
from medvqa_build.tasks.medsg_refer import Crossmodal, Referring
from medvqa_build.tasks.medsg_views import MultiView, ObjectTracking
from medvqa_build.tasks.presence import InstrumentPresence

from ...fixtures.sources import brats, msd
from .conftest import SURGERY, run, surgical_samples, task

PRESENCE = task(
    "ip",
    "instrument_presence",
    SURGERY,
    "Instrument Management",
    "Instrument Presence",
    n_options=2,
    quota=60,
)


def _held(monkeypatch, *classes):
    """The generate stage's old path for these tasks: the pool held, one ``candidates`` call."""
    for cls in classes:
        assert cls.per_sample  # streamed as built
        monkeypatch.setattr(cls, "per_sample", False)


def test_presence_streamed_equals_held_and_asks_about_absent_tools(monkeypatch):
    # PSI-AVA-like frames: tools known from their boxes only (no 0/1 table), so a frame's
    # absent tools are the other tools of its source, which one frame alone cannot tell
    samples = surgical_samples(80)
    streamed = run([PRESENCE], samples)
    with monkeypatch.context() as m:
        _held(m, InstrumentPresence)
        held = run([PRESENCE], samples)
    assert streamed.items and streamed.items == held.items
    assert streamed.dropped == held.dropped and streamed.shortfall == held.shortfall
    answers = [i.gt for i in streamed.items]
    assert answers.count("No") >= 25 and answers.count("Yes") >= 25, answers


def test_presence_reads_the_pool_through_scan_only():
    """After ``scan``, one frame's candidates are those it gets among the whole pool."""
    samples = surgical_samples(40)
    whole = InstrumentPresence({}).candidates(samples)
    gen = InstrumentPresence({})
    gen.scan(iter(samples))  # a stream: read once
    one_by_one = [c for s in samples for c in gen.candidates([s])]
    assert [(c.sample.sample_id, c.truth, c.extra) for c in one_by_one] == [
        (c.sample.sample_id, c.truth, c.extra) for c in whole
    ]
    # without the scan a lone frame has no absent tool to ask about: always "Yes"
    alone = [c.truth for s in samples for c in InstrumentPresence({}).candidates([s])]
    assert set(alone) == {"Yes"} and {c.truth for c in whole} == {"Yes", "No"}


# one slice's structures each; cross-modal and referring also show partners and fillers drawn
# from the pool, read back by row number
MEDSG_PER_SAMPLE = (
    "concept",
    "patch",
    "multi_view",
    "Registered_Diff",
    "Non_Registered_Diff",
    "crossmodal",
    "referring",
)


def _medsg_recipe(roots, seed, tasks):
    return Recipe.from_dict(
        {
            "name": "t",
            "benchmark": "MedSG-test",
            "seed": seed,
            "sources": [{"id": k, "root": str(v)} for k, v in roots.items()],
            "tasks": [{"category": "Grounding", **t} for t in tasks],
        }
    )


def _assert_same_images(items, a, b):
    """Every image of ``items`` is byte-identical in output folders ``a`` and ``b``."""
    for item in items:
        for ref in item.images:
            rel = ref.removeprefix("generated://")
            assert (a / rel).read_bytes() == (b / rel).read_bytes()


@pytest.fixture(scope="module")
def medsg(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("medsg-streamed")
    roots = {"msd": msd.write(tmp / "msd"), "brats": brats.write(tmp / "brats")}
    samples = [s for sid, root in roots.items() for s in load_source(sid, root).samples]
    # a table, as a build reads it: cross-modal and referring then keep their pool on disk
    write_samples(samples, tmp / "samples.parquet")
    samples = SampleTable([tmp / "samples.parquet"], batch_rows=7)
    recipe = _medsg_recipe(
        roots, 3, [{"name": k, "generator": k, "task": k, "quota": 6} for k in MEDSG_PER_SAMPLE]
    )
    return recipe, samples, {k: get_source(k).manifest for k in roots}, roots


def test_medsg_per_sample_tasks_streamed_equal_held(medsg, tmp_path, monkeypatch):
    recipe, samples, manifests, _ = medsg
    spills, reads = [], []

    class Spy(SampleSpill):  # records that the pools went to disk and were read back
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            spills.append(self)

        def _read(self, i):
            reads.append(i)
            return super()._read(i)

    with monkeypatch.context() as m:
        m.setattr(generate, "SampleSpill", Spy)
        streamed = generate_items(recipe, samples, manifests, False, out_dir=tmp_path / "a")
    assert len(spills) == 2 and all(len(s) == len(samples) for s in spills)  # every slice
    assert reads  # partners and fillers came back from disk
    with monkeypatch.context() as m:
        _held(
            m, Concept, Patch, MultiView, RegisteredDiff, NonRegisteredDiff, Crossmodal, Referring
        )
        held = generate_items(recipe, samples, manifests, False, out_dir=tmp_path / "b")
    assert {i.task for i in streamed.items} == set(MEDSG_PER_SAMPLE)
    assert streamed.items == held.items and streamed.dropped == held.dropped
    _assert_same_images(streamed.items, tmp_path / "a", tmp_path / "b")


def test_object_tracking_planned_by_sequence_equals_held(medsg, tmp_path, monkeypatch):
    _, samples, manifests, roots = medsg
    track = {"name": "track", "generator": "object_tracking", "task": "object_tracking"}
    recipe = _medsg_recipe(roots, 5, [{**track, "quota": 12, "params": {"n_images": 3}}])
    largest = {"planned": 0, "held": 0}
    real = ObjectTracking.candidates

    def spy(mode):
        def candidates(self, group):
            largest[mode] = max(largest[mode], len(group))
            return real(self, group)

        return candidates

    with monkeypatch.context() as m:
        m.setattr(generate, "BLOCK", 4)  # several blocks, a block cut by its groups' samples
        m.setattr(ObjectTracking, "candidates", spy("planned"))
        planned = generate_items(recipe, samples, manifests, False, out_dir=tmp_path / "a")
    with monkeypatch.context() as m:
        m.setattr(ObjectTracking, "groups_pool", False)
        m.setattr(ObjectTracking, "candidates", spy("held"))
        held = generate_items(recipe, samples, manifests, False, out_dir=tmp_path / "b")
    # 9: a run of slices is asked once, not once per MR sequence of the case (repeats)
    assert len(planned.items) == 9 and planned.items == held.items
    assert planned.repeats == held.repeats and planned.repeats["track"] > 0
    assert planned.dropped == held.dropped and planned.shortfall == held.shortfall
    _assert_same_images(planned.items, tmp_path / "a", tmp_path / "b")
    # planned: never more than one sequence's slices at once; held: the whole pool
    gen = ObjectTracking({"n_images": 3})
    sequences = {}
    for sample in samples:
        if (key := gen.pool_group(sample)) is not None:
            sequences[key] = sequences.get(key, 0) + 1
    assert len(sequences) >= 2
    assert largest["planned"] == max(sequences.values())
    assert largest["held"] == len(samples)

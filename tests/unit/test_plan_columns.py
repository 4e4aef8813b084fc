"""Planning from columns (stages/plan_columns.py) makes exactly the plan of the row pass: the
same candidate rows, ordinals, truth codes, source codes, vocabulary samples and fit refs, for
every generator that offers ``column_candidates``, over several files, an excluded sample and
data the columns cannot stand for (then the task falls back to the row pass)."""

from __future__ import annotations

import json

import pytest

from medvqa_build.recipe import TaskSpec
from medvqa_build.records import MaskRef, Region, Sample, SliceRef
from medvqa_build.stages import generate, plan_columns
from medvqa_build.stages.generate import _plan_pools, _Task
from medvqa_build.store.parquet import write_samples
from medvqa_build.store.tables import SampleTable
from medvqa_build.tasks import TASKS
from medvqa_build.tasks.attribute_classification import AttributeClassification
from medvqa_build.tasks.base import Candidate


class _Everything:
    plans_everything = True

    def __contains__(self, sample_id):
        return True


def _sample(k: int, **kw) -> Sample:
    base = {
        "sample_id": f"s{k:03d}",
        "source": "a" if k % 3 else "b",
        "image": f"img{k}.jpg",
        "width": 64,
        "height": 48,
        "modality": "endoscopy" if k % 4 else "ct",
        "group_id": f"g{k // 2}" if k % 5 else "",
    }
    return Sample(**(base | kw))


def _samples() -> list[Sample]:
    """Labels (one, none, two), attributes (single, several values, absent), regions with
    and without boxes and masks, in an order that makes truths first appear late."""
    findings = ["polyp", "ulcer", "normal", "bleeding"]
    out = []
    for k in range(60):
        labels = () if k % 7 == 0 else (findings[(k * 5) % 4],)
        if k % 11 == 0:
            labels = ("polyp", "ulcer")
        if k % 13 == 0:
            labels = ("ulcer", "ulcer")  # a label twice: two hits for spine_diagnosis
        if k % 17 == 0:
            labels = ("bleeding", None)  # a null label among others: no hit, no exclusion
        attrs = {"phase": ["prep", "dissect", "close, clip", "close"][k % 4]} if k % 6 else {}
        levels = ["L1/L2", "L3/L4,L1/L2", "L1/L2,,L2/L3", "L1/L2,L9", "", ",", None][k % 7]
        if levels is not None:
            attrs["lesion_levels"] = levels
        if k % 9 in (1, 4, 7):  # a count to read, one that is not a number, none (k % 9 == 7)
            attrs["polyp_count"] = ["2", "many", " 3", "0"][k % 4] if k % 9 != 7 else "1"
        if k % 8 in (2, 3, 5):  # presence flags (Cholec80): some tools, none present, ...
            attrs |= {"tool:grasper": str(k % 2), "tool:hook": "1" if k % 8 == 5 else "0"}
        regions = tuple(
            Region(
                label=findings[(k + j * (k % 5 != 2)) % 4],  # k % 5 == 2: one label twice
                bbox=None if (k + j) % 5 == 0 else (1.0 + j, 2.5, 10.0 + k % 7, 12.25 + k),
                mask=MaskRef(counts=(3, 4, 5), size_hw=(48, 64)) if j % 2 else None,
            )
            for j in range(k % 4)
        )
        if k % 5 in (1, 2):  # per-instrument actions (PSI-AVA), some not of a region
            attrs |= {
                f"region{j}.actions": ["cut", "grasp, pull", "pull"][(k + j) % 3]
                for j in ((0, 1, 3, 12) if k % 2 else (2, 10, 1))  # region10 sorts before region2
            }
        elif k % 5 == 3:
            attrs["actions"] = ["cut", "grasp, pull"][k % 2]
        if k % 10 == 2:
            attrs["region01.actions"] = "cut"  # not how region 1 is named: not of a region
        size = {"width": 64 + 8 * (k % 3), "height": 48 + k % 2}
        if k % 3 == 1:  # a volume slice; some with a label volume naming some labels
            size["slice"] = SliceRef("axial", k)
            if k % 4 != 1:
                attrs["label_volume"] = "vol.nii.gz"
            if k % 5 != 1:
                attrs["label_values"] = json.dumps({findings[k % 4]: 1, "ulcer": 2})
        out.append(_sample(k, labels=labels, attributes=attrs, regions=regions, **size))
    return out


def _task(generator: str, visual: bool = False, **spec) -> _Task:
    spec = TaskSpec(
        name=f"t-{generator}",
        generator=generator,
        category="c",
        task="t",
        quota=5,
        n_options=3,
        **spec,
    )
    return _Task(
        spec=spec,
        gen=TASKS.get(generator)(spec.params, spec.n_options),
        sampler=None,
        sources=spec.sources or ["a", "b"],
        visual=visual,
        groups=frozenset(),
    )


TASK_SPECS = [
    ("image_classification", {}),
    ("image_classification", {"params": {"labels": ["polyp", "ulcer", "bleeding"]}}),
    ("image_classification", {"params": {"answer_map": {"polyp": "colon", "ulcer": "stomach"}}}),
    ("lesion_identification", {"where": {"modality": "endoscopy"}}),
    ("attribute_classification", {"params": {"attribute": "phase"}}),
    ("surgical_phase", {"params": {"values": ["prep", "close"]}, "sources": ["a"]}),
    ("region_recognition", {}),
    ("region_recognition", {"params": {"labels": ["ulcer", "normal"]}}),
    (
        "spine_diagnosis",
        {"params": {"labels": ["polyp", "ulcer", "bleeding"], "exclude": ["normal"]}},
    ),  # noqa: E501
    ("spine_diagnosis", {"params": {"labels": ["ulcer", "bleeding"], "exclude": []}}),
    ("spine_localisation", {}),
    ("polyp_counting", {}),
    ("lesion_counting", {"params": {"labels": ["ulcer", "polyp"], "count_empty": True}}),
    ("lesion_counting", {"params": {"count_attribute": "polyp_count"}}),
    ("instrument_counting", {"params": {"labels": ["ulcer"]}}),
    ("instrument_counting", {"params": {"options": ["0", "1", "2"], "count_empty": True}}),
    ("visual_grounding", {}),
    ("visual_grounding", {"params": {"labels": ["ulcer", "polyp"], "max_iou": 0.3}}),
    ("region_selection", {"where": {"modality": "endoscopy"}}),
    ("region_selection", {"params": {"box_pool": False}}),
    ("region_selection", {"params": {"box_pool_size": 8}}),  # a cap that cuts (issue 35)
    ("instrument_presence", {}),
    ("instrument_presence", {"params": {"labels": ["ulcer", "polyp"], "count_empty": True}}),
    ("instrument_presence", {"sources": ["b"]}),
    ("surgical_action", {}),
    ("surgical_action", {"params": {"values": ["cut"]}}),
    ("tool_tissue_interaction", {"params": {"field": "actions"}}),
    ("concept", {}),
    ("concept", {"params": {"min_box_px": 10}}),
    ("patch", {}),
    ("Registered_Diff", {"where": {"modality": "ct"}}),
    ("Non_Registered_Diff", {}),
    ("multi_view", {}),
]


def _plans(tasks_of, table) -> tuple[list[_Task], list[_Task]]:
    rows, cols = tasks_of(), tasks_of()
    real = generate.plan_by_columns
    generate.plan_by_columns = lambda tasks, source, embeddings: list(tasks)
    try:
        _plan_pools(rows, table, _Everything())
    finally:
        generate.plan_by_columns = real
    left = []
    generate.plan_by_columns = lambda *a: left.extend(real(*a)) or list(left)
    try:
        _plan_pools(cols, table, _Everything())
    finally:
        generate.plan_by_columns = real
    assert not left  # every task planned from columns, none fell back to the row pass
    return rows, cols


def _same(a: _Task, b: _Task) -> None:
    assert list(a.rows) == list(b.rows) and len(a.rows) > 0
    assert list(a.ordinals) == list(b.ordinals)
    assert list(a.truth_codes) == list(b.truth_codes)
    assert list(a.source_codes) == list(b.source_codes)
    assert list(a.truth_names) == list(b.truth_names)
    assert {k: list(v.items()) for k, v in a.vocab_samples.items()} == {
        k: list(v.items()) for k, v in b.vocab_samples.items()
    }
    assert list(a.fit_refs) == list(b.fit_refs)
    assert a.fit_labels == b.fit_labels
    assert _scanned(a.gen) == _scanned(b.gen)


def _scanned(gen) -> object:
    """What a generator's scan of its pool left it (the counts its answers span, its box
    pool)."""
    boxes = getattr(gen, "boxes", None)
    if boxes is not None:
        boxes = {
            src: [
                b.rows.tolist(),
                b.labels.tolist(),
                b.owners.tolist(),
                b.names,
                b.weights.tolist(),
                None if b.seen is None else b.seen.tolist(),
            ]
            for src, b in boxes._frozen.items()
        }
        assert boxes and all(len(v[0]) for v in boxes.values())
    tools = getattr(gen, "_pool_tools", None)
    return getattr(gen, "_observed", None), boxes, tools and {k: v for k, v in tools.items() if v}


@pytest.mark.parametrize(("generator", "spec"), TASK_SPECS)
def test_a_column_plan_equals_the_row_plan(tmp_path, generator, spec):
    samples = _samples()
    write_samples(samples[:25], tmp_path / "one.parquet")
    write_samples(samples[25:], tmp_path / "two.parquet")
    table = SampleTable(
        [tmp_path / "one.parquet", tmp_path / "two.parquet"], exclude={"s013"}, batch_rows=16
    )
    assert plan_columns.columnar(_task(generator).gen)
    rows, cols = _plans(lambda: [_task(generator, visual=True, **spec)], table)
    _same(rows[0], cols[0])
    if spec.get("params", {}).get("box_pool_size"):  # the cap cuts: both draw the same boxes
        assert cols[0].gen.boxes.summary()["groups_capped"] > 0
    assert 13 not in list(cols[0].rows)  # excluded, its row number kept by the others


def test_data_the_columns_cannot_plan_goes_to_the_row_pass(tmp_path, monkeypatch):
    samples = _samples()
    write_samples(samples, tmp_path / "s.parquet")
    table = SampleTable([tmp_path / "s.parquet"], batch_rows=16)
    fell_back = []
    real = generate.plan_by_columns

    def spy(tasks, source, embeddings):
        rest = real(tasks, source, embeddings)
        fell_back.extend(t.spec.name for t in rest)
        return rest

    monkeypatch.setattr(generate, "plan_by_columns", spy)

    calls = []

    def null_truth(self, batch, pool):  # the third batch holds what the columns cannot name
        calls.append(len(pool))
        if len(calls) == 3:
            raise plan_columns.NotColumnar("a null truth")
        return AttributeClassification.column_candidates(self, batch, pool)

    class Stubborn(AttributeClassification):
        column_candidates = null_truth

        def candidates(self, samples):  # noqa: D102 (the same as its parent's)
            return AttributeClassification.candidates(self, samples)

    class Overriding(AttributeClassification):
        def candidates(self, samples):  # a subclass's own candidates: not columnar
            return [Candidate(s, "x") for s in samples]

    assert not plan_columns.columnar(Overriding({}, 3))
    assert plan_columns.columnar(Stubborn({}, 3))
    task = _task("attribute_classification")
    task.gen = Stubborn({"attribute": "phase"}, 3)
    _plan_pools([task], table, _Everything())
    assert fell_back == [task.spec.name] and len(calls) == 3
    plain = _task("attribute_classification", params={"attribute": "phase"})
    monkeypatch.setattr(generate, "plan_by_columns", lambda tasks, s, e: list(tasks))
    _plan_pools([plain], table, _Everything())
    _same(plain, task)  # planned from Samples, from the start: the names were reset


def test_a_task_fetches_its_first_candidates_in_a_small_block_then_doubling(monkeypatch):
    """A quota of 40 of a 50k pool fetched 4,096 candidates' samples at once (reading every
    row group); the blocks now start at ``first`` and double up to BLOCK."""
    monkeypatch.setattr(generate, "BLOCK", 64)
    task = _task("image_classification")
    order = list(range(300))
    blocks = list(generate._blocks(task, order, first=10))
    assert [len(b) for b in blocks] == [10, 20, 40, 64, 64, 64, 38]
    assert [k for b in blocks for k in b] == order
    # planned by groups: a block's groups hold at most ``size`` samples, unless one has more
    from array import array

    task.members = [array("q", range(g * 3, g * 3 + 3)) for g in range(100)]
    task.rows = array("q", [k // 2 for k in range(200)])  # two candidates per group
    blocks = list(generate._blocks(task, list(range(200)), first=6))
    assert [k for b in blocks for k in b] == list(range(200))
    sizes = [6, 12, 24, 48, 64]
    for n, block in enumerate(blocks[:-1]):
        size = sizes[min(n, len(sizes) - 1)]
        assert 3 * len({task.rows[k] for k in block}) <= size
        assert len(block) == 2 * (size // 3)


def test_fields_of_a_few_samples_equal_their_full_rows(tmp_path):
    """The embed stage reads only what names the demanded samples' images (get_fields,
    take_fields): the same values as the whole rows, from a table or a list."""
    from medvqa_build.store.tables import SampleList

    samples = _samples()
    samples[5] = _sample(5, image="v.mp4", frame=7)
    write_samples(samples[:30], tmp_path / "one.parquet")
    write_samples(samples[30:], tmp_path / "two.parquet")
    table = SampleTable([tmp_path / "one.parquet", tmp_path / "two.parquet"], batch_rows=8)
    columns = ["source", "image", "frame", "slice"]
    ids = ["s005", "s041", "s017", "nope"]
    for source in (table, SampleList(samples)):
        full = source.get(ids)
        fields = source.get_fields(ids, columns)
        assert sorted(fields) == ["s005", "s017", "s041"]
        for sid, row in fields.items():
            want = full[sid].to_row()
            assert row == {c: want[c] for c in ["sample_id", *columns]}
        assert fields["s005"]["frame"] == 7
        at = source.take_fields([41, 3], ["sample_id", "labels"])
        assert at == {
            r: {"sample_id": f"s{r:03d}", "labels": list(samples[r].labels)} for r in (3, 41)
        }


def test_the_first_blocks_of_all_tasks_are_read_in_one_sweep(
    synthetic_root, repo, tmp_path, monkeypatch
):
    """Each task's first candidates are read ahead with the other tasks' (one take for the
    phase), and the items are the same as when every task reads its own."""
    import yaml

    from medvqa_build.api import load_source
    from medvqa_build.recipe import Recipe
    from medvqa_build.sources import get_source
    from medvqa_build.stages.generate import generate_items

    samples = load_source("synthetic-endo", synthetic_root).samples
    write_samples(samples, tmp_path / "s.parquet")
    data = yaml.safe_load((repo / "recipes" / "demo.yaml").read_text())
    data["tasks"] = [dict(t, quota=4) for t in data["tasks"] if "visual" not in str(t)]
    recipe = Recipe.from_dict(data)
    manifests = {"synthetic-endo": get_source("synthetic-endo").manifest}
    takes = []
    real = SampleTable.take

    def counted(self, rows):
        rows = list(rows)
        takes.append(len(rows))
        return real(self, rows)

    monkeypatch.setattr(SampleTable, "take", counted)

    def items():
        takes.clear()
        table = SampleTable([tmp_path / "s.parquet"])
        return generate_items(recipe, table, manifests, progress=False).items

    ahead = items()
    ahead_takes = list(takes)
    monkeypatch.setattr(generate, "PREFETCH_MAX", 0)
    alone = items()
    assert ahead == alone and len(ahead) == 4 * len(data["tasks"])
    assert len(ahead_takes) < len(takes)  # the vocabularies' takes, then one read ahead
    assert sum(ahead_takes[-1:]) > max(takes)  # ... holding every task's first block

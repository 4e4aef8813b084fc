"""Validation and the build report stream: an on-disk item table and a sample table looked up
by id give exactly the problems (and report numbers) of a list and a dict, and no more than a
window of items is alive at once."""

import gc
import weakref
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from medvqa_build.eval.baselines import baseline_rows, item_chance, multi_select_tasks
from medvqa_build.manifest import SourceManifest
from medvqa_build.negatives import class_centroids, difficulty_report
from medvqa_build.pipeline.report import BuildSummary, difficulty, report_json, report_markdown
from medvqa_build.records import DrawnShape, Item, Negatives, Region, Sample
from medvqa_build.stages.base import StageResult
from medvqa_build.store.parquet import write_items, write_samples
from medvqa_build.store.tables import ItemTable, SampleTable
from medvqa_build.validate import letter_histogram, rules, run_rules

TRUTHS = ["polyp", "ulcer", "bleeding", "angiectasia"]
SPLITS = ["test", "train", "test", "val"]


def _manifest() -> SourceManifest:
    return SourceManifest(
        id="toy",
        title="Toy",
        homepage="https://example.org",
        licence="CC-BY-4.0",
        licence_id="cc-by-4.0",
        redistribution="allowed",
        access="open",
        access_terms="-",
        citation="@misc{toy, title={Toy}}",
        modality="endoscopy",
        layout="-",
        ontology={"parents": {"polyp": "lesion"}, "synonyms": {"bleeding": ["haemorrhage"]}},
        parts=[{"name": "a", "layout": "class_folders"}],
    )


def _sample(i: int) -> Sample:
    truth = TRUTHS[i % 4]
    return Sample(
        f"toy:img{i}",
        "toy",
        f"img{i}.png",
        64,
        48,
        "endoscopy",
        labels=(truth,),
        regions=(Region(truth, bbox=(10.0, 10.0, 30.0, 30.0)),),
        group_id=f"p{i // 3}",  # three images a patient: splits can leak through a patient
    )


def _item(i: int, cls=Item, n_images: int = 40) -> Item:
    """A clean item on image ``i % n_images``, truth at letter ``i % 4``."""
    k = i % n_images
    truth = TRUTHS[k % 4]
    options = [o for o in TRUTHS if o != truth][:3]
    letter = "ABCD"[i % 4]
    options.insert("ABCD".index(letter), truth)
    return cls(
        item_id=f"it{i:05d}",
        benchmark="B",
        category="C",
        task="Lesion" if i % 2 else "Finding",
        subtask="S",
        source="toy",
        sample_ids=(f"toy:img{k}",),
        images=(f"source://toy/img{k}.png",),
        question="Which finding?",
        options=tuple(options),
        answer=letter,
        gt=truth,
        prompt_level="box",
        split=SPLITS[(k // 3) % 4],
        licence="CC-BY-4.0",
        prompt_geometry=(DrawnShape(0, "box", truth, "red", bbox=(10.0, 10.0, 30.0, 30.0)),),
        negatives=Negatives("label_pool" if i % 3 else "visual_class", tuple(options)),
        template_id=f"t{i % 2}/0",
    )


@pytest.fixture
def world(tmp_path):
    """40 images and samples, 60 items with a defect for every build rule and a few item rules;
    the items and samples also written as Parquet tables."""
    rng = np.random.default_rng(0)
    for i in range(40):
        cv2.imwrite(str(tmp_path / f"img{i}.png"), rng.integers(0, 255, (48, 64, 3), np.uint8))
    samples = [_sample(i) for i in range(40)]
    items = [_item(i) for i in range(60)]
    items[5] = items[5].replace(item_id=items[6].item_id)  # item-id-unique
    items[9] = items[9].replace(answer="E")  # answer-in-options
    items[12] = items[12].replace(sample_ids=("toy:gone",))  # schema: unknown sample
    items[14] = items[14].replace(split="val")  # split-leak: image and patient
    items[15] = items[15].replace(images=items[15].images * 2)  # image-count (both kinds)
    items[20] = items[20].replace(licence="MIT")  # licence
    items[21] = items[21].replace(  # box-matches-region
        prompt_geometry=(DrawnShape(0, "box", items[21].gt, "red", bbox=(40.0, 30.0, 60.0, 45.0)),)
    )
    items[30] = items[30].replace(split="train", item_id=items[31].item_id)  # same id, 2 splits
    for k in range(40, 60, 2):  # letter-balance: every "Finding" item from here answers A
        opts = (items[k].gt,) + tuple(o for o in items[k].options if o != items[k].gt)
        items[k] = items[k].replace(options=opts, answer="A")
    manifests = {"toy": _manifest()}

    def resolve(ref):
        return tmp_path / ref.split("/", 3)[-1]

    item_path = write_items(items, tmp_path / "items.parquet")
    sample_path = write_samples(samples, tmp_path / "samples.parquet")
    dups = [["toy:img0", "toy:img3"], ["toy:img2", "toy:gone"]]  # near-duplicates
    return SimpleNamespace(
        items=items,
        samples=samples,
        manifests=manifests,
        resolve=resolve,
        item_path=item_path,
        sample_path=sample_path,
        dups=dups,
    )


def _rules(w, items, samples, **kw):
    return run_rules(items, samples, w.manifests, w.resolve, duplicate_groups=w.dups, **kw)


@pytest.mark.parametrize("window", [4096, 7, 1])
def test_tables_give_the_problems_of_lists(world, monkeypatch, window):
    w = world
    by_id = {s.sample_id: s for s in w.samples}
    want = _rules(w, w.items, by_id)
    # every build rule and the planted item rules fire, so the comparison means something
    assert {p.check for p in want} >= {
        "item-id-unique",
        "answer-in-options",
        "schema",
        "split-leak",
        "image-count",
        "licence",
        "box-matches-region",
        "letter-balance",
    }
    assert any("near-duplicate" in p.message for p in want)
    monkeypatch.setattr(rules, "WINDOW", window)
    table = ItemTable(w.item_path, batch_rows=5)
    sample_table = SampleTable([w.sample_path], batch_rows=8)
    assert _rules(w, table, sample_table) == want
    assert _rules(w, (i for i in w.items), list(w.samples)) == want
    assert _rules(w, w.items, by_id) == want
    for subset in (["split-leak"], ["image-count", "letter-balance"], ["schema", "box-inside"]):
        assert _rules(w, table, sample_table, rules=subset) == _rules(
            w, w.items, by_id, rules=subset
        )
    assert run_rules(table, None, None, w.resolve) == run_rules(w.items, {}, {}, w.resolve)


def test_excluded_samples_are_unknown_like_missing_dict_entries(world):
    w = world
    excluded = {"toy:img3", "toy:img7"}
    by_id = {s.sample_id: s for s in w.samples if s.sample_id not in excluded}
    table = SampleTable([w.sample_path], exclude=excluded)
    got = _rules(w, ItemTable(w.item_path), table)
    assert got == _rules(w, w.items, by_id)
    assert any("toy:img3" in p.message for p in got if p.check == "schema")


def test_build_rules_alone_match_their_whole_set_check(world):
    w = world
    by_id = {s.sample_id: s for s in w.samples}
    ctx = rules.RuleContext(by_id, w.manifests, w.resolve, duplicate_groups=w.dups)
    for rule in rules.RULES:
        if rule.scope == "build":
            assert rule.check(w.items, ctx) == _rules(w, w.items, by_id, rules=[rule.id])


def test_report_numbers_from_a_table(world):
    w = world
    table = ItemTable(w.item_path, batch_rows=7)
    assert letter_histogram(table) == letter_histogram(w.items)
    items = [*w.items[:-1], w.items[-1].replace(answer="A,C")]  # a multi-select item
    test = [i for i in items if i.split in (None, "test")]
    rows = baseline_rows(i for i in items if i.split in (None, "test"))
    assert rows == baseline_rows(test)
    # the numbers are those of the per-item definition
    multi = multi_select_tasks(test)
    for row in rows:
        mine = [item_chance(i, i.task in multi) for i in test if i.task == row["task"]]
        assert row["items"] == len(mine)
        assert row["random_expected"] == (100.0 * sum(mine) / len(mine) if mine else None)


def _difficulty_as_before(items, embeddings):
    """The build report's difficulty as it was computed on lists (the reference)."""
    labelled = [(embeddings[i.sample_ids[0]], i.gt) for i in items if i.sample_ids[0] in embeddings]
    cents = class_centroids(np.stack([v for v, _ in labelled]), [g for _, g in labelled])
    tagged = [i.replace(task=f"{i.task} [{i.negatives.strategy}]") for i in items]
    report = difficulty_report(tagged, embeddings, cents)
    return {
        t: {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
        for t, row in report.items()
    }


def test_difficulty_from_a_table_is_that_of_the_list(world):
    w = world
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((40, 33)).astype(np.float32) + 0.3
    emb = {f"toy:img{k}": vectors[k] for k in range(40) if k != 11}  # one image unembedded
    want = _difficulty_as_before(w.items, emb)
    assert difficulty(ItemTable(w.item_path, batch_rows=4), None, emb) == want
    assert difficulty(w.items, w.samples, emb) == want
    emb64 = {k: v.astype(np.float64) * 3 for k, v in emb.items()}
    assert difficulty(ItemTable(w.item_path), None, emb64) == _difficulty_as_before(w.items, emb64)
    assert difficulty(w.items, None, None) == {}
    assert difficulty(w.items, None, {}) == {}


# --- bounded memory --------------------------------------------------------------------------


class _Tracked(Item):
    """An item a weak reference can follow (Item itself has slots and no ``__weakref__``)."""

    __slots__ = ("__weakref__",)


class _Stream:
    """Re-iterable items made on the fly, recording the most of them alive at once: a
    stand-in for an on-disk table. Items hold no cycles, so reference counting frees them; a
    young-generation collection before each count is cheap, and anything it missed would only
    count against the bound."""

    def __init__(self, n: int):
        self.n = n
        self.alive: weakref.WeakSet = weakref.WeakSet()
        self.most = 0

    def __len__(self) -> int:
        return self.n

    def _count(self) -> None:
        gc.collect(0)
        self.most = max(self.most, len(self.alive))

    def __iter__(self):
        for i in range(self.n):
            self._count()
            item = _item(i, _Tracked)
            self.alive.add(item)
            yield item
            del item
        self._count()


def test_validation_and_report_hold_a_window_of_items(world, monkeypatch, tmp_path):
    w = world
    n, window = 2000, 100
    monkeypatch.setattr(rules, "WINDOW", window)
    stream = _Stream(n)
    problems = run_rules(stream, SampleTable([w.sample_path]), w.manifests, w.resolve)
    assert 0 < stream.most <= 2 * window  # the window being checked, and the next one filling
    assert problems == run_rules([_item(i) for i in range(n)], w.samples, w.manifests, w.resolve)
    # the report makes one pass for counts, the difficulty two: item by item
    stream = _Stream(n)
    emb = {f"toy:img{k}": np.full(8, k + 1.0, np.float32) + np.eye(8)[k % 8] for k in range(40)}
    difficulty(stream, None, emb)
    assert stream.most <= 2
    stream = _Stream(n)
    recipe = SimpleNamespace(name="r", benchmark="EndoBench", seed=0)
    validate = StageResult("validate", tmp_path / "v", "fp", {"problems": 0}, False)
    summary = BuildSummary(recipe, [validate], {}, [], [], stream)
    report = report_json(summary, tmp_path)
    report_markdown(report, summary)
    assert stream.most <= 2
    assert report["items"] == n and sum(report["items_per_task"].values()) == n

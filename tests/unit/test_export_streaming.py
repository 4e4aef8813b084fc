"""Exporters in bounded memory: an on-disk ItemTable gives the same bytes as the list of its
items, and no exporter holds every item at once."""

import gc
import json
import weakref
from dataclasses import fields
from pathlib import Path

import pytest
from PIL import Image

from medvqa_build.export import ExportContext, export
from medvqa_build.export.common import write_json, write_json_list
from medvqa_build.export.hf import ROW_GROUP_ROWS
from medvqa_build.export.tsv_text import TypedColumns, encode_column
from medvqa_build.records import Item
from medvqa_build.store.parquet import write_items
from medvqa_build.store.tables import ItemTable

from .export.conftest import make_item

FORMATS = {
    "hf": {"shard_mb": 0.3},  # several shards (of more than a row group) per split
    "vlmeval": {"circular": True, "part_size_mb": 0.02},  # several parts
    "lmms-eval": {},
    "sharegpt": {"convention": "qwen"},
    "medsg": {},
    "spinebench": {},
}
IMAGES = ("a.png", "b.png", "c.png", "d.jpg")


def varied_item(k: int) -> Item:
    """MCQ items of two tasks and splits, some multi-image or multi-select, a few boxes."""
    if k % 17 == 0:
        return make_item(
            k,
            images=(IMAGES[k % 4], IMAGES[(k + 1) % 4]),
            options=(),
            answer="",
            gt="polyp",
            answer_bbox=(4.0, 5.0, 20.0, 25.0),
            task="Grounding",
            category="Loc",
            coord_format="abs",
        )
    options = (("polyp", "ulcer", "bleeding"), ("6", "NA", "7", "8"))[k % 2]
    answer = "A,C" if k % 9 == 0 else "ABC"[k % 3]
    return make_item(
        k,
        images=(IMAGES[k % 4],),
        options=options,
        answer=answer,
        gt=options[ord(answer[0]) - 65],
        task=("Lesion Type", "Organ")[k % 2],
        split=("test", "train", None)[k % 3],
        scene=(None, "Colonoscopy")[k % 2],
    )


@pytest.fixture(scope="module")
def image_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("imgs")
    for k, name in enumerate(IMAGES):
        Image.new("RGB", (40 + 10 * k, 30), (50 * k, 100, 150)).save(root / name)
    return root


def context(items, image_root: Path, options: dict) -> ExportContext:
    from medvqa_build.sources import get_source

    return ExportContext(
        items,
        lambda ref: image_root / ref,
        "Bench_Test",
        "name: t\nseed: 3\n",
        {"synthetic-endo": get_source("synthetic-endo").manifest},
        {"problems": 0, "failed": False},
        options,
    )


def files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_item_table_exports_the_same_bytes_as_a_list(fmt, image_root, tmp_path):
    items = [varied_item(k) for k in range(400)]
    write_items(items, tmp_path / "items.parquet")
    table = ItemTable(tmp_path / "items.parquet", batch_rows=37)  # many batches
    a = export(fmt, context(items, image_root, FORMATS[fmt]), tmp_path / "list")
    b = export(fmt, context(table, image_root, FORMATS[fmt]), tmp_path / "table")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    got, want = files(tmp_path / "table"), files(tmp_path / "list")
    assert len(want) > 1 and got.keys() == want.keys()
    assert [k for k in want if got[k] != want[k]] == []


class TrackedItem(Item):
    __slots__ = ("__weakref__",)  # Item has slots and no weak references


class Tracked:
    """Re-iterable items made afresh on every pass (as a table read makes them), recording
    the most Item objects alive at once. Items hold no reference cycles, so they die as soon
    as nothing refers to them; a garbage collection every ``gc_every`` items clears cycles
    an exporter's own objects might form."""

    def __init__(self, n: int, gc_every: int = 500):
        self.n, self.gc_every = n, gc_every
        self.alive: weakref.WeakSet = weakref.WeakSet()
        self.peak = 0
        self.passes = 0

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        self.passes += 1
        for k in range(self.n):
            if k % self.gc_every == 0:
                gc.collect()
            self.peak = max(self.peak, len(self.alive))
            base = varied_item(k)
            item = TrackedItem(**{f.name: getattr(base, f.name) for f in fields(Item)})
            self.alive.add(item)
            yield item
        self.peak = max(self.peak, len(self.alive))


def test_tracking_sees_a_materialised_list():
    tracked = Tracked(200)
    held = list(tracked)
    assert tracked.peak == 200 and len(held) == 200


N_ITEMS = 600
# hf fills the splits of a config side by side: a row group of items for each (test, train)
BOUND = {"hf": 2 * ROW_GROUP_ROWS + 30}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_exporter_never_holds_all_items(fmt, image_root, tmp_path):
    tracked = Tracked(N_ITEMS)
    export(fmt, context(tracked, image_root, FORMATS[fmt]), tmp_path / fmt)
    assert tracked.passes >= 1
    assert tracked.peak <= BOUND.get(fmt, 30), f"{fmt} held {tracked.peak} items at once"
    gc.collect()
    assert len(tracked.alive) == 0


@pytest.mark.parametrize(
    "values",
    [
        [],
        [{}],
        [[]],
        [{"a": [1, {"b": "x\ny"}], "é": [], "c": None}, "text", 3.5, [1, [2, []]]],
    ],
)
def test_json_list_writer_matches_write_json(values, tmp_path):
    write_json(tmp_path / "a.json", values)
    assert write_json_list(tmp_path / "b.json", iter(values)) == len(values)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


@pytest.mark.parametrize(
    "column",
    [[], [None], ["6", None, "7"], ["6", "x"], ['"6"', "7"], ["None", "true"], ["1e5", " 2 "]],
)
def test_typed_columns_match_encode_column(column):
    kinds = TypedColumns()
    for text in column:
        kinds.add("c", text)
    assert [kinds.encode("c", t) for t in column] == encode_column(column)

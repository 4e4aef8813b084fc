"""records.Polygon: packed vertices that read, compare and hash like a tuple of (x, y)."""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest

from medvqa_build.records import DrawnShape, Item, Polygon, Region
from medvqa_build.store.parquet import read_items, write_items

PAIRS = ((0.5, 1.0), (3.0, 1.0), (3.0, 4.5), (0.5, 4.5))


def test_reads_like_the_tuple_it_replaces():
    poly = Polygon(PAIRS)
    assert len(poly) == 4
    assert tuple(poly) == PAIRS
    assert poly[0] == (0.5, 1.0) and poly[-1] == (0.5, 4.5)
    assert poly[1:3] == PAIRS[1:3]
    assert [x for x, _ in poly] == [0.5, 3.0, 3.0, 0.5]
    assert (3.0, 4.5) in poly
    with pytest.raises(IndexError):
        poly[4]
    assert not Polygon() and len(Polygon()) == 0


def test_equality_and_hash_match_the_tuple():
    poly = Polygon(PAIRS)
    assert poly == PAIRS
    assert PAIRS == poly  # noqa: SIM300 - the reflected comparison (tuple on the left)
    assert poly == [list(p) for p in PAIRS]
    assert poly != PAIRS[:3] and poly != ((0.5, 1.0),) * 4
    assert poly != ("ab", "cd", "ef", "gh") and poly != [1, 2, 3, 4]
    assert hash(poly) == hash(PAIRS)
    assert {poly: 1}[PAIRS] == 1
    assert Polygon() == ()


def test_built_from_an_array_and_back():
    arr = np.array(PAIRS)
    poly = Polygon(arr)
    assert poly == PAIRS
    out = np.asarray(poly)
    assert out.shape == (4, 2) and out.dtype == np.float64
    out[0, 0] = 99.0  # a copy: the polygon is immutable
    assert poly[0] == (0.5, 1.0)
    assert np.asarray(poly, np.float32).dtype == np.float32
    with pytest.raises(ValueError, match=r"\(N, 2\)"):
        Polygon(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="pairs"):
        Polygon([(1.0, 2.0, 3.0)])
    with pytest.raises(AttributeError):
        poly._xy = None


def test_records_store_polygons_packed_and_round_trip():
    shape = DrawnShape(0, "contour", "polyp", "green", bbox=(0.0, 1.0, 4.0, 5.0), polygon=PAIRS)
    region = Region("polyp", polygon=[list(p) for p in PAIRS])
    assert isinstance(shape.polygon, Polygon) and isinstance(region.polygon, Polygon)
    assert shape.to_row()["polygon"] == [list(p) for p in PAIRS]
    assert DrawnShape.from_row(shape.to_row()) == shape
    assert Region.from_row(region.to_row()) == region
    assert DrawnShape(0, "box").polygon == ()
    assert pickle.loads(pickle.dumps(shape)) == shape


def test_packed_is_smaller_than_tuples():
    rng = np.random.default_rng(0)
    arr = np.round(rng.uniform(0, 500, (500, 2)) * 2) / 2
    as_tuples = tuple(map(tuple, arr.tolist()))
    tuple_bytes = sys.getsizeof(as_tuples) + sum(
        sys.getsizeof(p) + 2 * sys.getsizeof(1.0) for p in as_tuples
    )
    packed = Polygon(arr)
    assert sys.getsizeof(packed._xy) * 5 < tuple_bytes


def test_items_with_polygons_survive_parquet(tmp_path):
    shape = DrawnShape(0, "contour", "polyp", "green", bbox=(1.0, 1.0, 4.0, 5.0), polygon=PAIRS)
    item = Item(
        "i1", "B", "Cat", "Task", "Task", "s", ("s:a",), ("render://images/i1_0.jpg",),
        "Q?", ("x", "y"), "A", "x", prompt_level="contour", prompt_geometry=(shape,),
    )  # fmt: skip
    (back,) = read_items(write_items([item], tmp_path / "items.parquet"))
    assert back == item
    assert isinstance(back.prompt_geometry[0].polygon, Polygon)
    assert tuple(back.prompt_geometry[0].polygon) == PAIRS

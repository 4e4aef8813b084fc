"""Python objects -> Parquet -> objects, for every column shape the contract has."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from medvqa_build.geometry import rle_decode, rle_encode
from medvqa_build.records import DrawnShape, Item, MaskRef, Negatives, Region, Sample, SliceRef
from medvqa_build.schema import ITEM_SCHEMA, SAMPLE_SCHEMA, item_features, sample_features
from medvqa_build.store.parquet import read_items, read_samples, write_items, write_samples

SAMPLE_COLUMNS = [
    "sample_id",
    "source",
    "image",
    "frame",
    "slice",
    "width",
    "height",
    "modality",
    "scene",
    "labels",
    "attributes",
    "regions",
    "group_id",
    "split",
]
ITEM_COLUMNS = [
    "item_id",
    "benchmark",
    "category",
    "task",
    "subtask",
    "scene",
    "source",
    "sample_ids",
    "images",
    "question",
    "options",
    "answer",
    "gt",
    "answer_bbox",
    "coord_format",
    "prompt_level",
    "prompt_geometry",
    "negatives",
    "template_id",
    "split",
    "licence",
]


def _mask():
    m = np.zeros((6, 8), bool)
    m[2:5, 1:4] = True
    size, counts = rle_encode(m)
    return m, MaskRef(size_hw=size, counts=counts)


def test_sample_and_item_columns_are_the_contract():
    assert SAMPLE_SCHEMA.names == SAMPLE_COLUMNS
    assert ITEM_SCHEMA.names == ITEM_COLUMNS
    assert list(sample_features()) == SAMPLE_COLUMNS
    assert list(item_features()) == ITEM_COLUMNS


def test_samples_round_trip_with_nulls_empty_lists_and_rle(tmp_path):
    m, rle = _mask()
    samples = [
        Sample("s:a", "s", "a.jpg", 8, 6, "endoscopy"),  # empty lists, nulls everywhere
        Sample(
            "s:b",
            "s",
            "v.nii.gz",
            8,
            6,
            "ct",
            frame=None,
            slice=SliceRef("axial", 12),
            scene="Colonoscopy",
            labels=("polyp", "ulcer"),
            attributes={"phase": "x", "count": "2"},
            regions=(
                Region("polyp", bbox=(1.0, 2.0, 4.0, 5.0), mask=rle),
                Region("ulcer", mask=MaskRef(path="masks/b.png", value=3)),
                Region(
                    "L4",
                    points=((1.5, 2.5),),
                    polygon=((0.0, 0.0), (3.0, 0.0), (3.0, 3.0)),
                    level="L4/L5",
                ),
            ),
            group_id="patient-1",
            split="train",
        ),
        Sample("s:c", "s", "vid.mp4", 8, 6, "laparoscopy", frame=250, group_id="video01"),
    ]
    path = write_samples(samples, tmp_path / "samples.parquet")
    back = read_samples(path)
    assert back == samples
    assert pq.read_schema(path).remove_metadata() == SAMPLE_SCHEMA
    decoded = rle_decode(back[1].regions[0].mask.size_hw, back[1].regions[0].mask.counts)
    assert (decoded == m).all()
    # convert's rows hand pyarrow the RLE counts as numpy views: the same table
    empty_rle = Region("x", mask=MaskRef(size_hw=(2, 2), counts=[]))
    samples.append(Sample("s:d", "s", "d.jpg", 2, 2, "endoscopy", regions=(empty_rle,)))
    as_lists = pa.Table.from_pylist([s.to_row() for s in samples], schema=SAMPLE_SCHEMA)
    with_arrays = [s.to_row(arrays=True) for s in samples]
    assert isinstance(with_arrays[1]["regions"][0]["mask"]["counts"], np.ndarray)
    assert pa.Table.from_pylist(with_arrays, schema=SAMPLE_SCHEMA).equals(as_lists)


def test_items_round_trip_multi_image_and_geometry(tmp_path):
    _, rle = _mask()
    items = [
        Item(
            "i1",
            "B",
            "Cat",
            "Task",
            "Task",
            "s",
            ("s:a",),
            ("source://s/a.jpg",),
            "Q?",
            ("x", "y"),
            "A",
            "x",
        ),
        Item(
            "i2",
            "B",
            "Cat",
            "Grounding",
            "Sub",
            "s",
            ("s:a", "s:b", "s:c"),
            ("render://images/i2_0.jpg", "source://s/b.jpg", "source://s/c.jpg"),
            "Where?",
            ("[1, 2, 3, 4]", "[5, 6, 7, 8]", "[0, 0, 2, 2]"),
            "A,C",
            "[1, 2, 3, 4]",
            prompt_level="box",
            scene="Colonoscopy",
            answer_bbox=(1.0, 2.0, 3.0, 4.0),
            coord_format="abs",
            prompt_geometry=(
                DrawnShape(0, "box", "polyp", "red", bbox=(1.0, 2.0, 3.0, 4.0), thickness_px=2),
                DrawnShape(1, "mask", "ulcer", "blue", mask=rle),
                DrawnShape(2, "point", None, "green", point=(3.5, 4.5)),
            ),
            negatives=Negatives("visual_class", ("y", "z"), (0.5, 0.25), 7),
            template_id="t/1",
            split="test",
            licence="CC BY 4.0",
        ),
    ]
    back = read_items(write_items(items, tmp_path / "items.parquet"))
    assert back == items
    assert back[1].images[2] == "source://s/c.jpg"
    assert back[1].negatives.scores == (0.5, 0.25)
    assert back[0].prompt_geometry == () and back[0].negatives is None


def test_equal_tables_give_equal_bytes(tmp_path):
    samples = [Sample("s:a", "s", "a.jpg", 8, 6, "endoscopy", labels=("x",))]
    a = write_samples(samples, tmp_path / "a.parquet").read_bytes()
    b = write_samples(samples, tmp_path / "b.parquet").read_bytes()
    assert a == b

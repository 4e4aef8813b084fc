"""Arrow schemas and Hugging Face ``Features`` of the Sample and Item tables (a contract).

The Parquet files between stages use these schemas exactly (written and read by
:mod:`medvqa_build.store.parquet`).
"""

from __future__ import annotations

import pyarrow as pa

_f32 = pa.float32()
_point = pa.list_(_f32)

MASK_TYPE = pa.struct(
    [
        ("path", pa.string()),
        ("value", pa.int32()),
        ("size", pa.list_(pa.int32())),
        ("counts", pa.list_(pa.int32())),
    ]
)

REGION_TYPE = pa.struct(
    [
        ("label", pa.string()),
        ("bbox", pa.list_(_f32, 4)),
        ("mask", MASK_TYPE),
        ("polygon", pa.list_(_point)),
        ("points", pa.list_(_point)),
        ("level", pa.string()),
    ]
)

SAMPLE_SCHEMA = pa.schema(
    [
        ("sample_id", pa.string()),
        ("source", pa.string()),
        ("image", pa.string()),
        ("frame", pa.int32()),
        ("slice", pa.struct([("axis", pa.string()), ("index", pa.int32())])),
        ("width", pa.int32()),
        ("height", pa.int32()),
        ("modality", pa.string()),
        ("scene", pa.string()),
        ("labels", pa.list_(pa.string())),
        ("attributes", pa.map_(pa.string(), pa.string())),
        ("regions", pa.list_(REGION_TYPE)),
        ("group_id", pa.string()),
        ("split", pa.string()),
    ]
)

DRAWN_SHAPE_TYPE = pa.struct(
    [
        ("image_index", pa.int32()),
        ("kind", pa.string()),
        ("label", pa.string()),
        ("color", pa.string()),
        ("bbox", pa.list_(_f32, 4)),
        ("polygon", pa.list_(_point)),
        ("point", pa.list_(_f32, 2)),
        ("mask", MASK_TYPE),
        ("thickness_px", pa.int32()),
    ]
)

NEGATIVES_TYPE = pa.struct(
    [
        ("strategy", pa.string()),
        ("candidates", pa.list_(pa.string())),
        ("scores", pa.list_(_f32)),
        ("pool_size", pa.int32()),
    ]
)

ITEM_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("benchmark", pa.string()),
        ("category", pa.string()),
        ("task", pa.string()),
        ("subtask", pa.string()),
        ("scene", pa.string()),
        ("source", pa.string()),
        ("sample_ids", pa.list_(pa.string())),
        ("images", pa.list_(pa.string())),
        ("question", pa.string()),
        ("options", pa.list_(pa.string())),
        ("answer", pa.string()),
        ("gt", pa.string()),
        ("answer_bbox", pa.list_(_f32, 4)),
        ("coord_format", pa.string()),
        ("prompt_level", pa.string()),
        ("prompt_geometry", pa.list_(DRAWN_SHAPE_TYPE)),
        ("negatives", NEGATIVES_TYPE),
        ("template_id", pa.string()),
        ("split", pa.string()),
        ("licence", pa.string()),
    ]
)


def _hf_features(schema: pa.Schema):
    """HF ``Features`` of a schema. HF has no map type, so a map becomes a key/value list."""
    from datasets import Features

    fields = []
    for f in schema:
        if pa.types.is_map(f.type):
            kv = pa.struct([("key", f.type.key_type), ("value", f.type.item_type)])
            fields.append(pa.field(f.name, pa.list_(kv)))
        else:
            fields.append(f)
    return Features.from_arrow_schema(pa.schema(fields))


def sample_features():
    """HF ``Features`` of the Sample table (``attributes`` as a list of key/value structs)."""
    return _hf_features(SAMPLE_SCHEMA)


def item_features():
    """HF ``Features`` of the Item table (image references as strings)."""
    return _hf_features(ITEM_SCHEMA)

"""Hugging Face dataset folder: ``data/<config>/<split>-00000-of-00001.parquet`` with images
embedded as ``List(Image())`` and the HF features in the Parquet metadata, plus README.md.
Loads offline with ``datasets.load_dataset(folder)``."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa

from ..images import export_name
from ..records import Item
from ..schema import item_features, items_to_table, write_table
from .base import EXPORTERS, ExportContext
from .card import dataset_card

IMAGE_LIST = pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
CONFIG = "default"


def hf_features():
    from datasets import Image, List

    features = item_features()
    features["images"] = List(Image())
    return features


def _table(items: Sequence[Item], resolve: Callable[[str], Path]) -> pa.Table:
    table = items_to_table(items)
    images = [[{"bytes": resolve(ref).read_bytes(), "path": export_name(ref)} for ref in i.images] for i in items]
    table = table.set_column(table.schema.get_field_index("images"), "images", pa.array(images, IMAGE_LIST))
    meta = {b"huggingface": json.dumps({"info": {"features": hf_features().to_dict()}}).encode()}
    return table.replace_schema_metadata(meta)


@EXPORTERS.register("hf")
def export_hf(ctx: ExportContext, out: Path) -> dict:
    """Write the Parquet shards and the dataset card."""
    items, resolve = ctx.items, ctx.resolve
    splits = sorted({i.split or "test" for i in items})
    data_files = []
    for split in splits:
        part = [i for i in items if (i.split or "test") == split]
        rel = f"data/{CONFIG}/{split}-00000-of-00001.parquet"
        write_table(_table(part, resolve), out / rel)
        data_files.append({"split": split, "path": f"data/{CONFIG}/{split}-*"})
    configs = [{"config_name": CONFIG, "default": True, "data_files": data_files}]
    card = dataset_card(items, ctx.manifests, ctx.recipe_yaml, ctx.name, configs, ctx.validation)
    (out / "README.md").write_text(card, encoding="utf-8")
    return {"items": len(items), "splits": splits}

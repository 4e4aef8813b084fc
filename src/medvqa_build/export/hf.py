"""Hugging Face dataset folder: ``data/<config>/<split>-NNNNN-of-NNNNN.parquet`` with images
embedded as ``List(Image())`` and the HF features in the Parquet metadata, plus README.md
(YAML ``configs`` + ``dataset_info``) and ``assets/*.png``. Loads offline with
``datasets.load_dataset(folder)`` (default config: the whole benchmark) or
``load_dataset(folder, "<task config>")``.

Configs: one per benchmark (``all`` when the build has one benchmark) and one per task
family (the task name as a slug, e.g. ``region_recognition``). Shards hold at most
``shard_mb`` (default 500) MB of image bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import UsageError
from ..images import export_name
from ..media.load import export_image_bytes
from ..records import Item
from ..schema import atomic_path, item_features, items_to_table
from .base import EXPORTERS, ExportContext
from .card import dataset_card
from .common import slug, task_configs, write_bytes, write_text
from .plots import card_plots

IMAGE_LIST = pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
ROW_GROUP_ROWS = 100  # small row groups: the dataset viewer and streaming read images lazily


def hf_features():
    from datasets import Image, List

    features = item_features()
    features["images"] = List(Image())
    return features


def _table(items: Sequence[Item], resolve: Callable[[str], Path], meta: bytes) -> pa.Table:
    table = items_to_table(items)
    images = [
        [
            {"bytes": export_image_bytes(resolve(ref))[0], "path": export_name(ref)}
            for ref in i.images
        ]
        for i in items
    ]
    table = table.set_column(
        table.schema.get_field_index("images"), "images", pa.array(images, IMAGE_LIST)
    )
    return table.replace_schema_metadata({b"huggingface": meta})


def _write_shard(
    items: Sequence[Item], resolve: Callable[[str], Path], meta: bytes, path: Path
) -> int:
    """Write one shard a row group at a time (only ``ROW_GROUP_ROWS`` items' images are in
    memory at once); returns the Arrow size of its rows (the card's ``num_bytes``)."""
    tmp = atomic_path(path)
    nbytes = 0
    try:
        writer = None
        for start in range(0, len(items), ROW_GROUP_ROWS):
            table = _table(items[start : start + ROW_GROUP_ROWS], resolve, meta)
            if writer is None:
                writer = pq.ParquetWriter(
                    tmp,
                    table.schema,
                    compression="zstd",
                    write_statistics=True,
                    use_dictionary=True,
                )
            writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
            nbytes += table.nbytes
        if writer is not None:
            writer.close()
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return nbytes


def _shards(
    items: Sequence[Item], resolve: Callable[[str], Path], limit: float
) -> list[list[Item]]:
    shards: list[list[Item]] = [[]]
    size = 0
    for item in items:
        n = sum(resolve(r).stat().st_size for r in item.images) + 2048
        if shards[-1] and size + n > limit:
            shards.append([])
            size = 0
        shards[-1].append(item)
        size += n
    return shards


def _configs(items: Sequence[Item]) -> dict[str, list[Item]]:
    benchmarks = sorted({i.benchmark for i in items})
    groups = (
        {"all": list(items)}
        if len(benchmarks) <= 1
        else {slug(b): [i for i in items if i.benchmark == b] for b in benchmarks}
    )
    for key, part in task_configs(items).items():
        if key in groups:
            raise UsageError(
                f"task config {key!r} has the name of a benchmark config",
                fix="rename the task or the benchmark in the recipe",
            )
        groups[key] = part
    return groups


@EXPORTERS.register("hf")
def export_hf(ctx: ExportContext, out: Path) -> dict:
    """Write the Parquet shards, the dataset card and its plots. Option: ``shard_mb``."""
    limit = float(ctx.options.get("shard_mb", 500)) * 1e6
    features = hf_features()
    meta = json.dumps({"info": {"features": features.to_dict()}}).encode()
    yaml_features = features._to_yaml_list()
    configs, infos, counts, files = [], [], {}, []
    for n, (config, items) in enumerate(_configs(ctx.items).items()):
        data_files, splits_info = [], []
        download = dataset = 0
        for split in sorted({i.split or "test" for i in items}):
            part = [i for i in items if (i.split or "test") == split]
            shards = _shards(part, ctx.resolve, limit)
            num_bytes = 0
            for k, shard in enumerate(shards):
                rel = f"data/{config}/{split}-{k:05d}-of-{len(shards):05d}.parquet"
                num_bytes += _write_shard(shard, ctx.resolve, meta, out / rel)
                download += (out / rel).stat().st_size
                files.append(rel)
            dataset += num_bytes
            data_files.append({"split": split, "path": f"data/{config}/{split}-*"})
            splits_info.append({"name": split, "num_bytes": num_bytes, "num_examples": len(part)})
        entry: dict = {"config_name": config, "data_files": data_files}
        if n == 0:
            entry = {"config_name": config, "default": True, "data_files": data_files}
        configs.append(entry)
        infos.append(
            {
                "config_name": config,
                "features": yaml_features,
                "splits": splits_info,
                "download_size": download,
                "dataset_size": dataset,
            }
        )
        counts[config] = len(items)
    plots = card_plots(ctx.items)
    for fname, png in plots.items():
        write_bytes(out / "assets" / fname, png)
    card = dataset_card(
        ctx.items,
        ctx.manifests,
        ctx.recipe_yaml,
        ctx.name,
        configs,
        ctx.validation,
        dataset_info=infos,
        plots=list(plots),
        config_items=counts,
    )
    write_text(out / "README.md", card)
    return {"items": len(ctx.items), "configs": list(counts), "files": files, "plots": len(plots)}

"""Hugging Face dataset folder: ``data/<config>/<split>-NNNNN-of-NNNNN.parquet`` with images
embedded as ``List(Image())`` and the HF features in the Parquet metadata, plus README.md
(YAML ``configs`` + ``dataset_info``) and ``assets/*.png``. Loads offline with
``datasets.load_dataset(folder)`` (default config: the whole benchmark) or
``load_dataset(folder, "<task config>")``.

Configs: one per benchmark (``all`` when the build has one benchmark) and one per task
family (the task name as a slug, e.g. ``region_recognition``). Shards hold at most
``shard_mb`` (default 500) MB of image bytes.

Bounded memory: one pass over the items cuts the shards; the exporter's item pass then fills
the ``all`` config and counts what the card says (the items written), and one pass per other
config (a filtered read when the items are an ``ItemTable``) fills its splits' shards a row
group at a time, so at most a row group of items per split is held.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import UsageError
from ..media.load import export_image_bytes
from ..media.refs import export_name
from ..records import Item
from ..schema import item_features
from ..store.atomic import atomic_path, write_atomic
from ..store.parquet import items_to_table
from .base import EXPORTERS, ExportContext, Exporter
from .card import CardStats, dataset_card
from .common import slug, task_config, where
from .gallery import card_galleries, gallery_section, recipe_seed, shown_sources
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


class _ShardWriter:
    """One shard written a row group at a time (only ``ROW_GROUP_ROWS`` items' images are in
    memory at once); ``nbytes``: the Arrow size of its rows (the card's ``num_bytes``)."""

    def __init__(self, path: Path, resolve: Callable[[str], Path], meta: bytes):
        self.path, self.resolve, self.meta = path, resolve, meta
        self.tmp = atomic_path(path)
        self.writer: pq.ParquetWriter | None = None
        self.nbytes = 0

    def write(self, items: Sequence[Item]) -> None:
        table = _table(items, self.resolve, self.meta)
        if self.writer is None:
            self.writer = pq.ParquetWriter(
                self.tmp,
                table.schema,
                compression="zstd",
                write_statistics=True,
                use_dictionary=True,
            )
        self.writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self.nbytes += table.nbytes

    def close(self) -> None:
        try:
            if self.writer is not None:
                self.writer.close()
            os.replace(self.tmp, self.path)
        finally:
            self.tmp.unlink(missing_ok=True)

    def abort(self) -> None:
        try:
            if self.writer is not None:
                self.writer.close()
        finally:
            self.tmp.unlink(missing_ok=True)


class _ShardPlan:
    """Where the items of one config split are cut into shards: a shard closes before the
    item that would take its image bytes (+ 2 kB a row) past the limit."""

    def __init__(self) -> None:
        self.lengths: list[int] = [0]
        self.size = 0

    def add(self, n: int, limit: float) -> None:
        if self.lengths[-1] and self.size + n > limit:
            self.lengths.append(0)
            self.size = 0
        self.lengths[-1] += 1
        self.size += n

    @property
    def count(self) -> int:
        return sum(self.lengths)


class _SplitWriter:
    """The shards of one config split, filled in item order, a row group at a time."""

    def __init__(self, config: str, split: str, plan: _ShardPlan, ctx: ExportContext, meta, out):
        self.config, self.split, self.lengths = config, split, plan.lengths
        self.ctx, self.meta, self.out = ctx, meta, out
        self.shard = 0  # index of the shard being written
        self.in_shard = 0  # items of it written or buffered
        self.buffer: list[Item] = []
        self.writer: _ShardWriter | None = None
        self.num_bytes = 0
        self.download = 0

    def rel(self, k: int) -> str:
        return f"data/{self.config}/{self.split}-{k:05d}-of-{len(self.lengths):05d}.parquet"

    def add(self, item: Item) -> None:
        if self.shard == len(self.lengths):
            raise RuntimeError(f"hf export: the items of {self.config}/{self.split} changed")
        self.buffer.append(item)
        self.in_shard += 1
        end = self.in_shard == self.lengths[self.shard]
        if len(self.buffer) >= ROW_GROUP_ROWS or end:
            if self.writer is None:
                self.writer = _ShardWriter(
                    self.out / self.rel(self.shard), self.ctx.resolve, self.meta
                )
            self.writer.write(self.buffer)
            self.buffer = []
        if end:
            self.writer.close()
            self.num_bytes += self.writer.nbytes
            self.download += self.writer.path.stat().st_size
            self.writer = None
            self.shard += 1
            self.in_shard = 0

    @property
    def done(self) -> bool:
        return self.shard == len(self.lengths)

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()


def _image_bytes(item: Item, resolve: Callable[[str], Path]) -> int:
    return sum(resolve(r).stat().st_size for r in item.images) + 2048


class _Plan:
    """One pass over the items: the configs (one per benchmark, or ``all``; one per task
    family) and each split's shard cuts."""

    def __init__(self, items: Iterable[Item], resolve: Callable[[str], Path], limit: float):
        owner: dict[str, str] = {}  # task config -> task
        benchmarks: set[str] = set()
        # shard cuts for every way the items may be grouped; the benchmark count picks one
        whole: dict[str, _ShardPlan] = {}  # split -> plan ("all")
        per_bench: dict[tuple[str, str], _ShardPlan] = {}  # (benchmark, split)
        per_task: dict[tuple[str, str], _ShardPlan] = {}  # (task config, split)
        for item in items:
            key = task_config(owner, item.task)
            benchmarks.add(item.benchmark)
            split = item.split or "test"
            n = _image_bytes(item, resolve)
            whole.setdefault(split, _ShardPlan()).add(n, limit)
            per_bench.setdefault((item.benchmark, split), _ShardPlan()).add(n, limit)
            per_task.setdefault((key, split), _ShardPlan()).add(n, limit)
        # config -> the benchmark it holds (None: every item); a later benchmark with the same
        # slug takes the config over, as a dict built in sorted order would
        self.bench_config: dict[str, str | None] = (
            {"all": None} if len(benchmarks) <= 1 else {slug(b): b for b in sorted(benchmarks)}
        )
        self.task_config = dict(sorted(owner.items()))
        for key in self.task_config:
            if key in self.bench_config:
                raise UsageError(
                    f"task config {key!r} has the name of a benchmark config",
                    fix="rename the task or the benchmark in the recipe",
                )
        self.splits: dict[str, dict[str, _ShardPlan]] = {}  # config -> split -> plan, sorted
        for config, bench in self.bench_config.items():
            plans = (
                whole if bench is None else {s: p for (b, s), p in per_bench.items() if b == bench}
            )
            self.splits[config] = dict(sorted(plans.items()))
        for config in self.task_config:
            plans = {s: p for (k, s), p in per_task.items() if k == config}
            self.splits[config] = dict(sorted(plans.items()))

    def items_of(self, config: str, items: Iterable[Item]) -> Iterable[Item]:
        """The items of a config, in order (a filtered read of a table)."""
        if config in self.bench_config:
            bench = self.bench_config[config]
            return items if bench is None else where(items, "benchmark", bench)
        return where(items, "task", self.task_config[config])


def _galleries(ctx: ExportContext, stats: CardStats, out: Path) -> list[str]:
    """The examples of each task as ``assets/gallery_<task>.png``; the card's section."""
    seed = recipe_seed(ctx.recipe_yaml)
    used = sorted(stats.sources)
    drawn = card_galleries(ctx.items, stats.task, ctx.resolve, ctx.manifests, used, seed)
    for fname, png in drawn.values():
        write_atomic(out / "assets" / fname, png)
    shown = shown_sources(ctx.manifests, used)
    hidden = [s for s in used if s not in shown]
    return gallery_section({t: f for t, (f, _) in drawn.items()}, shown, hidden, seed)


@EXPORTERS.register("hf")
class HF(Exporter):
    """Write the Parquet shards, the dataset card and its plots. Option: ``shard_mb``.

    A first pass cuts the shards; the items then fill the ``all`` config's splits as they
    come (side by side, a row group at a time) and every other config (each benchmark's,
    each task's) is filled by a filtered pass of its own."""

    def start(self) -> None:
        limit = float(self.options.get("shard_mb", 500)) * 1e6
        features = hf_features()
        self.meta = json.dumps({"info": {"features": features.to_dict()}}).encode()
        self.yaml_features = features._to_yaml_list()
        self.plan = _Plan(self.ctx.items, self.ctx.resolve, limit)
        self.stats = CardStats()  # what the card counts: the items written
        self.writers: dict[tuple[str, str], _SplitWriter] = {}
        # the "all" config (one benchmark) is filled by the item pass
        self.whole = self._open("all") if self.plan.bench_config == {"all": None} else {}

    def _open(self, config: str) -> dict[str, _SplitWriter]:
        splits = self.plan.splits[config]
        now = {
            s: _SplitWriter(config, s, p, self.ctx, self.meta, self.out) for s, p in splits.items()
        }
        for w in now.values():
            self.track(w)
        self.writers.update({(config, split): w for split, w in now.items()})
        return now

    def write(self, item: Item) -> None:
        self.stats.add(item)
        if self.whole:
            self.whole[item.split or "test"].add(item)

    def finish(self) -> dict:
        plan = self.plan
        for config in plan.splits:  # a pass per other config, its splits side by side
            if config == "all" and self.whole:
                now = self.whole
            else:
                now = self._open(config)
                for item in plan.items_of(config, self.ctx.items):
                    now[item.split or "test"].add(item)
            if not all(w.done for w in now.values()):
                raise RuntimeError(f"hf export: the items of config {config} changed")
        configs, infos, counts, files = [], [], {}, []
        for n, (config, splits) in enumerate(plan.splits.items()):
            data_files, splits_info = [], []
            download = dataset = 0
            for split, p in splits.items():
                w = self.writers[(config, split)]
                files += [w.rel(k) for k in range(len(p.lengths))]
                download += w.download
                dataset += w.num_bytes
                data_files.append({"split": split, "path": f"data/{config}/{split}-*"})
                splits_info.append(
                    {"name": split, "num_bytes": w.num_bytes, "num_examples": p.count}
                )
            entry: dict = {"config_name": config, "data_files": data_files}
            if n == 0:
                entry = {"config_name": config, "default": True, "data_files": data_files}
            configs.append(entry)
            infos.append(
                {
                    "config_name": config,
                    "features": self.yaml_features,
                    "splits": splits_info,
                    "download_size": download,
                    "dataset_size": dataset,
                }
            )
            counts[config] = sum(p.count for p in splits.values())
        plots = card_plots(self.stats)
        for fname, png in plots.items():
            self.write_file(f"assets/{fname}", png)
        gallery = _galleries(self.ctx, self.stats, self.out)
        card = dataset_card(
            self.stats,
            self.ctx.manifests,
            self.ctx.recipe_yaml,
            self.ctx.name,
            configs,
            self.ctx.validation,
            dataset_info=infos,
            plots=list(plots),
            config_items=counts,
            gallery=gallery,
        )
        self.write_file("README.md", card)
        self.write_licence_file()  # the card's license_link, when its licence is "other"
        return {"configs": list(counts), "files": files, "plots": len(plots)}

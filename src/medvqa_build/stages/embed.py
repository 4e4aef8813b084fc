"""The embed stage: one vector per sample, when a task uses visual negatives.

Whole image files (JPEG, PNG, DICOM, ...) are embedded from their path; a video frame or a
volume slice is decoded once into a PNG inside the stage folder and embedded from there.
Vectors come from the shared cache when the same content was embedded before, by any build.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..errors import ImageProblem
from ..media.encode import encode_image
from ..media.load import load_ref_rgb
from ..media.refs import resolve_image, sample_ref, split_fragment
from ..media.video import VideoProblem
from ..media.volume import VolumeProblem
from ..negatives import (
    EMBEDDERS,
    SAMPLERS,
    UndecodableImage,
    embed_with_cache,
    load_image_rgb,
    make_embedder,
)
from ..negatives.embedders import embedder_name
from ..records import QuarantineEntry, Sample, SliceRef
from ..store.packed import PackedStrings, SortedStrings
from ..store.quarantine import write_quarantine
from .base import BuildContext, Stage, StageResult
from .embed_demand import demand_inputs, plan_demand

log = logging.getLogger(__name__)


def needs_embeddings(recipe) -> bool:
    return any(
        getattr(SAMPLERS.get(t.negatives.strategy), "needs_embeddings", False) for t in recipe.tasks
    )


class Embed(Stage):
    """``sample_id -> vector`` for every sample that could be decoded, when a task (or the
    curate section) needs embeddings; samples that cannot be decoded are listed in
    ``unembedded.json``. The executor computes the vectors not yet in the shared cache.

    Only the samples generation can use are embedded (:mod:`.embed_demand`): the visual
    tasks' reachable candidates and their samplers' per-class pools; ``demand.json`` records
    what was drawn, per task and class."""

    name = "embed"
    version = 4

    @staticmethod
    def _curate_needs(ctx: BuildContext) -> bool:
        return bool(ctx.curate_spec and ctx.curate_spec.needs_embeddings)

    def enabled(self, ctx: BuildContext) -> bool:
        return self._curate_needs(ctx) or needs_embeddings(ctx.recipe)

    def keys(self, ctx: BuildContext) -> list[str]:
        return ["samples"]

    def inputs(self, ctx: BuildContext, key: str) -> Any:
        return {
            "convert": ctx.fingerprints("convert"),
            "embedder": ctx.recipe.embedder,
            "demand": demand_inputs(ctx.recipe, self._curate_needs(ctx)),
        }

    def plugins(self, ctx: BuildContext, key: str) -> list[str]:
        """The recipe's embedder (none for an embedder object passed in), and its tasks'
        option samplers: which samples are embedded is planned with them (``plan_demand``)."""
        name = embedder_name(ctx.recipe.embedder)
        samplers = [SAMPLERS.module(t.negatives.strategy) for t in ctx.recipe.tasks]
        return ([EMBEDDERS.module(name)] if name in EMBEDDERS else []) + samplers

    def run(self, ctx: BuildContext, key: str, out: Path) -> dict[str, Any]:
        recipe, executor = ctx.recipe, ctx.executor
        embedder = _embedder(ctx)
        demand = plan_demand(recipe, ctx.samples, everything=self._curate_needs(ctx))
        if demand.ids is None:
            samples, total = ctx.samples, None
        else:  # read only the rows of the demanded samples, in id order, and of them only
            # what names their image (the rest of a row group is mostly regions and masks)
            found = ctx.samples.get_fields(demand.ids, REF_COLUMNS)
            samples = [_ImageRef.of(found[i]) for i in sorted(found)]
            total = len(ctx.samples)
        paths, ids, failed, seen = _paths_to_embed(
            samples, ctx.roots, out / "frames", ctx.progress, demand.wants
        )
        total = seen if total is None else total

        def embed_all(paths: PackedStrings) -> np.ndarray:
            # written straight into the stage's .npy (memory-mapped), never all in memory
            vectors = np.lib.format.open_memmap(
                out / "embeddings.npy",
                mode="w+",
                dtype=np.float32,
                shape=(len(paths), embedder.dim),
            )
            embed_with_cache(
                embedder,
                paths,
                recipe.embedding_cache,
                progress=ctx.progress,
                executor=executor,
                embedder_spec=recipe.embedder,
                out=vectors,
            )
            return vectors

        try:
            vectors = embed_all(paths)
        except UndecodableImage as exc:
            # a file no decoder reads (e.g. a DICOM in a transfer syntax without a plugin):
            # check every file once, quarantine the undecodable, embed the rest (the chunks
            # done before are in the cache already)
            log.warning("embed: %s; checking every file once", _one_line(str(exc)))
            paths, ids, failed = _decodable(paths, ids, failed, ctx.progress)
            vectors = embed_all(paths)
        vectors.flush()
        _write_json_list(out / "sample_ids.json", ids)
        (out / "unembedded.json").write_text(json.dumps(failed, indent=2) + "\n")
        (out / "demand.json").write_text(
            json.dumps({"all": demand.ids is None, "tasks": demand.tasks}, indent=1) + "\n"
        )
        return {
            "embedded": len(ids),
            "unembedded": len(failed),
            "samples": total,
            "left_out": total - len(ids) - len(failed),
            "embedder": embedder.id,
            "dim": int(vectors.shape[1]),
            "demand": {
                name: {k: v for k, v in row.items() if k != "ids"}
                for name, row in demand.tasks.items()
            },
        }

    def finish(self, ctx: BuildContext, results: list[StageResult]) -> None:
        (result,) = results
        failed = json.loads((result.path / "unembedded.json").read_text())
        if failed:
            ctx.quarantine += embed_failures(failed, ctx.samples)
            write_quarantine(ctx.quarantine, ctx.out / "quarantine.json")
        ids = json.loads((result.path / "sample_ids.json").read_text())
        # memory-mapped: rows are read when a sampler needs them, not all up front
        vectors = np.load(result.path / "embeddings.npy", mmap_mode="r")
        ctx.embeddings = EmbeddingLookup(ids, vectors)
        demand = json.loads((result.path / "demand.json").read_text())
        if not demand["all"]:  # only what generation can use was embedded
            ctx.embeddings.left_out = LeftOut(
                failed=[f["sample_id"] for f in failed],
                pools={k: v["ids"] for k, v in demand["tasks"].items() if "ids" in v},
            )


REF_COLUMNS = ("source", "image", "frame", "slice")  # what sample_ref and _failure read


@dataclass(frozen=True, slots=True)
class _ImageRef:
    """The fields of a sample that name its image (for :func:`sample_ref`)."""

    sample_id: str
    source: str
    image: str
    frame: int | None
    slice: SliceRef | None

    @classmethod
    def of(cls, row: dict) -> _ImageRef:
        cut = row.get("slice")
        return cls(
            row["sample_id"],
            row["source"],
            row["image"],
            row.get("frame"),
            None if cut is None else SliceRef(cut["axis"], int(cut["index"])),
        )


def _embedder(ctx: BuildContext):
    """The recipe's embedder, or its id and width as the executor's workers build it (the
    cache names it that way)."""
    executor = ctx.executor
    info = executor.embedder_info(ctx.recipe.embedder) if executor is not None else None
    if info is None:
        return make_embedder(ctx.recipe.embedder)
    return SimpleNamespace(id=info[0], dim=info[1])


def with_item_samples(ctx: BuildContext, items: Iterable) -> Mapping[str, np.ndarray] | None:
    """The build's embeddings plus those of the items' first samples that the embed stage
    left out (it embeds what generation can use): what the difficulty report reads. These
    are as many as the benchmark's items, embedded through the shared cache, in memory."""
    emb = ctx.embeddings
    if emb is None or getattr(emb, "left_out", None) is None:
        return emb
    need = sorted({i.sample_ids[0] for i in items if i.sample_ids and i.sample_ids[0] not in emb})
    if not need:
        return emb
    found = ctx.samples.get(need)
    # in the build folder: an executor's workers on other hosts read the decoded frames too
    with tempfile.TemporaryDirectory(prefix=".difficulty-frames-", dir=ctx.out) as tmp:
        samples = [found[s] for s in need if s in found]
        paths, ids, _, _ = _paths_to_embed(samples, ctx.roots, Path(tmp), False, lambda _: True)
        embedder = _embedder(ctx)
        vectors = np.zeros((len(paths), embedder.dim), np.float32)
        try:
            embed_with_cache(
                embedder,
                paths,
                ctx.recipe.embedding_cache,
                progress=False,
                executor=ctx.executor,
                embedder_spec=ctx.recipe.embedder,
                out=vectors,
            )
        except UndecodableImage as exc:  # the report goes on without those items' rows
            log.warning("difficulty: %s; items without a vector are not scored", exc)
            return emb
    return _Both(emb, {ids[k]: vectors[k] for k in range(len(ids))})


class _Both(Mapping[str, np.ndarray]):
    """The stage's lookup, then a few more vectors."""

    def __init__(self, first: Mapping, extra: dict):
        self.first, self.extra = first, extra

    def __getitem__(self, sample_id: str) -> np.ndarray:
        if sample_id in self.extra:
            return self.extra[sample_id]
        return self.first[sample_id]

    def __contains__(self, sample_id: object) -> bool:
        return sample_id in self.extra or sample_id in self.first

    def __iter__(self) -> Iterator[str]:
        yield from self.first
        yield from self.extra

    def __len__(self) -> int:
        return len(self.first) + len(self.extra)


def _paths_to_embed(samples: Iterable[Sample], roots, frames: Path, progress: bool, wants):
    """The file to embed of each sample ``wants`` (a frame or slice decoded once into
    ``frames``), its id, the samples that could not be decoded, and the number of samples;
    paths and ids packed (10^6 of them as ``str`` objects in lists would be ~200 MB)."""
    paths, ids, failed = PackedStrings(), PackedStrings(), []
    k = -1
    for k, sample in enumerate(
        tqdm(samples, desc="prepare embed", disable=not progress, leave=False)
    ):
        if not wants(sample.sample_id):
            continue
        base, fragment = split_fragment(sample_ref(sample))
        path = resolve_image(base, roots)
        if fragment:  # a frame or slice: decode once into the stage folder
            try:
                rgb = load_ref_rgb(path, fragment)
            except (ImageProblem, VideoProblem, VolumeProblem, ValueError) as exc:
                failed.append(_failure(sample, str(exc)))
                continue
            path = frames / f"{k:08d}.png"
            frames.mkdir(exist_ok=True)
            path.write_bytes(encode_image(rgb, "png"))
        paths.append(str(path))
        ids.append(sample.sample_id)
    return paths, ids, failed, k + 1


class LeftOut:
    """What a build with only the needed samples embedded tells generate: the samples that
    could not be embedded (``failed``) and each capped task's pool (:mod:`.embed_demand`);
    a sample in neither was left out on purpose."""

    def __init__(self, failed: Sequence[str], pools: dict[str, Sequence[str]]):
        self.failed = SortedStrings(failed)
        self.pools = {name: SortedStrings(ids) for name, ids in pools.items()}


def _failure(sample: Sample, reason: str) -> dict:
    """One sample the stage could not embed (a quarantine entry of stage ``embed``)."""
    prefix = f"source://{sample.source}/"
    ref = sample_ref(sample)
    return {
        "sample_id": sample.sample_id,
        "file": ref.removeprefix(prefix),
        "source": sample.source,
        "reason": _one_line(reason),
    }


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _decodable(paths: PackedStrings, ids: PackedStrings, failed: list[dict], progress: bool):
    """``(paths, ids, failed)`` without the files the embedders' decoder cannot read (each
    added to ``failed`` with its reason)."""
    keep_paths, keep_ids = PackedStrings(), PackedStrings()
    for i in tqdm(range(len(paths)), desc="check images", disable=not progress, leave=False):
        try:
            load_image_rgb(paths[i])
        except UndecodableImage as exc:
            failed.append({"sample_id": ids[i], "file": "", "reason": _one_line(exc.what)})
            continue
        keep_paths.append(paths[i])
        keep_ids.append(ids[i])
    return keep_paths, keep_ids, failed


def embed_failures(failed: list[dict], samples) -> list[QuarantineEntry]:
    """The stage's failures as quarantine entries (file below its source root, stage
    ``embed``); a failure found by :func:`_decodable` gets its file from the sample table."""
    need = {f["sample_id"] for f in failed if not f.get("file")}
    found = {s.sample_id: _failure(s, "") for s in samples if s.sample_id in need} if need else {}
    out = []
    for f in failed:
        row = f if f.get("file") else found.get(f["sample_id"], {"file": f["sample_id"]})
        out.append(
            QuarantineEntry(
                file=row["file"], reason=f["reason"], source=row.get("source", ""), stage="embed"
            )
        )
    return out


def _write_json_list(path: Path, texts: PackedStrings) -> None:
    """``json.dumps(list(texts)) + "\\n"`` written a thousand strings at a time."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[")
        for start in range(0, len(texts), 1000):
            part = ", ".join(
                json.dumps(texts[i]) for i in range(start, min(start + 1000, len(texts)))
            )
            fh.write(part if start == 0 else ", " + part)
        fh.write("]\n")


class EmbeddingLookup(Mapping[str, np.ndarray]):
    """``sample_id -> vector`` over the embedding matrix: the ids are one sorted array of
    UTF-8 bytes (no dict entry or array view per sample), rows read on demand.

    Over the stage's memory-mapped ``.npy`` each row is read from the file (``pread``), not
    through the mapping: rows read through a mapping stay resident for as long as it lives
    (a sampler's fit reads every row: 60 MiB at 100k samples of a 150-d embedder)."""

    def __init__(self, ids: Sequence[str], vectors: np.ndarray):
        if len(ids) != len(vectors):
            raise ValueError(f"{len(ids)} ids for {len(vectors)} vectors")
        self._ids = SortedStrings(ids)
        self.vectors = vectors
        self.left_out: LeftOut | None = None  # set when only the needed samples were embedded
        self._fd: int | None = None
        self._file = None
        if isinstance(vectors, np.memmap) and vectors.filename and vectors.flags.c_contiguous:
            self._file = str(vectors.filename)
            self._offset = int(vectors.offset)
            self._row_shape = vectors.shape[1:]
            self._row_bytes = vectors.dtype.itemsize * int(np.prod(self._row_shape, dtype=int))

    def _descriptor(self) -> int:
        """The open file, opened once per process (a copy sent to or forked into another
        process opens its own)."""
        if self._fd is None or self._pid != os.getpid():
            self._fd, self._pid = os.open(self._file, os.O_RDONLY), os.getpid()
        return self._fd

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_fd": None}

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None and self._pid == os.getpid():
            os.close(self._fd)
            self._fd = None

    def _row(self, sample_id) -> int | None:
        return self._ids.index(sample_id)

    def __getitem__(self, sample_id: str) -> np.ndarray:
        row = self._row(sample_id)
        if row is None:
            raise KeyError(sample_id)
        if self._file is None:
            return self.vectors[row]
        data = os.pread(self._descriptor(), self._row_bytes, self._offset + row * self._row_bytes)
        return np.frombuffer(data, self.vectors.dtype).reshape(self._row_shape)

    def __contains__(self, sample_id: object) -> bool:
        return self._row(sample_id) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

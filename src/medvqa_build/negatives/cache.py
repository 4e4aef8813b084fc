"""Embedding cache keyed by (embedder id, image content hash), shared across builds.

Layout: ``<cache_dir>/<embedder slug>/shard-<digest>.npy`` plus ``shard-<digest>.json`` (the
content keys of its rows). Both are written to a temp file and renamed; the JSON is written
last and is the completion marker, so an interrupted run leaves at most an orphan ``.npy``
that is never read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from .embedder import Embedder

log = logging.getLogger(__name__)

DEFAULT_SHARD_ROWS = 4096


def default_cache_dir() -> Path:
    """``$MEDVQA_CACHE/embeddings``, else ``$XDG_CACHE_HOME/medvqa_build/embeddings``."""
    if os.environ.get("MEDVQA_CACHE"):
        return Path(os.environ["MEDVQA_CACHE"]) / "embeddings"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "medvqa_build" / "embeddings"


def file_sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class EmbeddingCache:
    """The shards of one embedder under ``cache_dir``; lookups by content key."""

    def __init__(self, cache_dir: str | os.PathLike, embedder_id: str, dim: int):
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", embedder_id)[:80]
        digest = hashlib.sha256(embedder_id.encode()).hexdigest()[:12]
        self.dir = Path(cache_dir) / f"{slug}-{digest}"
        self.embedder_id, self.dim = embedder_id, int(dim)
        # key -> shard number << 32 | row: one int per cached vector, not a (name, row) tuple
        self._where: dict[str, int] = {}
        self._shards: list[str] = []  # .npy names by shard number
        self._number: dict[str, int] = {}
        self.reload()

    def _shard_number(self, name: str) -> int:
        if name not in self._number:
            self._number[name] = len(self._shards)
            self._shards.append(name)
        return self._number[name]

    def reload(self) -> None:
        self._where.clear()
        if not self.dir.is_dir():
            return
        for index_path in sorted(self.dir.glob("shard-*.json")):
            npy = index_path.with_suffix(".npy")
            try:
                keys = json.loads(index_path.read_text())["keys"]
            except (OSError, ValueError, KeyError) as exc:
                log.warning("ignoring unreadable cache index %s: %s", index_path, exc)
                continue
            if not npy.exists():
                log.warning("ignoring cache index %s without its .npy", index_path)
                continue
            base = self._shard_number(npy.name) << 32
            for row, key in enumerate(keys):
                self._where.setdefault(key, base | row)

    def __contains__(self, key: str) -> bool:
        return key in self._where

    def __len__(self) -> int:
        return len(self._where)

    def get(self, keys: Sequence[str], out: np.ndarray | None = None) -> np.ndarray:
        """Vectors of ``keys`` in order, into ``out`` when given (e.g. a memory-mapped
        ``.npy`` file, so a large source's vectors never sit in memory all at once).

        Each shard is read once, whole and without a mapping, and a file-backed ``out`` is
        written with ``pwrite``: pages touched through a mapping stay resident while it
        lives (two mappings of 60 MiB each for 100k vectors of a 150-d embedder)."""
        if out is None:
            out = np.empty((len(keys), self.dim), dtype=np.float32)
        elif out.shape != (len(keys), self.dim):
            raise ValueError(f"out has shape {out.shape}, expected {(len(keys), self.dim)}")
        codes = np.fromiter((self._where[k] for k in keys), np.int64, count=len(keys))
        order = np.argsort(codes >> 32, kind="stable")  # grouped by shard, in key order
        shard_of = codes[order] >> 32
        cuts = np.flatnonzero(np.diff(shard_of)) + 1
        with _RowWriter(out) as write:
            for group in np.split(order, cuts) if len(order) else []:
                shard = np.load(self.dir / self._shards[int(codes[group[0]] >> 32)])
                write(group, shard[codes[group] & 0xFFFFFFFF])
        return out

    def put(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Write one shard (atomically); keys already cached are written again harmlessly."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.shape != (len(keys), self.dim):
            raise ValueError(f"expected {(len(keys), self.dim)} vectors, got {vectors.shape}")
        if not keys:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        meta = self.dir / "embedder.json"
        if not meta.exists():
            info = json.dumps({"embedder_id": self.embedder_id, "dim": self.dim}).encode()
            _atomic_write(meta, lambda fh: fh.write(info))
        name = "shard-" + hashlib.sha256("\n".join(keys).encode()).hexdigest()[:20]
        npy, index = self.dir / f"{name}.npy", self.dir / f"{name}.json"
        _atomic_write(npy, lambda fh: np.save(fh, vectors))
        payload = json.dumps({"keys": list(keys), "rows": len(keys)}).encode()
        _atomic_write(index, lambda fh: fh.write(payload))
        base = self._shard_number(npy.name) << 32
        for row, key in enumerate(keys):
            self._where[key] = base | row


class _RowWriter:
    """Writes rows of an output matrix: through ``pwrite`` into a file-backed ``np.memmap``
    (C-ordered), else by assignment."""

    def __init__(self, out: np.ndarray):
        self.out = out
        self.fd: int | None = None
        if isinstance(out, np.memmap) and out.filename and out.flags.c_contiguous:
            self.fd = os.open(out.filename, os.O_WRONLY)
            self.offset = int(out.offset)
            self.row_bytes = out.dtype.itemsize * int(np.prod(out.shape[1:], dtype=int))

    def __enter__(self):
        return self

    def __call__(self, rows: np.ndarray, values: np.ndarray) -> None:
        if self.fd is None:
            self.out[rows] = values
            return
        values = np.ascontiguousarray(values, dtype=self.out.dtype)
        for row, value in zip(rows.tolist(), values, strict=True):
            os.pwrite(self.fd, value.data, self.offset + row * self.row_bytes)

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)


def embed_with_cache(
    embedder: Embedder,
    paths: Sequence[str | os.PathLike],
    cache_dir: str | os.PathLike | None = None,
    *,
    keys: Sequence[str] | None = None,
    shard_rows: int = DEFAULT_SHARD_ROWS,
    progress: bool = True,
    executor=None,
    embedder_spec: str | Mapping[str, Any] | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Embeddings of ``paths`` in order, computing only images whose content is not cached.

    ``keys`` overrides the content key of each path (default: sha256 of the file bytes); give
    one when a path is not the whole image, e.g. ``f"{video_sha}#frame={i}"``. Each computed
    chunk of ``shard_rows`` images is written as soon as it is done, so an interrupted run
    keeps its finished shards.

    With an ``executor`` (see :mod:`medvqa_build.executors`) and the ``embedder_spec`` that
    built ``embedder``, the missing chunks are embedded by ``executor.embed_chunks`` (e.g. GPU
    actors on a Ray cluster); ``embedder`` then only names the cache (``id``, ``dim``). The
    ``local`` executor embeds in this process with ``embedder`` itself (no second load).
    ``out`` (``len(paths) x dim`` float32, e.g. ``np.lib.format.open_memmap``) receives the
    vectors instead of a new array.
    """
    paths = [str(p) for p in paths]
    cache = EmbeddingCache(cache_dir or default_cache_dir(), embedder.id, embedder.dim)
    if keys is None:
        keys = [file_sha256(p) for p in tqdm(paths, desc="hash images", disable=not progress)]
    elif len(keys) != len(paths):
        raise ValueError(f"{len(keys)} keys for {len(paths)} paths")
    todo: dict[str, str] = {}
    for path, key in zip(paths, keys, strict=True):
        if key not in cache and key not in todo:
            todo[key] = path
    if todo:
        log.info("embedding %d of %d images with %s", len(todo), len(paths), embedder.id)
        missing = list(todo.items())
        chunks = [missing[s : s + shard_rows] for s in range(0, len(missing), shard_rows)]
        if executor is None or executor.name == "local":  # in-process: reuse ``embedder``
            computed = (embedder.embed_paths([p for _, p in chunk]) for chunk in chunks)
        else:
            if embedder_spec is None:
                raise ValueError("embed_with_cache: an executor needs the embedder_spec")
            computed = executor.embed_chunks(embedder_spec, [[p for _, p in c] for c in chunks])
        with tqdm(total=len(missing), desc="embed images", unit="img", disable=not progress) as bar:
            for chunk, vectors in zip(chunks, computed, strict=True):
                cache.put([k for k, _ in chunk], vectors)
                bar.update(len(chunk))
    return cache.get(list(keys), out=out)

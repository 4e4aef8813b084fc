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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..store.atomic import AtomicFile, file_sha256, write_atomic
from ..store.packed import PackedStrings
from .embedder import Embedder

log = logging.getLogger(__name__)

DEFAULT_SHARD_ROWS = 4096


def default_cache_dir() -> Path:
    """``$MEDVQA_CACHE/embeddings``, else ``$XDG_CACHE_HOME/medvqa_build/embeddings``."""
    if os.environ.get("MEDVQA_CACHE"):
        return Path(os.environ["MEDVQA_CACHE"]) / "embeddings"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "medvqa_build" / "embeddings"


class _KeyIndex:
    """Content key -> code (shard number << 32 | row), for every key of every shard.

    A cache shared across builds can hold 10^6 keys: as a dict of 64-character strings that
    is ~190 bytes a key. Here each key is a 16-byte BLAKE2b digest in one sorted array with
    its code beside it (24 bytes a key); keys added since the last lookup wait in a list
    and are merged, with one sort, before the next."""

    def __init__(self) -> None:
        self._digests = np.zeros(0, "S16")
        self._codes = np.zeros(0, np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray, bool]] = []

    @staticmethod
    def digests(keys: Sequence[str | bytes]) -> np.ndarray:
        """The 16-byte digest of each key (``str`` or its UTF-8 ``bytes``), as ``S16``."""
        blake = hashlib.blake2b
        out = np.empty(len(keys), "S16")
        for i, key in enumerate(keys):
            out[i] = blake(key.encode() if isinstance(key, str) else key, digest_size=16).digest()
        return out

    def add(self, keys: Sequence[str | bytes], codes: np.ndarray, *, replace: bool) -> None:
        """Index ``keys`` (in order) at ``codes``; a key already indexed (or repeated in
        ``keys``) keeps its first code unless ``replace``, which makes the last one win."""
        if len(keys):
            self._pending.append((self.digests(keys), np.asarray(codes, np.int64), replace))

    def _merge(self) -> None:
        batches: list[tuple[np.ndarray, np.ndarray, bool]] = []
        for digests, codes, replace in self._pending:  # one sort per run of alike batches
            if batches and batches[-1][2] == replace:
                d, c, _ = batches[-1]
                batches[-1] = (np.concatenate([d, digests]), np.concatenate([c, codes]), replace)
            else:
                batches.append((digests, codes, replace))
        for digests, codes, replace in batches:
            both = np.concatenate([self._digests, digests])
            order = np.argsort(both, kind="stable")  # equal keys: older entries first
            ranked = both[order]
            if replace:  # the last entry of each run of equal keys
                keep = np.r_[ranked[1:] != ranked[:-1], True]
            else:  # the first
                keep = np.r_[True, ranked[1:] != ranked[:-1]]
            self._digests = ranked[keep]
            self._codes = np.concatenate([self._codes, codes])[order[keep]]
        self._pending = []

    def codes(self, keys: Sequence[str | bytes], digests: np.ndarray | None = None) -> np.ndarray:
        """The code of each key, -1 where it is not indexed (``digests``: the keys'
        :meth:`digests`, when the caller has them)."""
        self._merge()
        want = self.digests(keys) if digests is None else digests
        at = np.searchsorted(self._digests, want)
        found = at < len(self._digests)
        found[found] = self._digests[at[found]] == want[found]
        out = np.full(len(want), -1, np.int64)
        out[found] = self._codes[at[found]]
        return out

    def __len__(self) -> int:
        self._merge()
        return len(self._digests)

    def clear(self) -> None:
        self.__init__()


class EmbeddingCache:
    """The shards of one embedder under ``cache_dir``; lookups by content key."""

    def __init__(self, cache_dir: str | os.PathLike, embedder_id: str, dim: int):
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", embedder_id)[:80]
        digest = hashlib.sha256(embedder_id.encode()).hexdigest()[:12]
        self.dir = Path(cache_dir) / f"{slug}-{digest}"
        self.embedder_id, self.dim = embedder_id, int(dim)
        # key -> shard number << 32 | row, as 24 bytes a key (see _KeyIndex)
        self._where = _KeyIndex()
        self._shards: list[str] = []  # .npy names by shard number
        self._number: dict[str, int] = {}
        self.reload()

    def _shard_number(self, name: str) -> int:
        if name not in self._number:
            self._number[name] = len(self._shards)
            self._shards.append(name)
        return self._number[name]

    def reload(self) -> None:
        """Index every complete shard (in name order: the first shard holding a key wins)."""
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
            self._where.add(keys, base | np.arange(len(keys), dtype=np.int64), replace=False)

    def __contains__(self, key: str) -> bool:
        return bool(self._where.codes([key])[0] >= 0)

    def missing(self, keys: Sequence[str | bytes], digests: np.ndarray | None = None) -> np.ndarray:
        """Whether each key is not cached (one vectorised lookup; ``digests`` as
        :meth:`_KeyIndex.codes` takes them)."""
        return self._where.codes(keys, digests) < 0

    def __len__(self) -> int:
        return len(self._where)

    def get(
        self,
        keys: Sequence[str | bytes],
        out: np.ndarray | None = None,
        digests: np.ndarray | None = None,
    ) -> np.ndarray:
        """Vectors of ``keys`` in order, into ``out`` when given (e.g. a memory-mapped
        ``.npy`` file, so a large source's vectors never sit in memory all at once).

        Each shard is read once, whole and without a mapping, and a file-backed ``out`` is
        written with ``pwrite``: pages touched through a mapping stay resident while it
        lives (two mappings of 60 MiB each for 100k vectors of a 150-d embedder)."""
        if out is None:
            out = np.empty((len(keys), self.dim), dtype=np.float32)
        elif out.shape != (len(keys), self.dim):
            raise ValueError(f"out has shape {out.shape}, expected {(len(keys), self.dim)}")
        codes = self._where.codes(keys, digests)
        if len(codes) and codes.min() < 0:
            first = keys[int(np.argmin(codes))]
            raise KeyError(first.decode() if isinstance(first, bytes) else first)
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
            write_atomic(meta, info, fsync=True)
        name = "shard-" + hashlib.sha256("\n".join(keys).encode()).hexdigest()[:20]
        npy, index = self.dir / f"{name}.npy", self.dir / f"{name}.json"
        with AtomicFile(npy, fsync=True) as out:
            np.save(out.fh, vectors)
        payload = json.dumps({"keys": list(keys), "rows": len(keys)}).encode()
        write_atomic(index, payload, fsync=True)
        base = self._shard_number(npy.name) << 32
        self._where.add(keys, base | np.arange(len(keys), dtype=np.int64), replace=True)


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
    if not isinstance(paths, PackedStrings):  # packed paths are read one at a time
        paths = [str(p) for p in paths]
    cache = EmbeddingCache(cache_dir or default_cache_dir(), embedder.id, embedder.dim)
    # keys as one array of UTF-8 bytes (64 bytes a file hash instead of a 113-byte str)
    if keys is None:
        packed = np.empty(len(paths), "S64")
        for i, p in enumerate(tqdm(paths, desc="hash images", disable=not progress)):
            packed[i] = file_sha256(p).encode()
    elif len(keys) != len(paths):
        raise ValueError(f"{len(keys)} keys for {len(paths)} paths")
    else:
        packed = np.empty(len(keys), f"S{max((len(k.encode()) for k in keys), default=1)}")
        for i, k in enumerate(keys):
            packed[i] = k.encode()
    digests = _KeyIndex.digests(packed)
    # the first path of each key not cached, in path order
    todo = np.flatnonzero(cache.missing(packed, digests))
    if todo.size:
        _, first = np.unique(digests[todo], return_index=True)
        todo = todo[np.sort(first)]
        log.info("embedding %d of %d images with %s", todo.size, len(paths), embedder.id)
        chunks = [todo[s : s + shard_rows] for s in range(0, todo.size, shard_rows)]
        if executor is None or executor.name == "local":  # in-process: reuse ``embedder``
            computed = (embedder.embed_paths([paths[i] for i in c.tolist()]) for c in chunks)
        else:
            if embedder_spec is None:
                raise ValueError("embed_with_cache: an executor needs the embedder_spec")
            computed = executor.embed_chunks(
                embedder_spec, [[paths[i] for i in c.tolist()] for c in chunks]
            )
        with tqdm(total=todo.size, desc="embed images", unit="img", disable=not progress) as bar:
            for chunk, vectors in zip(chunks, computed, strict=True):
                cache.put([packed[i].decode() for i in chunk.tolist()], vectors)
                bar.update(len(chunk))
    return cache.get(packed, out=out, digests=digests)

"""Where a stage's independent tasks run: inline, a local process pool, or a Ray cluster.

Stages split their work into picklable tasks (a convert shard, a chunk of items to render, a
chunk of images to embed) and hand them to an :class:`Executor`, which runs a module-level
function over them and gives the results back **in task order**. Tasks write their own
outputs (Parquet shards, image files) into the stage folder and return small summaries, so an
executor moves little data and every executor gives byte-identical stage outputs.

``local`` (the default) runs tasks in this process (``workers=1``) or in a process pool;
``ray`` runs them as Ray Data ``map_batches`` operators (the ``[ray]`` extra, see
``docs/cluster.md``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, ClassVar, TypeVar

import numpy as np

from ..errors import UsageError
from ..negatives import make_embedder

T = TypeVar("T")
R = TypeVar("R")


class Executor(ABC):
    """Runs ``fn(task)`` for every task; results come back in task order."""

    name: ClassVar[str]

    def __init__(self, workers: int | None = 1, **options: Any):
        # None: the executor's own default (1 locally, every CPU of a Ray cluster)
        self.workers = max(1, int(workers)) if workers else 1
        self.options = dict(options)

    @abstractmethod
    def map(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[R]:
        """``fn(task)`` for each task, yielded in task order.

        ``fn`` must be a module-level function and every task picklable (they may run in
        another process or on another machine; paths must then be on a shared filesystem).
        """

    def embed_chunks(
        self, embedder_spec: str | Mapping[str, Any], chunks: Sequence[Sequence[str]]
    ) -> Iterator[np.ndarray]:
        """Vectors of each chunk of image paths, in chunk order (one embedder, loaded once).

        The default runs in this process; the Ray executor runs GPU (or CPU) actors.
        """
        embedder = make_embedder(embedder_spec)
        for chunk in chunks:
            yield embedder.embed_paths(list(chunk))

    def embedder_info(self, embedder_spec: str | Mapping[str, Any]) -> tuple[str, int] | None:
        """``(id, dim)`` of the embedder as this executor's workers build it, or None when
        they build it like this process does (the caller then makes it here)."""
        return None

    def close(self) -> None:
        """Release pools or cluster connections (idempotent)."""
        return None

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LocalExecutor(Executor):
    """In this process for ``workers=1``; otherwise a pool of ``workers`` processes."""

    name = "local"

    def __init__(self, workers: int | None = 1, **options: Any):
        super().__init__(workers, **options)
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[R]:
        tasks = list(tasks)
        if self.workers <= 1 or len(tasks) <= 1:
            for task in tasks:
                yield fn(task)
            return
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers)
        yield from self._pool.map(fn, tasks)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


EXECUTOR_NAMES = ("local", "ray")


def make_executor(name: str = "local", workers: int | None = 1, **options: Any) -> Executor:
    """An executor by name: ``local`` or ``ray`` (needs ``pip install 'medvqa-build[ray]'``)."""
    if isinstance(name, Executor):
        return name
    if name == "local":
        return LocalExecutor(workers, **options)
    if name == "ray":
        try:
            from .ray_executor import RayExecutor
        except ImportError as exc:
            raise UsageError(
                f"the ray executor needs Ray Data ({exc})",
                fix="pip install 'medvqa-build[ray]' (or use --executor local)",
            ) from None
        return RayExecutor(workers, **options)
    raise UsageError(f"unknown executor {name!r}", fix="use one of: " + ", ".join(EXECUTOR_NAMES))


__all__ = ["EXECUTOR_NAMES", "Executor", "LocalExecutor", "make_executor"]

"""The Ray executor: stage tasks as Ray Data ``map_batches`` operators (``--executor ray``).

Each task is one row (its pickled ``(fn, task)``) in its own block; a module-level wrapper
unpickles it, runs ``fn(task)`` on a Ray worker (one CPU each, at most ``workers`` at once) and
returns the pickled result, or the pickled exception, which is raised again on the driver
with its own type and message. Results are yielded in task order. Embedding runs in a pool
of actors that each load the embedder once: one GPU per actor when the cluster has GPUs,
otherwise one CPU; :meth:`RayExecutor.embedder_info` names the embedder as those actors build
it (an open_clip id includes its device-dependent precision), for the embedding cache.

Tasks write their outputs (Parquet shards, image files) into the stage folder themselves, so
on a multi-node cluster the build folder and the source roots must be on a filesystem that
every node mounts at the same path (see ``docs/cluster.md``). Needs the ``[ray]`` extra.
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import ray
import ray.data
from ray.util.debug import log_once

from ..errors import UsageError
from ..negatives import make_embedder
from . import Executor

T = TypeVar("T")
R = TypeVar("R")

_PROTOCOL = 5


class RayTaskFailed(RuntimeError):
    """A task raised an exception that cannot be pickled back; carries its traceback text."""


def _dump_outcome(ok: bool, value: Any) -> bytes:
    try:
        return pickle.dumps((ok, value), protocol=_PROTOCOL)
    except Exception as exc:  # an unpicklable result or exception: keep its text
        if ok:
            text = f"the task result cannot be pickled: {exc}"
        else:
            text = "".join(traceback.format_exception(value)).rstrip()
        return pickle.dumps((False, RayTaskFailed(text)), protocol=_PROTOCOL)


def _load_outcome(payload: bytes) -> Any:
    ok, value = pickle.loads(payload)
    if not ok:
        raise value
    return value


def _run_tasks(batch: dict[str, np.ndarray]) -> dict[str, list]:
    """The ``map_batches`` function: ``fn(task)`` for each pickled ``(fn, task)`` row."""
    out = []
    for payload in batch["task"]:
        try:
            fn, task = pickle.loads(payload)
            out.append(_dump_outcome(True, fn(task)))
        except Exception as exc:
            out.append(_dump_outcome(False, exc))
    return {"i": list(batch["i"]), "out": out}


class _EmbedActor:
    """A ``map_batches`` actor: loads the embedder once (on its first chunk; every row carries
    the spec, so the actor has no constructor arguments) and embeds each chunk of paths."""

    def __init__(self):
        self.spec: bytes | None = None
        self.embedder = self.error = None

    def _embedder(self, spec: bytes):
        if spec != self.spec:
            self.spec = spec
            try:
                self.embedder, self.error = make_embedder(pickle.loads(spec)), None
            except Exception as exc:  # reported for each chunk, not as an actor crash
                self.embedder, self.error = None, exc
        if self.error is not None:
            raise self.error
        return self.embedder

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list]:
        out = []
        for spec, payload in zip(batch["spec"], batch["paths"], strict=True):
            try:
                vectors = self._embedder(spec).embed_paths(pickle.loads(payload))
                out.append(_dump_outcome(True, np.asarray(vectors, dtype=np.float32)))
            except Exception as exc:
                out.append(_dump_outcome(False, exc))
        return {"i": list(batch["i"]), "out": out}


def _embedder_identity(spec: bytes) -> bytes:
    """``(id, dim)`` of the embedder ``spec`` builds here (a worker with the actors' resources:
    an open_clip id names the device-dependent precision)."""
    try:
        embedder = make_embedder(pickle.loads(spec))
        return _dump_outcome(True, (str(embedder.id), int(embedder.dim)))
    except Exception as exc:
        return _dump_outcome(False, exc)


def _actor_pool(gpus: int, workers: int, n_chunks: int) -> tuple[int, dict[str, int]]:
    """(actor count, resources per actor): one GPU each when the cluster has GPUs, else one
    CPU each for at most ``workers`` actors; never more actors than chunks."""
    if gpus > 0:
        return max(1, min(gpus, n_chunks)), {"num_gpus": 1}
    return max(1, min(workers, n_chunks)), {"num_cpus": 1}


def _check_reachable(address: str | None, timeout: float = 5.0) -> str | None:
    """Why a ``host:port`` cluster address cannot be reached (``None`` when it can, or when
    the address is ``auto``, ``local``, ``ray://...`` or not given)."""
    if not address or address in ("auto", "local") or "://" in address:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return f"{address!r} is not host:port"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


def _in_order(rows: Iterator[dict[str, Any]], n: int) -> Iterator[Any]:
    """Results by index ``0..n-1`` (rows come in order; a buffer covers any that do not)."""
    pending: dict[int, bytes] = {}
    nxt = 0
    for row in rows:
        pending[int(row["i"])] = row["out"]
        while nxt in pending:
            yield _load_outcome(pending.pop(nxt))
            nxt += 1
    if nxt != n:
        raise RuntimeError(f"the ray executor got {nxt} of {n} results")


class RayExecutor(Executor):
    """Tasks as Ray Data ``map_batches`` operators on a local or remote Ray cluster.

    ``address`` (option): ``None`` starts a new local Ray with ``workers`` CPUs (unless Ray is
    already initialised in this process, or ``RAY_ADDRESS`` names a cluster); ``"auto"``,
    ``"host:port"`` or ``"ray://host:port"`` joins a running cluster. ``close()`` shuts down
    only a Ray this executor started.
    """

    name = "ray"

    def __init__(self, workers: int | None = None, **options: Any):
        super().__init__(workers, **options)
        self.address = options.get("address")
        self._started = False
        self._connect(workers)
        if not workers:  # default: every CPU of the cluster
            self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))

    def _connect(self, workers: int | None) -> None:
        if ray.is_initialized():
            return
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "logging_level": logging.WARNING,
            "configure_logging": True,
        }
        address = self.address
        if address is None and not os.environ.get("RAY_ADDRESS"):
            # "local": a new Ray of our own, never a `ray start` cluster found on this machine
            address, kwargs["num_cpus"] = "local", workers or None
        where = self.address or os.environ.get("RAY_ADDRESS") or "a new local Ray"
        fix = (
            "start it (`ray start --head` on the head node) and pass its address (e.g. "
            "--ray-address auto on a cluster node); with token authentication set "
            "RAY_AUTH_MODE=token here too; or omit --ray-address for local mode"
        )
        problem = _check_reachable(self.address)
        if problem:
            raise UsageError(f"cannot connect to the Ray cluster at {where}: {problem}", fix=fix)
        auth_log = logging.getLogger("ray._private.authentication.authentication_token_setup")
        level = auth_log.level
        auth_log.setLevel(logging.ERROR)  # the token-auth notice of every local start
        try:
            ray.init(address=address, **kwargs)
        except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(
                f"cannot connect to the Ray cluster at {where}: {first}", fix=fix
            ) from None
        finally:
            auth_log.setLevel(level)
        self._started = True

    def _dataset(self, payloads: list[bytes], column: str, **same: Any) -> ray.data.Dataset:
        # quiet: stages show their own progress; this marks Ray Data's "progress bars
        # disabled" notice as already given, and keeps its per-dataset INFO lines out
        log_once("ray_data_progress_manager_disabled")
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        items = [{"i": i, column: p, **same} for i, p in enumerate(payloads)]
        ds = ray.data.from_items(items, override_num_blocks=len(items))
        ctx = ds.context
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        ctx.enable_auto_log_stats = False
        return ds

    def map(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[R]:
        tasks = list(tasks)
        if not tasks:
            return
        payloads = [pickle.dumps((fn, task), protocol=_PROTOCOL) for task in tasks]
        ds = self._dataset(payloads, "task").map_batches(
            _run_tasks,
            batch_size=1,
            batch_format="numpy",
            compute=ray.data.TaskPoolStrategy(size=min(self.workers, len(tasks))),
            num_cpus=1,
            udf_modifying_row_count=False,
        )
        yield from _in_order(ds.iter_rows(), len(tasks))

    def embed_chunks(
        self, embedder_spec: str | Mapping[str, Any], chunks: Sequence[Sequence[str]]
    ) -> Iterator[np.ndarray]:
        chunks = [[str(p) for p in chunk] for chunk in chunks]
        if not chunks:
            return
        gpus = int(ray.cluster_resources().get("GPU", 0))
        size, resources = _actor_pool(gpus, self.workers, len(chunks))
        payloads = [pickle.dumps(chunk, protocol=_PROTOCOL) for chunk in chunks]
        spec = pickle.dumps(embedder_spec, protocol=_PROTOCOL)
        ds = self._dataset(payloads, "paths", spec=spec).map_batches(
            _EmbedActor,
            batch_size=1,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=size),
            udf_modifying_row_count=False,
            **resources,
        )
        yield from _in_order(ds.iter_rows(), len(chunks))

    def embedder_info(self, embedder_spec: str | Mapping[str, Any]) -> tuple[str, int]:
        """``(id, dim)`` of the embedder as the embedding actors will build it (on a GPU when
        the cluster has GPUs), so the cache is keyed by the embedder that computes."""
        gpus = int(ray.cluster_resources().get("GPU", 0))
        _, resources = _actor_pool(gpus, self.workers, 1)
        once = {"max_calls": 1} if gpus else {}  # a GPU worker exits after, freeing its GPU
        remote = ray.remote(**once, **resources)(_embedder_identity)
        return _load_outcome(ray.get(remote.remote(pickle.dumps(embedder_spec))))

    def close(self) -> None:
        if self._started:
            ray.shutdown()
            self._started = False


__all__ = ["RayExecutor", "RayTaskFailed"]

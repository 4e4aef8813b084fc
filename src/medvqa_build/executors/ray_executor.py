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

Losing the cluster (its head, a node, the connection) while a stage waits on it raises one
:class:`~medvqa_build.errors.ClusterLost` naming the stage and what was lost, within seconds
(:mod:`.ray_health`); the option ``log_file`` keeps Ray's C++ log lines off the terminal
(:mod:`.stderr_file`), and worker output stays in Ray's own session logs.

Joining a cluster is bounded: ``ray.init`` runs on a thread given :data:`CONNECT_TIMEOUT`
seconds, and the first call into Ray (the cluster's resources) as long again under the
watchdog; an address that takes connections but does not answer is one usage line.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import pickle
import queue
import sys
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import ray
import ray.data
from ray.util.debug import log_once

from ..errors import ClusterLost, UsageError
from ..negatives import make_embedder
from . import Executor
from .ray_health import HeadLost, HeadLostInterrupt, Watchdog, host_port, speaks_grpc
from .stderr_file import StderrToFile

T = TypeVar("T")
R = TypeVar("R")

_PROTOCOL = 5
# seconds ray.init may take to join a running cluster, and then its first answer: a head that
# takes connections but does not answer would keep Ray retrying for minutes
CONNECT_TIMEOUT = 10.0


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
    """Why a ``host:port`` (or ``ray://host:port``) cluster address is not a reachable Ray
    head (``None`` when it is, or when the address is ``auto``, ``local`` or not given)."""
    if not address or address in ("auto", "local"):
        return None
    hp = host_port(address)
    if hp is None:
        return f"{address!r} is not host:port"
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        return None  # a TLS head does not answer plain HTTP/2
    return speaks_grpc(*hp, timeout=timeout)


# what each of Ray's errors says was lost, by class name (most specific first)
_LOST = (
    ("NodeDiedError", "a node of the cluster"),
    ("LocalRayletDiedError", "this machine's Ray node (raylet)"),
    ("WorkerCrashedError", "a Ray worker process"),
    ("RayActorError", "an actor (a worker process or its node)"),
    ("OwnerDiedError", "the process that owned the results"),
    ("ObjectLostError", "results stored on a node"),
    ("GetTimeoutError", "the cluster's answers (timed out)"),
    ("RaySystemError", "the connection to the cluster"),
    ("RpcError", "the connection to the cluster"),
    ("ConnectionError", "the connection to the cluster"),
    ("TimeoutError", "the cluster's answers (timed out)"),
    ("RayError", "part of the cluster"),
)


def what_was_lost(exc: BaseException) -> str | None:
    """What ``exc`` (raised by Ray while waiting for results) says was lost, or None when it
    is not a cluster failure (it then propagates as it is)."""
    names = {c.__name__ for c in type(exc).__mro__}
    what = next((w for name, w in _LOST if name in names), None)
    if what is None and exc.__cause__ is not None:
        return what_was_lost(exc.__cause__)
    if what is None:
        return None
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{what}: {type(exc).__name__}" + (f": {first[:200]}" if first else "")


def lost_line(stage: str, what: str) -> ClusterLost:
    return ClusterLost(
        f"the Ray cluster failed during the {stage} stage: lost {what}",
        fix="restart the cluster (check it with `ray status`, on a token-auth cluster with "
        "RAY_AUTH_MODE=token) and rerun the same command, or rerun with --executor local: "
        f"finished stages are reused and {stage} starts again",
    )


def _in_order(rows: Iterable[dict[str, Any]], n: int) -> Iterator[Any]:
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
    only a Ray this executor started. ``log_file`` (option): where Ray's C++ log lines go
    instead of the terminal while the executor is open.
    """

    name = "ray"

    def __init__(self, workers: int | None = None, **options: Any):
        super().__init__(workers, **options)
        self.address = options.get("address")
        self._started = False
        self._stuck = False  # a call into Ray never returned: Ray is left as it is
        self._watchdog: Watchdog | None = None
        log_file = options.get("log_file")
        self._stderr = StderrToFile(log_file).open() if log_file else None
        try:
            self._connect(workers)
            self._watch()
            cpus = self._first_answer().get("CPU", 1)
            if not workers:  # default: every CPU of the cluster
                self.workers = max(1, int(cpus))
        except BaseException:
            self.close()
            raise

    def _where(self) -> str:
        return self.address or os.environ.get("RAY_ADDRESS") or "a new local Ray"

    def _no_answer(self, what: str) -> UsageError:
        self._stuck = True
        return UsageError(
            f"cannot connect to the Ray cluster at {self._where()}: {what}",
            fix="check that a Ray head of this Ray version runs there (`ray status` on the "
            "head, with RAY_AUTH_MODE=token on a token-auth cluster) and that the address "
            "and port are its GCS (default 6379); or omit --ray-address for local mode",
        )

    def _first_answer(self) -> dict[str, float]:
        """The cluster's resources: the first call into Ray, bounded by the watchdog (a head
        that took the connection but does not answer is a usage error, not a hang)."""
        dog = self._watchdog
        if dog is None:
            return ray.cluster_resources()
        try:
            return dog.call(ray.cluster_resources, timeout=CONNECT_TIMEOUT)
        except HeadLost as lost:
            raise self._no_answer(f"it stopped answering after joining: lost {lost}") from None

    def _connect(self, workers: int | None) -> None:
        if ray.is_initialized():
            return
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "logging_level": logging.WARNING,
            "configure_logging": True,
            "log_to_driver": False,  # worker output stays in Ray's session logs
        }
        address = self.address
        if address is None and not os.environ.get("RAY_ADDRESS"):
            # "local": a new Ray of our own, never a `ray start` cluster found on this machine
            address, kwargs["num_cpus"] = "local", workers or None
        where = self._where()
        fix = (
            "start it (`ray start --head` on the head node) and pass its address (e.g. "
            "--ray-address auto on a cluster node); with token authentication set "
            "RAY_AUTH_MODE=token here too; or omit --ray-address for local mode"
        )
        if str(where).startswith("ray://") and importlib.util.find_spec("grpc") is None:
            raise UsageError(
                f"cannot connect to the Ray cluster at {where}: a ray:// address needs Ray "
                "Client (grpcio), which the [ray] extra does not install",
                fix="run medvqa-build on a node of the cluster with --ray-address auto (or "
                "HEAD_IP:6379), see docs/cluster.md",
            )
        problem = _check_reachable(self.address or os.environ.get("RAY_ADDRESS"))
        if problem:
            raise UsageError(f"cannot connect to the Ray cluster at {where}: {problem}", fix=fix)
        auth_log = logging.getLogger("ray._private.authentication.authentication_token_setup")
        level = auth_log.level
        auth_log.setLevel(logging.ERROR)  # the token-auth notice of every local start
        try:
            self._init(address, kwargs)
        except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(
                f"cannot connect to the Ray cluster at {where}: {first}", fix=fix
            ) from None
        finally:
            auth_log.setLevel(level)
        self._started = True

    def _init(self, address: str | None, kwargs: dict[str, Any]) -> None:
        """``ray.init``; joining a cluster gets :data:`CONNECT_TIMEOUT` seconds (on a daemon
        thread: a ``ray.init`` stuck in Ray's C++ retries sees no signal)."""
        if address == "local":  # starting our own Ray takes what it takes
            ray.init(address=address, **kwargs)
            return
        done: queue.Queue = queue.Queue(maxsize=1)

        def join() -> None:
            try:
                ray.init(address=address, **kwargs)
                done.put(None)
            except BaseException as exc:  # handed to the waiting thread
                done.put(exc)

        worker_log = logging.getLogger("ray._private.worker")
        level = worker_log.level
        worker_log.setLevel(logging.ERROR)  # "SIGTERM handler is not set ... not the main thread"
        try:
            threading.Thread(target=join, name="medvqa-ray-init", daemon=True).start()
            try:
                failed = done.get(timeout=CONNECT_TIMEOUT)
            except queue.Empty:
                raise self._no_answer(
                    f"no answer from Ray within {CONNECT_TIMEOUT:g} s (something takes "
                    "connections there but does not answer as a Ray head)"
                ) from None
        finally:
            worker_log.setLevel(level)
        if failed is not None:
            raise failed

    def _watch(self) -> None:
        """Start the watchdog on the head this driver talks to (the GCS, or the Ray Client
        server of a ``ray://`` address) and on this machine's Ray node, when it has one (a
        `ray stop` ends the node first)."""
        try:
            hp, what = host_port(ray.get_runtime_context().gcs_address), "the Ray head"
            node = ray._private.worker.global_worker.node
            raylet = (node.node_ip_address, int(node.node_manager_port))
            also = ((*raylet, "this machine's Ray node (raylet)"),)
        except Exception:  # a Ray Client connection: watch its server
            hp, what, also = None, "the Ray Client server", ()
            if self.address and self.address.startswith("ray://"):
                hp = host_port(self.address)
        if hp is not None:
            self._watchdog = Watchdog(*hp, what=what, also=also)

    def _call(self, stage: str, fn: Callable[[], R]) -> R:
        """``fn()`` (a call into Ray); a lost head or Ray's error for a lost part of the
        cluster becomes one ClusterLost naming ``stage``."""
        dog = self._watchdog
        try:
            return dog.call(fn) if dog is not None else fn()
        except HeadLost as lost:
            raise lost_line(stage, str(lost)) from None
        except Exception as exc:
            what = what_was_lost(exc)
            if what is None:
                raise
            # the head's loss explains a worker's: prefer the watchdog's verdict
            lost = dog.wait_lost(2 * dog.period + 1) if dog is not None else None
            raise lost_line(stage, lost or what) from None

    def _rows(
        self, dataset: Callable[[], ray.data.Dataset], stage: str
    ) -> Iterator[dict[str, Any]]:
        """The rows of the dataset ``dataset()`` builds; Ray's errors while building it or
        fetching them become one ClusterLost."""
        rows = self._call(stage, lambda: iter(dataset().iter_rows()))
        end = object()
        while (row := self._call(stage, lambda: next(rows, end))) is not end:
            yield row

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

        def dataset() -> ray.data.Dataset:
            return self._dataset(payloads, "task").map_batches(
                _run_tasks,
                batch_size=1,
                batch_format="numpy",
                compute=ray.data.TaskPoolStrategy(size=min(self.workers, len(tasks))),
                num_cpus=1,
                udf_modifying_row_count=False,
            )

        yield from _in_order(self._rows(dataset, _stage_of(fn)), len(tasks))

    def embed_chunks(
        self, embedder_spec: str | Mapping[str, Any], chunks: Sequence[Sequence[str]]
    ) -> Iterator[np.ndarray]:
        chunks = [[str(p) for p in chunk] for chunk in chunks]
        if not chunks:
            return
        gpus = int(self._call("embed", ray.cluster_resources).get("GPU", 0))
        size, resources = _actor_pool(gpus, self.workers, len(chunks))
        payloads = [pickle.dumps(chunk, protocol=_PROTOCOL) for chunk in chunks]
        spec = pickle.dumps(embedder_spec, protocol=_PROTOCOL)

        def dataset() -> ray.data.Dataset:
            return self._dataset(payloads, "paths", spec=spec).map_batches(
                _EmbedActor,
                batch_size=1,
                batch_format="numpy",
                compute=ray.data.ActorPoolStrategy(size=size),
                udf_modifying_row_count=False,
                **resources,
            )

        yield from _in_order(self._rows(dataset, "embed"), len(chunks))

    def embedder_info(self, embedder_spec: str | Mapping[str, Any]) -> tuple[str, int]:
        """``(id, dim)`` of the embedder as the embedding actors will build it (on a GPU when
        the cluster has GPUs), so the cache is keyed by the embedder that computes."""
        gpus = int(self._call("embed", ray.cluster_resources).get("GPU", 0))
        _, resources = _actor_pool(gpus, self.workers, 1)
        once = {"max_calls": 1} if gpus else {}  # a GPU worker exits after, freeing its GPU
        remote = ray.remote(**once, **resources)(_embedder_identity)
        spec = pickle.dumps(embedder_spec)
        return _load_outcome(self._call("embed", lambda: ray.get(remote.remote(spec))))

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()
        if isinstance(exc, HeadLostInterrupt):
            raise lost_line(_stage_in(tb), str(exc)) from None

    def close(self) -> None:
        dog, self._watchdog = self._watchdog, None
        if dog is not None:
            dog.stop()
        if self._stuck:  # Ray's retries go on until the process ends: their lines stay in
            # the log file, and Ray's exit hook, which would wait on them, is skipped
            self._stuck = self._started = False
            self._stderr = None
            _forget_lost_ray()
        if self._started:
            self._started = False
            if dog is not None and dog.lost:
                _forget_lost_ray()
            else:
                ray.shutdown()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def _stage_of(fn: Callable) -> str:
    """The stage a task function belongs to, by its module (``...stages.render`` -> render)."""
    module = getattr(fn, "__module__", "") or ""
    return module.rsplit(".", 1)[-1] if ".stages." in module else "build"


def _stage_in(tb) -> str:
    """The stage whose code the traceback ``tb`` went through last (``stages/embed.py`` ->
    embed), or "build"."""
    stage = "build"
    while tb is not None:
        path = Path(tb.tb_frame.f_code.co_filename)
        if path.parent.name == "stages" and path.stem not in ("base", "__init__"):
            stage = path.stem
        tb = tb.tb_next
    return stage


def _forget_lost_ray() -> None:
    """After the head is gone, a normal ``ray.shutdown()`` (also the one at interpreter exit)
    waits on it for a minute, and Ray's core crashes when Python tears it down: skip Ray's
    exit hook, and at exit (this hook runs first) flush stdout and stderr and end the process
    with :class:`ClusterLost`'s exit code."""
    import atexit

    atexit.unregister(ray.shutdown)
    atexit.register(_exit_now, ClusterLost.exit_code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _exit_now(code: int) -> None:
    _flush()
    os._exit(code)


__all__ = ["RayExecutor", "RayTaskFailed", "lost_line", "what_was_lost"]

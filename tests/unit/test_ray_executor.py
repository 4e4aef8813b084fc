"""The Ray executor in local mode: task order, errors, embedding actors, and a whole demo build
with byte-identical exports to the local executor. One Ray session is shared by the module.

CI installs the ``[ray]`` extra; without it only the Ray-free tests here run.
"""

from __future__ import annotations

import operator
import pickle

import numpy as np
import pytest
from PIL import Image

from medvqa_build.cli import main
from medvqa_build.errors import SourceError, UsageError
from medvqa_build.executors import LocalExecutor, make_executor
from medvqa_build.negatives import embed_with_cache, make_embedder

# Ray Data copies its context field by field, tripping its own deprecation notices
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")


@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def ray_executor(ray_session):
    with make_executor("ray", 2) as ex:
        yield ex


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise SourceError("task three is broken", where="shard 3", fix="do not send it")
    return x * 10


def _unpicklable(x: int):
    return lambda: x


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """Ten small PNGs of different colours and shapes."""
    root = tmp_path_factory.mktemp("embed-images")
    rng = np.random.default_rng(0)
    paths = []
    for i in range(10):
        arr = np.full((48, 48, 3), 30 * (i % 8), np.uint8)
        arr[8 + i : 30 + i, 10:40] = rng.integers(0, 255, 3, dtype=np.uint8)
        path = root / f"img{i}.png"
        Image.fromarray(arr).save(path)
        paths.append(str(path))
    return paths


def test_map_gives_every_result_in_task_order(ray_executor):
    tasks = [5, -1, 0, 12, -7, 3, 8, -2, 9, -11, 4]
    assert list(ray_executor.map(abs, tasks)) == [abs(t) for t in tasks]
    assert list(ray_executor.map(abs, [])) == []
    assert list(ray_executor.map(operator.neg, [2])) == [-2]


def test_an_error_in_a_task_surfaces_with_its_type_and_message(ray_executor):
    with pytest.raises(SourceError, match=r"task three is broken \[shard 3\] — fix: do not"):
        list(ray_executor.map(_fail_on_three, [1, 2, 3, 4]))
    with pytest.raises(RuntimeError, match="cannot be pickled"):
        list(ray_executor.map(_unpicklable, [1]))
    # the executor is still usable afterwards
    assert list(ray_executor.map(_fail_on_three, [1, 2])) == [10, 20]


def test_embed_chunks_match_the_local_executor(ray_executor, images):
    chunks = [images[:4], images[4:7], images[7:]]
    local = list(LocalExecutor().embed_chunks("offline", chunks))
    remote = list(ray_executor.embed_chunks("offline", chunks))
    dim = make_embedder("offline").dim
    assert [v.shape for v in remote] == [(4, dim), (3, dim), (3, dim)]
    for a, b in zip(local, remote, strict=True):
        assert b.dtype == np.float32
        np.testing.assert_array_equal(a, b)


def test_embed_chunks_report_a_bad_embedder_spec(ray_executor, images):
    with pytest.raises(UsageError, match="no-such-embedder"):
        list(ray_executor.embed_chunks("no-such-embedder", [images[:2]]))
    with pytest.raises(UsageError, match="no-such-embedder"):
        ray_executor.embedder_info("no-such-embedder")


def test_embedder_info_names_the_embedder_the_workers_build(ray_executor):
    local = make_embedder({"name": "offline", "image_size": 64})
    info = ray_executor.embedder_info({"name": "offline", "image_size": 64})
    assert info == (local.id, local.dim) and "size64" in info[0]


def test_embed_with_cache_through_ray_writes_the_same_cache(ray_executor, images, tmp_path):
    embedder = make_embedder("offline")
    local = embed_with_cache(embedder, images, tmp_path / "a", shard_rows=4, progress=False)
    remote = embed_with_cache(
        embedder,
        images,
        tmp_path / "b",
        shard_rows=4,
        progress=False,
        executor=ray_executor,
        embedder_spec="offline",
    )
    np.testing.assert_array_equal(local, remote)
    shards = sorted(p.name for p in (tmp_path / "b").rglob("shard-*.json"))
    assert shards == sorted(p.name for p in (tmp_path / "a").rglob("shard-*.json"))
    assert len(shards) == 3  # 10 images in chunks of 4


class _CountingExecutor(LocalExecutor):
    """A stand-in remote executor: records the chunks it was given."""

    name = "counting"

    def __init__(self):
        super().__init__()
        self.chunks = []

    def embed_chunks(self, embedder_spec, chunks):
        self.chunks.extend(len(c) for c in chunks)
        return super().embed_chunks(embedder_spec, chunks)


def test_embed_with_cache_sends_only_missing_images_to_the_executor(images, tmp_path):
    embedder, ex = make_embedder("offline"), _CountingExecutor()
    embed_with_cache(embedder, images[:3], tmp_path, progress=False)
    out = embed_with_cache(
        embedder,
        images,
        tmp_path,
        shard_rows=4,
        progress=False,
        executor=ex,
        embedder_spec="offline",
    )
    assert ex.chunks == [4, 3] and out.shape == (10, embedder.dim)
    with pytest.raises(ValueError, match="embedder_spec"):
        embed_with_cache(embedder, images, tmp_path / "new", executor=ex)


def test_an_unreachable_address_is_a_usage_error(ray_session, monkeypatch):
    from medvqa_build.executors.ray_executor import RayExecutor

    def refuse(*args, **kwargs):
        raise ConnectionError("Could not find any running Ray instance.")

    monkeypatch.setattr(ray_session, "is_initialized", lambda: False)
    monkeypatch.setattr(ray_session, "init", refuse)
    with pytest.raises(UsageError, match="cannot connect to the Ray cluster at auto") as err:
        RayExecutor(2, address="auto")
    assert "ray start --head" in err.value.fix


def test_a_closed_port_fails_at_once(monkeypatch):
    ray_executor = pytest.importorskip("medvqa_build.executors.ray_executor")
    import socket

    monkeypatch.setattr(ray_executor.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray_executor.ray, "init", lambda *a, **k: pytest.fail("no ray.init"))

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(UsageError, match=f"127.0.0.1:{port}: ConnectionRefusedError"):
        ray_executor.RayExecutor(2, address=f"127.0.0.1:{port}")
    assert ray_executor._check_reachable("auto") is None
    assert "not host:port" in ray_executor._check_reachable("head-node")


def test_embedding_actors_take_a_gpu_each_when_there_are_gpus():
    ray_executor = pytest.importorskip("medvqa_build.executors.ray_executor")
    assert ray_executor._actor_pool(gpus=4, workers=16, n_chunks=3) == (3, {"num_gpus": 1})
    assert ray_executor._actor_pool(gpus=2, workers=1, n_chunks=9) == (2, {"num_gpus": 1})
    assert ray_executor._actor_pool(gpus=0, workers=2, n_chunks=9) == (2, {"num_cpus": 1})
    assert ray_executor._actor_pool(gpus=0, workers=8, n_chunks=1) == (1, {"num_cpus": 1})


def test_payloads_are_plain_pickles():
    ray_executor = pytest.importorskip("medvqa_build.executors.ray_executor")
    out = ray_executor._run_tasks(
        {"i": np.array([0, 1]), "task": [pickle.dumps((abs, -4)), pickle.dumps((abs, "x"))]}
    )
    assert out["i"] == [0, 1] and ray_executor._load_outcome(out["out"][0]) == 4
    with pytest.raises(TypeError, match="bad operand"):
        ray_executor._load_outcome(out["out"][1])


SMALL = [
    "--set",
    "sources.0.generate.n_images=30",
    "--set",
    "sources.0.generate.frames_per_video=6",
    *[x for i, q in enumerate([12, 10, 8, 6, 6, 6]) for x in ("--set", f"tasks.{i}.quota={q}")],
]


@pytest.mark.slow
def test_demo_build_on_ray_is_byte_identical_to_local(ray_session, tmp_path, request):
    recipe = str(request.config.rootpath / "recipes" / "demo.yaml")
    sums = {}
    for name, extra in {
        "local": [],
        "ray": ["--executor", "ray", "--workers", "2"],
    }.items():
        out = tmp_path / name
        with pytest.MonkeyPatch.context() as mp:  # each build embeds, none reuses a cache
            mp.setenv("MEDVQA_CACHE", str(tmp_path / f"cache-{name}"))
            assert main(["run", recipe, "-o", str(out), "-q", *SMALL, *extra]) == 0
        sums[name] = (out / "checksums.sha256").read_text()
        assert (tmp_path / f"cache-{name}" / "embeddings").is_dir()
    assert sums["ray"] == sums["local"]
    assert "vlmeval/MedVQA_Demo.tsv" in sums["ray"]
    assert ray_session.is_initialized()  # the CLI's executor left the shared session alone

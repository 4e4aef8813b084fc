"""A failing Ray cluster ends a build with one line (issue 35.4), without starting Ray: the
head probe and the watchdog are plain sockets and threads, and the executor's Ray Data calls
are replaced by a fake that runs the tasks here, or raises Ray's own exception types.

What a real cluster did when its head was killed or stopped mid-build is in docs/cluster.md.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from medvqa_build.cli import main
from medvqa_build.errors import ClusterLost
from medvqa_build.executors.ray_health import HeadLost, Watchdog, host_port, speaks_grpc

ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")
rx = pytest.importorskip("medvqa_build.executors.ray_executor")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")


def _serve_once(reply: bytes) -> tuple[int, threading.Thread]:
    """A TCP server on a free port that answers its connections with ``reply``."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def run():
        with server:
            server.settimeout(10)
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                with conn:
                    conn.recv(64)
                    conn.sendall(reply)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return server.getsockname()[1], thread


def test_a_grpc_server_passes_the_probe_and_a_web_server_does_not():
    settings = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty HTTP/2 SETTINGS frame
    port, _ = _serve_once(settings)
    assert speaks_grpc("127.0.0.1", port) is None
    port, _ = _serve_once(b"HTTP/1.0 400 Bad request\r\n\r\n")
    assert speaks_grpc("127.0.0.1", port) == (
        f"127.0.0.1:{port} answered 'HTTP/1.0 400 Bad request', not the gRPC of a Ray head"
    )
    assert host_port("ray://head:10001") == ("head", 10001)
    assert host_port("[::1]:6379") == ("::1", 6379) and host_port("auto") is None


def test_an_address_that_is_not_ray_fails_in_one_line_and_leaves_no_folder(tmp_path, capsys):
    port, _ = _serve_once(b"SSH-2.0-OpenSSH_9.6\r\n")
    out = tmp_path / "build"
    args = ["run", "recipes/demo.yaml", "-o", str(out), "--executor", "ray"]
    assert main([*args, "--ray-address", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: cannot connect to the Ray cluster at 127.0.0.1:{port}: 127.0.0.1:{port} "
        "answered 'SSH-2.0-OpenSSH_9.6', not the gRPC of a Ray head — fix: start it (`ray "
        "start --head` on the head node) and pass its address (e.g. --ray-address auto on a "
        "cluster node); with token authentication set RAY_AUTH_MODE=token here too; or omit "
        "--ray-address for local mode"
    ]
    assert not out.exists()  # nor its logs/ray.log


def test_the_watchdog_notices_a_lost_head_and_frees_a_blocked_call():
    up = threading.Event()
    up.set()
    dog = Watchdog("head", 6379, what="the Ray head", check=up.is_set, period=0.05)
    assert dog.call(lambda: 7) == 7
    with pytest.raises(KeyError):  # an error in the call comes back as it is
        dog.call(lambda: {}["x"])
    up.clear()
    with pytest.raises(HeadLost, match=r"the Ray head at head:6379 \(no connection for 0.15 s"):
        dog.call(lambda: time.sleep(30))  # a Ray call stuck on the dead head
    with pytest.raises(HeadLost):  # and every call after it
        dog.call(lambda: 1)
    dog.stop()


@pytest.mark.parametrize(
    ("exc", "lost"),
    [
        (lambda: ray.exceptions.NodeDiedError("node 1 died"), "a node of the cluster"),
        (lambda: ray.exceptions.ActorDiedError(), "an actor (a worker process or its node)"),
        (lambda: ray.exceptions.WorkerCrashedError(), "a Ray worker process"),
        (lambda: ray.exceptions.RaySystemError("GCS gone"), "the connection to the cluster"),
        (lambda: ray.exceptions.GetTimeoutError("slow"), "the cluster's answers (timed out)"),
        (lambda: ConnectionError("reset"), "the connection to the cluster"),
    ],
)
def test_rays_errors_say_what_was_lost(exc, lost):
    error = exc()
    assert rx.what_was_lost(error).startswith(f"{lost}: {type(error).__name__}")
    wrapped = RuntimeError("streaming executor failed")
    wrapped.__cause__ = error
    assert rx.what_was_lost(wrapped).startswith(lost)
    assert rx.what_was_lost(ValueError("a bug")) is None  # not a cluster failure


class _FakeDataset:
    """Ray Data's ``from_items(...).map_batches(fn).iter_rows()``, run here; ``fail`` raises
    from the ``fail_at``-th row of every dataset."""

    fail: BaseException | None = None
    fail_at = 0

    def __init__(self, items):
        self.items, self.fn = items, None

    def map_batches(self, fn, **kwargs):
        self.fn = fn() if isinstance(fn, type) else fn
        return self

    def iter_rows(self):
        for n, item in enumerate(self.items):
            if self.fail is not None and n >= self.fail_at:
                raise self.fail
            batch = {k: [v] for k, v in item.items()}
            out = self.fn(batch)
            yield {"i": out["i"][0], "out": out["out"][0]}


@pytest.fixture
def fake_ray(monkeypatch):
    """The Ray executor over :class:`_FakeDataset`, its watchdog on a switch (``up``)."""
    up = threading.Event()
    up.set()
    forgotten = []

    def connect(self, workers):
        self._started = True

    def watch(self):
        self._watchdog = Watchdog("head", 6379, what="the Ray head", check=up.is_set, period=0.05)

    monkeypatch.setattr(rx.RayExecutor, "_connect", connect)
    monkeypatch.setattr(rx.RayExecutor, "_watch", watch)
    monkeypatch.setattr(
        rx.RayExecutor,
        "_dataset",
        lambda self, p, col, **same: _FakeDataset(
            [{"i": i, col: x, **same} for i, x in enumerate(p)]
        ),
    )
    monkeypatch.setattr(rx.ray, "cluster_resources", lambda: {"CPU": 2})
    monkeypatch.setattr(rx.RayExecutor, "embedder_info", lambda self, spec: None)  # no ray.get
    monkeypatch.setattr(rx.ray, "shutdown", lambda: None)
    monkeypatch.setattr(rx, "_forget_lost_ray", lambda: forgotten.append(True))
    monkeypatch.setattr(_FakeDataset, "fail", None)
    return up, forgotten


SMALL = [
    "--set",
    "sources.0.generate.n_images=30",
    "--set",
    "sources.0.generate.frames_per_video=6",
    *[x for i, q in enumerate([12, 10, 8, 6, 6, 6]) for x in ("--set", f"tasks.{i}.quota={q}")],
]


def _run(out, capsys) -> tuple[int, list[str]]:
    code = main(["run", "recipes/demo.yaml", "-o", str(out), "-q", "--executor", "ray", *SMALL])
    return code, capsys.readouterr().err.strip().splitlines()


def test_a_node_lost_mid_stage_is_one_line_and_the_rerun_resumes(
    fake_ray, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("MEDVQA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_FakeDataset, "fail", ray.exceptions.NodeDiedError("node 3 died"))
    monkeypatch.setattr(_FakeDataset, "fail_at", 1)
    out = tmp_path / "build"
    code, err = _run(out, capsys)
    assert code == 2 and len(err) == 1
    assert err[0].startswith(
        "error: the Ray cluster failed during the convert stage: lost a node of the cluster: "
        "NodeDiedError"
    )
    assert "finished stages are reused and convert starts again" in err[0]
    assert err[0].endswith(
        "(kept " + str(out) + ": its 1 finished stage(s) are reused by the next run)"
    )
    assert sorted(p.name for p in (out / "stages").iterdir()) == ["convert", "materialize"]
    assert list((out / "stages" / "convert").iterdir()) == []  # no half-built stage left
    assert fake_ray[1] == []  # a lost node is not a lost head: Ray shuts down as usual

    monkeypatch.setattr(_FakeDataset, "fail", None)
    code, err = _run(out, capsys)
    assert code == 0 and err == []
    assert (out / "checksums.sha256").is_file()
    assert not ray.is_initialized()  # all of it ran on the fake


def test_a_head_lost_outside_any_ray_call_stops_the_build_in_one_line(
    fake_ray, tmp_path, capsys, monkeypatch
):
    up, forgotten = fake_ray
    monkeypatch.setenv("MEDVQA_CACHE", str(tmp_path / "cache"))
    # the head goes while the driver materializes the source (no Ray call in flight)
    from medvqa_build.stages import materialize

    real = materialize.get_source

    slept = []

    def write_then_lose(*args, **kwargs):
        up.clear()
        time.sleep(30)  # the watchdog interrupts this
        slept.append(True)
        return real("synthetic-endo").generator(*args, **kwargs)

    monkeypatch.setattr(
        materialize, "get_source", lambda key: SimpleNamespace(generator=write_then_lose)
    )
    out = tmp_path / "build"
    code, err = _run(out, capsys)
    assert slept == []  # interrupted, not waited out
    assert code == 2 and len(err) == 1
    assert err[0].startswith(
        "error: the Ray cluster failed during the materialize stage: lost the Ray head at "
        "head:6379 (no connection for 0.15 s) — fix: restart the cluster"
    )
    assert not out.exists()  # failed before any stage finished: no new folder
    assert forgotten == [True]  # Ray's exit hook, which would wait on the dead head, is gone


def test_a_lost_head_is_not_taken_for_a_bad_image(fake_ray, tmp_path):
    """The interrupt is a BaseException: an ``except Exception`` on its way (a per-file
    quarantine) does not swallow it; the executor's exit turns it into ClusterLost."""
    up, _ = fake_ray
    lost = pytest.raises(ClusterLost, match="during the build stage: lost the Ray head")
    with lost, rx.RayExecutor(2):
        up.clear()
        for _ in range(100):
            try:
                time.sleep(0.05)
            except Exception:  # noqa: BLE001 (what a quarantine does)
                pytest.fail("the interrupt was taken for a per-file error")


def test_a_ray_client_address_without_ray_client_is_one_line(tmp_path, capsys, monkeypatch):
    if importlib.util.find_spec("grpc") is not None:
        pytest.skip("Ray Client (grpcio) is installed here")
    monkeypatch.setattr(rx.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(rx.ray, "init", lambda *a, **k: pytest.fail("no ray.init"))
    out = tmp_path / "build"
    args = ["run", "recipes/demo.yaml", "-o", str(out), "--executor", "ray"]
    assert main([*args, "--ray-address", "ray://127.0.0.1:10001"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "error: cannot connect to the Ray cluster at ray://127.0.0.1:10001: a ray:// address "
        "needs Ray Client (grpcio), which the [ray] extra does not install — fix: run "
        "medvqa-build on a node of the cluster with --ray-address auto"
    )
    assert not out.exists()


def test_the_watchdog_also_watches_this_machines_node():
    up = threading.Event()
    up.set()
    with socket.socket() as sock:  # a port nobody listens on: the raylet is gone
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dog = Watchdog(
        "head",
        6379,
        what="the Ray head",
        check=up.is_set,
        period=0.05,
        also=(("127.0.0.1", port, "this machine's Ray node (raylet)"),),
    )
    with pytest.raises(HeadLost, match=f"this machine's Ray node \\(raylet\\) at 127.0.0.1:{port}"):
        dog.call(lambda: time.sleep(30))
    dog.stop()


def _accept_and_stay_silent(settings: bool) -> int:
    """A TCP server on a free port that takes every connection and never answers (after the
    empty HTTP/2 SETTINGS frame a gRPC server sends first, with ``settings``): a stopped or
    hung head."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held = []

    def run():
        while True:
            conn, _ = server.accept()
            held.append(conn)
            if settings:
                conn.recv(64)
                conn.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")

    threading.Thread(target=run, daemon=True).start()
    return server.getsockname()[1]


def test_an_address_that_never_answers_fails_the_probe_in_one_line(tmp_path, capsys):
    port = _accept_and_stay_silent(settings=False)
    out = tmp_path / "build"
    args = ["run", "recipes/demo.yaml", "-o", str(out), "--executor", "ray"]
    assert main([*args, "--ray-address", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"error: cannot connect to the Ray cluster at 127.0.0.1:{port}: nothing answered on "
        f"127.0.0.1:{port} within 5 s — fix: start it"
    )
    assert not out.exists()


def test_a_head_that_takes_connections_but_never_answers_is_one_line_within_the_timeout(
    tmp_path,
):
    """The probe passes (the server sends gRPC's first frame) and the real ``ray.init``
    retries for minutes: the bounded join gives up after CONNECT_TIMEOUT. In a child process,
    since the abandoned ``ray.init`` stays in the process until it exits."""
    port = _accept_and_stay_silent(settings=True)
    out = tmp_path / "build"
    cmd = [sys.executable, "-m", "medvqa_build", "run", "recipes/demo.yaml", "-o", str(out)]
    cmd += ["--executor", "ray", "--ray-address", f"127.0.0.1:{port}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)
    seconds = time.monotonic() - start
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [  # Ray's retry lines went to the log file
        f"error: cannot connect to the Ray cluster at 127.0.0.1:{port}: no answer from Ray "
        f"within {rx.CONNECT_TIMEOUT:g} s (something takes connections there but does not "
        "answer as a Ray head) — fix: check that a Ray head of this Ray version runs there "
        "(`ray status` on the head, with RAY_AUTH_MODE=token on a token-auth cluster) and that "
        "the address and port are its GCS (default 6379); or omit --ray-address for local mode"
    ]
    assert not out.exists()  # nor its logs/ray.log
    assert seconds < 300  # without the bound: Ray retries until killed (measured: > 120 s)


def test_a_first_call_that_never_returns_is_one_line(fake_ray, tmp_path, capsys, monkeypatch):
    """Joined, but the head does not answer the first call (the cluster's resources): the
    watchdog's bounded call gives up, and Ray, stuck in that call, is left to the exit hook."""
    monkeypatch.setattr(rx, "CONNECT_TIMEOUT", 0.3)
    monkeypatch.setattr(rx.ray, "cluster_resources", lambda: time.sleep(30))
    out = tmp_path / "build"
    code, err = _run(out, capsys)
    assert code == 2 and len(err) == 1
    assert err[0].startswith(
        "error: cannot connect to the Ray cluster at a new local Ray: it stopped answering "
        "after joining: lost the Ray head at head:6379 (no answer within 0.3 s) — fix: check"
    )
    assert fake_ray[1] == [True]  # Ray's exit hook, which would wait on the call, is gone
    assert not out.exists()


def test_a_watchdog_call_can_be_bounded():
    dog = Watchdog("head", 6379, what="the Ray head", check=lambda: True, period=0.05)
    assert dog.call(lambda: 3, timeout=1) == 3
    with pytest.raises(HeadLost, match=r"the Ray head at head:6379 \(no answer within 0.2 s\)"):
        dog.call(lambda: time.sleep(30), timeout=0.2)
    assert dog.lost == "the Ray head at head:6379 (no answer within 0.2 s)"
    dog.stop()

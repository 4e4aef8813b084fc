"""Is the Ray cluster still there? A probe before joining and a watchdog while stages run.

Ray itself reacts slowly to a cluster that goes away: a driver whose head is killed retries for
60 s and then exits 1 from C++ with no line of ours; an address that accepts TCP but is not a
Ray head makes ``ray.init`` retry for minutes. Both checks here are plain sockets (no Ray), so
they also work when Ray's own client is stuck:

* :func:`speaks_grpc`: a Ray head (GCS, or the Ray Client server) is a gRPC server, so it
  answers the HTTP/2 preface with a SETTINGS frame; a web server, SSH or a database does not.
* :class:`Watchdog`: a thread that connects to the head every second; after :data:`MISSES`
  failed connections in a row it records what was lost and interrupts the main thread
  wherever it is (:class:`HeadLostInterrupt`): Ray's C++ core ends the process a minute after
  its head is gone, even while the build runs a driver-only stage. Calls into Ray run on the
  watchdog's caller thread (:meth:`Watchdog.call`) while the main thread waits for them with
  a short timeout, because a Ray call blocked on a dead head neither returns nor sees a
  signal until Ray gives up; a call given a ``timeout`` (the executor's first one) also
  counts the head as lost when it takes connections but does not answer. The executor turns
  the loss into one :class:`~medvqa_build.errors.ClusterLost` line.
"""

from __future__ import annotations

import _thread
import contextlib
import queue
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

# HTTP/2 client preface and an empty SETTINGS frame (RFC 9113, 3.4 and 6.5)
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_SETTINGS = 0x04
MISSES = 3  # failed connections in a row before the head counts as lost
PERIOD = 1.0  # seconds between checks, and the timeout of each: lost within about 6 s


def host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``host:port`` or ``ray://host:port``, else None."""
    address = address.split("://", 1)[-1]
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def speaks_grpc(host: str, port: int, timeout: float = 3.0) -> str | None:
    """Why ``host:port`` is not a gRPC server (``None`` when it answers HTTP/2 like one)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(_PREFACE)
            head = b""
            while len(head) < 9:
                part = sock.recv(9 - len(head))
                if not part:
                    break
                head += part
            if len(head) == 9 and head[3] == _SETTINGS:
                return None
            sock.settimeout(0.5)  # the rest of a line, to show what answered
            with contextlib.suppress(OSError):
                head += sock.recv(64)
    except TimeoutError:
        return f"nothing answered on {host}:{port} within {timeout:g} s"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    shown = head[:40].decode("ascii", "replace").split("\r")[0].strip() or "nothing"
    return f"{host}:{port} answered {shown!r}, not the gRPC of a Ray head"


def reachable(host: str, port: int, timeout: float = PERIOD) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class HeadLost(Exception):
    """Raised by :meth:`Watchdog.call` when the head is lost while the call waits."""


class HeadLostInterrupt(BaseException):
    """Raised in the main thread, wherever it is, when the head is lost (a BaseException, so
    no ``except Exception`` on the way, such as a per-file quarantine, takes it for its own);
    the executor's ``__exit__`` turns it into one line."""


_SIGNAL = signal.SIGUSR2  # only simulated (``_thread.interrupt_main``): no process gets it


class Watchdog:
    """Checks ``host:port`` (and each ``(host, port, what)`` of ``also``) every
    :data:`PERIOD` seconds from a daemon thread; :attr:`lost` says what was lost. ``check``
    replaces the TCP check of ``host:port`` (tests)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        what: str,
        also: tuple[tuple[str, int, str], ...] = (),
        check=None,
        period: float = PERIOD,
    ):
        self.period = period
        first = check or (lambda: reachable(host, port, period))
        self.targets = [(host, port, what, first)] + [
            (h, p, w, lambda h=h, p=p: reachable(h, p, period)) for h, p, w in also
        ]
        self.lost: str | None = None
        self._stop = threading.Event()
        self._calls: queue.Queue = queue.Queue()
        self._caller: threading.Thread | None = None
        self._waiting = False
        self._old_handler = self._install()
        self._thread = threading.Thread(target=self._run, name="medvqa-ray-watchdog", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        misses = [0] * len(self.targets)
        while not self._stop.wait(self.period):
            for n, (host, port, what, check) in enumerate(self.targets):
                misses[n] = 0 if check() else misses[n] + 1
                if misses[n] >= MISSES:
                    self.lost = (
                        f"{what} at {host}:{port} (no connection for {misses[n] * self.period:g} s)"
                    )
                    if self._old_handler is not None and not self._waiting:
                        _thread.interrupt_main(_SIGNAL)
                    return

    def _install(self):
        """Our handler for :data:`_SIGNAL` (only possible on the main thread; elsewhere the
        loss is noticed at the next call into Ray)."""
        if threading.current_thread() is not threading.main_thread():
            return None

        def interrupt(signum, frame):
            if self.lost:
                raise HeadLostInterrupt(self.lost)

        return signal.signal(_SIGNAL, interrupt) or signal.SIG_DFL

    def call(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        """``fn()`` run on the caller thread; raises :class:`HeadLost` as soon as the head is
        lost while it runs, or when it has not returned after ``timeout`` seconds (a head
        that takes connections but does not answer; :attr:`lost` says so). ``fn`` is then
        left blocked on a daemon thread."""
        if self.lost:
            raise HeadLost(self.lost)
        if self._caller is None:
            self._caller = threading.Thread(target=self._serve, name="medvqa-ray-call", daemon=True)
            self._caller.start()
        done: queue.Queue = queue.Queue(maxsize=1)
        self._calls.put((fn, done))
        self._waiting = True
        end = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                try:
                    ok, value = done.get(timeout=0.2)
                except queue.Empty:
                    if self.lost:
                        raise HeadLost(self.lost) from None
                    if end is not None and time.monotonic() >= end:
                        host, port, what, _ = self.targets[0]
                        self.lost = f"{what} at {host}:{port} (no answer within {timeout:g} s)"
                        raise HeadLost(self.lost) from None
                    continue
                if ok:
                    return value
                raise value
        finally:
            self._waiting = False

    def _serve(self) -> None:
        while True:
            fn, done = self._calls.get()
            try:
                done.put((True, fn()))
            except BaseException as exc:  # handed to the waiting thread
                done.put((False, exc))

    def stop(self) -> None:
        self._stop.set()
        if self._old_handler is not None and threading.current_thread() is threading.main_thread():
            signal.signal(_SIGNAL, self._old_handler)
            self._old_handler = None

    def wait_lost(self, seconds: float) -> str | None:
        """What was lost, waiting up to ``seconds`` for the watchdog to decide (an error from
        Ray may come a moment before the watchdog's verdict)."""
        end = time.monotonic() + seconds
        while self.lost is None and self._thread.is_alive() and time.monotonic() < end:
            time.sleep(0.1)
        return self.lost

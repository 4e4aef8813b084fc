"""Keeping a long build's resident memory close to what it holds, on glibc.

glibc's allocator keeps memory that was freed: in the main heap above the highest block
still alive, and in one extra arena per thread that allocates (Arrow, FAISS and OpenMP
start several). A build that streams batch after batch through stage after stage then keeps
the high-water mark of every earlier stage as resident memory (measured on a 40k-sample
build: 50-100 MiB returned by ``malloc_trim`` after each stage, 30-50 MiB fewer with two
arenas). Both calls below are no-ops on other C libraries (macOS, musl, Windows).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import pyarrow as pa

from .limits import read_limits

M_ARENA_MAX = -8  # mallopt parameter (glibc malloc.h)
ARENAS = 2  # arenas after tuning: threads share them instead of growing one each


@lru_cache(maxsize=1)
def _glibc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        # each lookup raises AttributeError where the function is missing (musl has no
        # gnu_get_libc_version)
        for fn in ("gnu_get_libc_version", "malloc_trim", "mallopt"):
            getattr(libc, fn)
    except (OSError, AttributeError):
        return None
    return libc


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas (threads created later share them); left alone when the
    user set ``MALLOC_ARENA_MAX``. True when the cap was set."""
    libc = _glibc()
    if libc is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    return bool(libc.mallopt(M_ARENA_MAX, int(arenas)))


def release_freed_memory(collect: bool = True) -> None:
    """Collect garbage (unless ``collect`` is false) and hand the allocator's free pages back
    to the system: between stages, so what a finished stage freed no longer counts towards
    the next one's peak, and (without the collection) between a stage's windows of items."""
    if collect:
        gc.collect()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def use_returning_memory_pool() -> None:
    """Let Arrow give freed memory back to the system.

    Arrow's default pool (mimalloc) keeps freed pages, so the resident memory of a stage
    that streams batch after batch creeps up with the data (measured: convert of 20k samples
    148 MiB above the interpreter with mimalloc, 87 MiB with the system allocator). Left
    alone when the user chose a pool with ``ARROW_DEFAULT_MEMORY_POOL``.
    """
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        pa.set_memory_pool(pa.system_memory_pool())


# -- the convert workers' memory budget ----------------------------------------------------------


def data_bytes() -> int | None:
    """The data segment of this process as the kernel counts it against ``RLIMIT_DATA``
    (``VmData``: heap and private writable mappings), or None where it cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@contextmanager
def worker_budget(nbytes: int) -> Iterator[bool]:
    """Within the block, this process may allocate at most ``nbytes`` more than it holds at
    its start (``RLIMIT_DATA``'s soft limit, restored after): a decode past the budget gets a
    ``MemoryError`` (quarantined by the layouts, see :func:`budget_reason`) instead of
    taking the machine's memory. The data limit, not the address space, is used because the
    native libraries reserve address space they never touch (OpenBLAS, glibc arenas) and a
    forked worker inherits its parent's mappings: the budget is counted from what the
    process holds when the block begins. A tighter limit the user set is kept. Yields
    whether the limit is in force (Linux only; elsewhere the accounting checks before each
    decode, :func:`~medvqa_build.store.limits.decode_problem`, are the budget)."""
    held = data_bytes()
    try:
        import resource
    except ImportError:  # Windows
        resource = None  # type: ignore[assignment]
    if held is None or resource is None or not hasattr(resource, "RLIMIT_DATA"):
        yield False
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = held + int(nbytes)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft != resource.RLIM_INFINITY and soft <= limit:
        yield False  # the user's own limit is tighter
        return
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (ValueError, OSError):
        yield False
        return
    try:
        yield True
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def budget_reason(what: str = "reading it") -> str:
    """The quarantine reason of a file whose read ran out of memory under the worker budget."""
    budget = read_limits().max_worker_bytes
    return (
        f"ran out of memory {what}, over the worker memory budget max_worker_bytes of "
        f"{budget:,} bytes; raise it (MEDVQA_LIMITS=max_worker_bytes=...) if the file is "
        "genuine and the machine has the memory (with fewer --workers if need be)"
    )

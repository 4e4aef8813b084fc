"""medvqa_build.store.memory: freed pages go back to the system between stages (glibc)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from medvqa_build.store import memory

glibc = pytest.mark.skipif(memory._glibc() is None, reason="needs glibc")


def _rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("RssAnon"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon")


@glibc
def test_release_returns_freed_heap_pages():
    # many 64 KiB blocks (below glibc's mmap threshold: they live on the heap), the last one
    # kept: without a trim the freed ones stay resident
    blocks = [np.ones(64 * 1024, np.uint8) for _ in range(1600)]
    keep = blocks[-1]
    before = _rss_mib()
    del blocks
    memory.release_freed_memory()
    after = _rss_mib()
    assert keep.sum() == 64 * 1024
    assert before - after > 50, (before, after)


@glibc
def test_arena_cap_respects_the_users_setting(monkeypatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    assert memory.limit_arenas() is False
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    assert memory.limit_arenas() is True


def test_no_op_without_glibc(monkeypatch):
    monkeypatch.setattr(memory, "_glibc", lambda: None)
    assert memory.limit_arenas() is False
    memory.release_freed_memory()  # nothing to call, nothing raised


def test_glibc_found_on_linux_glibc():
    if sys.platform.startswith("linux") and "glibc" in " ".join(__import__("platform").libc_ver()):
        assert memory._glibc() is not None


linux_data_limit = pytest.mark.skipif(
    memory.data_bytes() is None, reason="needs /proc/self/status (Linux)"
)


@linux_data_limit
def test_worker_budget_refuses_an_allocation_past_it_and_is_lifted_after():
    import resource

    before = resource.getrlimit(resource.RLIMIT_DATA)
    with memory.worker_budget(64 << 20) as enforced:
        assert enforced
        with pytest.raises(MemoryError):
            np.ones(256 << 20, np.uint8)
        small = np.ones(8 << 20, np.uint8)  # within the budget
        assert int(small.sum()) == 8 << 20
    assert resource.getrlimit(resource.RLIMIT_DATA) == before
    assert int(np.ones(256 << 20, np.uint8)[:10].sum()) == 10  # lifted


@linux_data_limit
def test_worker_budget_keeps_a_tighter_limit_the_user_set():
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    tight = memory.data_bytes() + (512 << 20)
    resource.setrlimit(resource.RLIMIT_DATA, (tight, hard))
    try:
        with memory.worker_budget(8 << 30) as enforced:
            assert not enforced
            assert resource.getrlimit(resource.RLIMIT_DATA) == (tight, hard)
        assert resource.getrlimit(resource.RLIMIT_DATA) == (tight, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def test_budget_reason_names_the_limit_and_how_to_raise_it(monkeypatch):
    monkeypatch.setenv("MEDVQA_LIMITS", "max_worker_bytes=3e8")
    reason = memory.budget_reason()
    assert "max_worker_bytes of 300,000,000 bytes" in reason
    assert "MEDVQA_LIMITS=max_worker_bytes=" in reason

"""Seeded random generators derived from (seed, stage, key): no global random state."""

from __future__ import annotations

import hashlib

import numpy as np


def rng_for(seed: int, *key: object) -> np.random.Generator:
    digest = hashlib.sha256(repr((int(seed), *map(str, key))).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))


def salt_for(seed: int, *key: object) -> bytes:
    """16 bytes derived from (seed, key), as :func:`rng_for` derives its generator: the key of
    a seeded hash (a draw that must not depend on the order it sees things in)."""
    return hashlib.sha256(repr((int(seed), *map(str, key))).encode()).digest()[:16]

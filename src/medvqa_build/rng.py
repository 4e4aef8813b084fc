"""Seeded random generators derived from (seed, stage, key): no global random state."""

from __future__ import annotations

import hashlib

import numpy as np


def rng_for(seed: int, *key: object) -> np.random.Generator:
    digest = hashlib.sha256(repr((int(seed), *map(str, key))).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))

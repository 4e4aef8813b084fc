"""JSON read with its nesting checked before it is parsed.

``json.loads`` recurses once per level: a file of 100,000 ``[`` ends in a ``RecursionError``,
and a value nested a few hundred deep reaches pydantic and the code walking it. No file this
project reads nests deeper than a handful of levels, so :func:`load_json` measures the depth
first, with C-speed passes (strings removed, brackets kept, a running sum), and refuses beyond
``max_json_depth`` (store/limits.py) with :class:`JsonTooDeep`, a ``ValueError``: every reader
that already turns bad JSON into one line handles it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from .limits import read_limits

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


class JsonTooDeep(ValueError):
    """A JSON value nested deeper than ``max_json_depth``."""


def json_depth(data: bytes) -> int:
    """How deep the JSON text ``data`` nests (``[]`` is 1); brackets inside strings do not
    count. For text that is not JSON the answer is only an estimate (it is refused later)."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKET)
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1).astype(np.int64)
    return int(np.cumsum(steps).max())


def load_json(data: bytes | str) -> Any:
    """``json.loads(data)`` once its depth is within ``max_json_depth``; else
    :class:`JsonTooDeep` saying how deep it goes."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    limit = read_limits().max_json_depth
    depth = json_depth(raw)
    if depth > limit:
        raise JsonTooDeep(
            f"nested {depth:,} levels deep, over max_json_depth={limit} (MEDVQA_LIMITS)"
        )
    return json.loads(data)

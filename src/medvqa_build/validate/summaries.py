"""Compact per-item summaries for the build rules, which see every item of a build once.

A build of 10^6 items cannot keep a Python string, tuple or dict entry per item (about 120
bytes each, 500+ bytes an item over the four build rules). These keep fixed-size numbers in
arrays instead and turn them back into item ids only for the few items a problem names:

- :class:`IdLog`: every item id in item order, packed in one buffer (about 24 bytes an id);
  a rule keeps an item's position and asks the log for its id when it reports it.
- :func:`duplicated`: the repeated values of a list of 64-bit hashes (one numpy sort).
- :class:`SplitTracker`: in which splits each key (a group, an image, a near-duplicate group)
  has items, as (key hash, split, item position) triples; a key's text is kept only once it
  is seen in a second split, i.e. only for keys that leak.

Hashes are Python's ``hash`` of a string: randomised per process but fixed within one, and
only used to group equal strings (a report compares the strings themselves or names a key by
its text), so every report is the same from run to run.
"""

from __future__ import annotations

from array import array

import numpy as np

from ..store.packed import PackedStrings


class IdLog(PackedStrings):
    """Item ids in the order the items were seen: one UTF-8 buffer and an end offset each."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        super().__init__()
        self._last: object = None  # the item last appended: rules fed in turn share its slot

    def position(self, item) -> int:
        """The position of ``item`` (appended unless it is the item appended last)."""
        if item is not self._last:
            self.append(item.item_id)
            self._last = item
        return len(self.ends) - 1


def duplicated(hashes: array) -> tuple[np.ndarray, np.ndarray]:
    """The indices into ``hashes`` (an ``array("q")``) whose value occurs more than once, and
    a group number per index (equal values, equal numbers); both empty when none repeats."""
    h = np.frombuffer(hashes, np.int64) if len(hashes) else np.zeros(0, np.int64)
    order = np.argsort(h, kind="stable")
    ranked = h[order]
    same = ranked[1:] == ranked[:-1]
    if not same.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    member = np.zeros(ranked.size, bool)
    member[1:] |= same
    member[:-1] |= same
    group = np.cumsum(np.r_[True, ~same])[member]
    return order[member], group


class SplitTracker:
    """Which splits each key's items are in, for keys seen in several of them.

    :meth:`add` records ``(hash of the key, split, item position)``; every ``FLUSH`` records the
    buffered keys are merged into a sorted table of (key hash, splits seen as a bit mask), and
    a key that shows up in a second split has its text kept. :meth:`leaks` returns those keys
    with, per split, the number of records and the item positions.
    """

    FLUSH = 4096

    def __init__(self) -> None:
        self.hashes, self.positions, self.splits = array("q"), array("q"), bytearray()
        self.split_names: list[str] = []
        self._split_code: dict[str, int] = {}
        self._seen = np.zeros(0, np.int64)  # sorted key hashes
        self._masks = np.zeros(0, np.uint64)  # their splits, one bit each
        self._pending: dict[int, tuple] = {}  # hash -> key, for the records not yet merged
        self._from = 0  # the first record not yet merged
        self.texts: dict[int, tuple] = {}  # hash -> key, for keys in two or more splits

    def add(self, key: tuple, split: str, position: int) -> None:
        code = self._split_code.get(split)
        if code is None:
            if len(self.split_names) == 64:
                raise ValueError(
                    f"split {split!r}: a build has at most 64 split names; "
                    "name the splits of the items with fewer names"
                )
            code = self._split_code[split] = len(self.split_names)
            self.split_names.append(split)
        h = hash(key)
        self.hashes.append(h)
        self.positions.append(position)
        self.splits.append(code)
        self._pending.setdefault(h, key)
        if len(self.hashes) - self._from >= self.FLUSH:
            self._merge()

    def _merge(self) -> None:
        new = slice(self._from, len(self.hashes))
        self._from = len(self.hashes)
        if new.start == new.stop:
            return
        h = np.frombuffer(self.hashes, np.int64)[new]
        codes = np.frombuffer(self.splits, np.uint8)[new]
        bits = np.left_shift(np.uint64(1), codes.astype(np.uint64))
        keys, inverse = np.unique(h, return_inverse=True)
        masks = np.zeros(keys.size, np.uint64)
        np.bitwise_or.at(masks, inverse, bits)
        at = np.searchsorted(self._seen, keys)
        found = at < self._seen.size
        found[found] = self._seen[at[found]] == keys[found]
        before = np.zeros(keys.size, np.uint64)
        before[found] = self._masks[at[found]]
        after = before | masks
        self._masks[at[found]] = after[found]
        fresh = ~found
        self._seen = np.insert(self._seen, at[fresh], keys[fresh])
        self._masks = np.insert(self._masks, at[fresh], after[fresh])
        several = (after & (after - np.uint64(1))) != 0  # two or more bits
        for k in keys[several].tolist():
            if k not in self.texts:
                self.texts[k] = self._pending[k]
        self._pending.clear()

    def leaks(self) -> list[tuple[tuple, dict[str, tuple[int, np.ndarray]]]]:
        """``(key, {split: (records, item positions)})`` for each key in several splits."""
        self._merge()
        if not self.texts:
            return []
        h = np.frombuffer(self.hashes, np.int64)
        rows = np.flatnonzero(np.isin(h, np.fromiter(self.texts, np.int64, len(self.texts))))
        h = h[rows]
        pos = np.frombuffer(self.positions, np.int64)[rows]
        codes = np.frombuffer(self.splits, np.uint8)[rows]
        order = np.lexsort((pos, codes, h))  # by key, split, item
        h, codes, pos = h[order], codes[order], pos[order]
        cut = np.flatnonzero((h[1:] != h[:-1]) | (codes[1:] != codes[:-1])) + 1
        bounds = np.r_[0, cut, h.size].tolist()
        found: dict[int, dict[str, tuple[int, np.ndarray]]] = {}
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            found.setdefault(int(h[a]), {})[self.split_names[codes[a]]] = (
                b - a,
                np.unique(pos[a:b]),
            )
        return [(self.texts[k], per_split) for k, per_split in found.items()]

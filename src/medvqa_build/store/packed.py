"""Many short strings kept as one UTF-8 buffer and an end offset each.

A Python ``str`` in a list costs ~50 bytes of header and pointer on top of its text; the
per-item and per-sample bookkeeping of a build over 10^6 images (item ids, a pool's sample
ids and groups) keeps its strings here instead and decodes one when it is read.
"""

from __future__ import annotations

from array import array

import numpy as np


class PackedStrings:
    """An append-only list of strings (text bytes + 8 bytes each)."""

    __slots__ = ("data", "ends")

    def __init__(self) -> None:
        self.data = bytearray()
        self.ends = array("q")

    def append(self, text: str) -> int:
        """Add ``text``; returns its index."""
        self.data += text.encode()
        self.ends.append(len(self.data))
        return len(self.ends) - 1

    def extend(self, texts) -> None:
        """:meth:`append` of each of ``texts``."""
        encoded = [t.encode() for t in texts]
        if encoded:
            base = len(self.data)
            self.data += b"".join(encoded)
            ends = np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded))) + base
            self.ends.frombytes(ends.astype(np.int64).tobytes())

    def extend_arrow(self, texts) -> None:
        """:meth:`extend` of an Arrow string array without nulls, copied from its buffers
        (no Python object per string)."""
        import pyarrow as pa

        if texts.null_count:
            raise ValueError("extend_arrow: null strings")
        if not len(texts):
            return
        if pa.types.is_string(texts.type):
            offset_type = np.int32
        elif pa.types.is_large_string(texts.type):
            offset_type = np.int64
        else:
            raise TypeError(f"extend_arrow: not a string array ({texts.type})")
        _, offsets_buf, data_buf = texts.buffers()
        offsets = np.frombuffer(offsets_buf, offset_type)[
            texts.offset : texts.offset + len(texts) + 1
        ].astype(np.int64)
        base = len(self.data)
        if data_buf is not None:
            self.data += memoryview(data_buf)[int(offsets[0]) : int(offsets[-1])]
        self.ends.frombytes((offsets[1:] - offsets[0] + base).tobytes())

    def __len__(self) -> int:
        return len(self.ends)

    def __iter__(self):
        data, start = self.data, 0
        for end in self.ends:
            yield data[start:end].decode()
            start = end

    def __getitem__(self, index: int) -> str:
        if index < 0:
            index += len(self.ends)
        start = self.ends[index - 1] if index else 0
        return self.data[start : self.ends[index]].decode()


class SortedStrings:
    """Strings as one sorted array of UTF-8 bytes, found by binary search: the index of a
    string in the original order without a dict entry per string (~the text + 8 bytes)."""

    __slots__ = ("keys", "order")

    def __init__(self, texts) -> None:
        keys = np.array([t.encode() for t in texts], dtype=bytes) if len(texts) else None
        if keys is None:
            keys = np.array([], "S1")
        self._sort(keys)

    def _sort(self, keys: np.ndarray) -> None:
        self.order = np.argsort(keys, kind="stable").astype(np.int64)  # original index
        self.keys = keys[self.order]

    @classmethod
    def of_packed(cls, packed: PackedStrings, index, chunk: int = 65536) -> SortedStrings:
        """``SortedStrings([packed[i] for i in index])``, with a Python object per string
        only for ``chunk`` strings at a time."""
        index = np.asarray(index, dtype=np.int64)
        ends = np.frombuffer(packed.ends, np.int64)
        starts = np.concatenate([np.zeros(1, np.int64), ends[:-1]])
        parts = []
        with memoryview(packed.data) as data:
            for at in range(0, len(index), chunk):
                k = index[at : at + chunk]
                pairs = zip(starts[k].tolist(), ends[k].tolist(), strict=True)
                parts.append(np.array([data[a:b].tobytes() for a, b in pairs], dtype=bytes))
        keys = np.concatenate(parts) if parts else np.array([], "S1")
        out = cls.__new__(cls)
        out._sort(keys)
        return out

    def index(self, text: object) -> int | None:
        """The original index of ``text`` (its first occurrence), or None."""
        if not isinstance(text, str) or not len(self.keys):
            return None
        key = text.encode()
        pos = int(np.searchsorted(self.keys, key))
        if pos < len(self.keys) and self.keys[pos] == key:
            return int(self.order[pos])
        return None

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self):
        """The strings in their original order."""
        in_order = np.empty_like(self.keys)
        in_order[self.order] = self.keys
        return (k.decode() for k in in_order)

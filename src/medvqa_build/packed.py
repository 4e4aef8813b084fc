"""Many short strings kept as one UTF-8 buffer and an end offset each.

A Python ``str`` in a list costs ~50 bytes of header and pointer on top of its text; the
per-item and per-sample bookkeeping of a build over 10^6 images (item ids, a pool's sample
ids and groups) keeps its strings here instead and decodes one when it is read.
"""

from __future__ import annotations

from array import array


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

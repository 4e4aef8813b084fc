"""What curation reads of each sample, gathered in one pass and packed.

Dedup and selection compare samples with each other, so they need something of every
sample at once; a ``Sample`` object is ~2 kB (regions, masks, metadata), 2 GiB at 10^6
images. :class:`SampleFacts` keeps only what the rules use: the id, the label key, the
keep rule's fields (source, pixels, region count) and the content and perceptual hashes
the dedup spec asks for, about 100 bytes a sample. The samples themselves are read once
(a list or a :class:`~medvqa_build.tables.SampleTable`, a batch at a time).
"""

from __future__ import annotations

import hashlib
import logging
from array import array
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..errors import ImageProblem
from ..media.phash import is_image_file, phash_file
from ..records import Sample
from ..store.atomic import file_sha256
from ..store.packed import PackedStrings
from .spec import DedupSpec

log = logging.getLogger(__name__)


def content_key(sample: Sample, root: Path) -> str:
    """sha256 of the file; a frame or slice of a video/volume file adds its index."""
    key = file_sha256(root / sample.image)
    if not is_image_file(sample.image):
        if sample.frame is not None:
            key += f"#frame={sample.frame}"
        if sample.slice is not None:
            key += f"#slice={sample.slice.axis}:{sample.slice.index}"
    return key


def label_key(sample: Sample) -> str:
    """The label a sample is balanced by: its image-level labels joined, or ``(none)``."""
    return "|".join(sorted(sample.labels)) or "(none)"


class SampleFacts:
    """Per sample, in input order: ``ids`` (packed), ``labels``/``sources`` (codes into
    ``label_names``/``source_names``), ``pixels``, ``regions``; with exact dedup a 16-byte
    digest of the content key per sample (``hashed`` says which could be read); with pHash
    dedup the hash of every plain image file that could be read (``phash_rows`` says whose).
    ``unhashable`` counts the files that could not be read, once per criterion."""

    def __init__(self) -> None:
        self.ids = PackedStrings()
        self.label_names: list[str] = []
        self.source_names: list[str] = []
        self._codes: tuple[dict[str, int], dict[str, int]] = ({}, {})
        self.labels, self.sources = array("i"), array("i")
        self.pixels, self.regions = array("q"), array("i")
        self.digests = bytearray()  # 16 bytes a sample (zeros where unread)
        self.hashed = bytearray()  # 1 where the content key was read
        self.phash_rows, self.phashes = array("q"), array("Q")
        self.unhashable = 0

    @classmethod
    def collect(
        cls, samples: Iterable[Sample], dedup: DedupSpec | None, roots: dict[str, Path]
    ) -> SampleFacts:
        facts = cls()
        exact = dedup is not None and dedup.exact
        phash = dedup is not None and dedup.phash_max_hamming is not None
        for s in samples:
            i = len(facts.ids)
            facts.ids.append(s.sample_id)
            facts.labels.append(facts._code(0, label_key(s), facts.label_names))
            facts.sources.append(facts._code(1, s.source, facts.source_names))
            facts.pixels.append(s.width * s.height)
            facts.regions.append(len(s.regions))
            if exact:
                facts._add_digest(s, roots[s.source])
            if phash and is_image_file(s.image):
                try:
                    h = phash_file(roots[s.source] / s.image)
                except (ImageProblem, OSError) as exc:
                    log.warning("cannot pHash %s: %s", s.sample_id, exc)
                    facts.unhashable += 1
                else:
                    facts.phash_rows.append(i)
                    facts.phashes.append(h)
        return facts

    def _code(self, which: int, name: str, names: list[str]) -> int:
        code = self._codes[which].get(name)
        if code is None:
            code = self._codes[which][name] = len(names)
            names.append(name)
        return code

    def _add_digest(self, s: Sample, root: Path) -> None:
        try:
            key = content_key(s, root)
        except OSError as exc:
            log.warning("cannot hash %s: %s", s.sample_id, exc)
            self.unhashable += 1
            self.digests += bytes(16)
            self.hashed.append(0)
            return
        self.digests += hashlib.blake2b(key.encode(), digest_size=16).digest()
        self.hashed.append(1)

    def __len__(self) -> int:
        return len(self.ids)

    def exact_groups(self) -> list[np.ndarray]:
        """Rows with the same content key (two or more each, ascending), in the order of
        each group's first row."""
        rows = np.flatnonzero(np.frombuffer(bytes(self.hashed), np.uint8))
        if len(rows) < 2:
            return []
        keys = np.frombuffer(bytes(self.digests), np.uint64).reshape(-1, 2)[rows]
        _, first, inverse, counts = np.unique(
            keys, axis=0, return_index=True, return_inverse=True, return_counts=True
        )
        inverse = inverse.reshape(-1)
        order = np.argsort(inverse, kind="stable")  # rows grouped by key, ascending within
        ends = np.cumsum(counts)
        groups = [
            (int(rows[first[g]]), rows[order[ends[g] - counts[g] : ends[g]]])
            for g in np.flatnonzero(counts > 1)
        ]
        return [members for _, members in sorted(groups, key=lambda g: g[0])]

    def keep_key(self, i: int, dedup: DedupSpec):
        """Sort key of the keep rule: the smallest key is the representative.

        ``prefer_sources`` first (in their order), then for ``largest`` the most pixels and
        the most regions, and finally the smallest ``sample_id`` (deterministic)."""
        source = self.source_names[self.sources[i]]
        prefer = dedup.prefer_sources
        prio = prefer.index(source) if source in prefer else len(prefer)
        if dedup.keep == "largest":
            return (prio, -self.pixels[i], -self.regions[i], self.ids[i])
        return (prio, self.ids[i])

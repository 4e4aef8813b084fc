"""Contamination check: flag items whose images match (same bytes) or near-match (pHash within
a Hamming threshold) images of known public evaluation sets, given as a VLMEvalKit TSV
(base64 ``image`` column), a Hugging Face dataset folder (Parquet image columns and/or image
files) or a text file of hashes (``sha256:<hex>`` / ``phash:<16 hex>`` per line)."""

from __future__ import annotations

import base64
import binascii
import contextlib
import csv
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MedvqaError
from ..media.phash import IMAGE_SUFFIXES, near_pairs, phash_bytes, sha256_bytes
from ..records import Item
from .rules import Problem

DEFAULT_MAX_HAMMING = 4


class ContaminationError(MedvqaError):
    """A reference set that cannot be read."""


@dataclass
class ReferenceSet:
    """Hashes of one evaluation set's images; ``labels`` name where each hash came from."""

    name: str
    sha256: dict[str, str] = field(default_factory=dict)  # hash -> label
    phash: list[tuple[int, str]] = field(default_factory=list)

    def add_bytes(self, data: bytes, label: str) -> None:
        self.sha256.setdefault(sha256_bytes(data), label)
        with contextlib.suppress(ValueError):  # not a codec cv2 reads: exact matching only
            self.phash.append((phash_bytes(data), label))


def _tsv_images(path: Path) -> Iterator[tuple[bytes, str]]:
    csv.field_size_limit(sys.maxsize)
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh, delimiter="\t")
        if not reader.fieldnames or "image" not in reader.fieldnames:
            raise ContaminationError(
                "TSV has no 'image' column",
                where=str(path),
                fix="give a VLMEvalKit MCQ TSV (base64 images in 'image')",
            )
        for row in reader:
            value = (row.get("image") or "").strip()
            label = f"{path.name}#index={row.get('index', '?')}"
            if (
                len(value) < 64
            ):  # VLMEvalKit de-duplicates: a short value is the index of another row
                continue
            values = [value]
            if value.startswith("["):  # multi-image rows hold a list of base64 strings
                import ast

                values = ast.literal_eval(value)
            for v in values:
                try:
                    yield base64.b64decode(v), label
                except (binascii.Error, ValueError):
                    continue


def _parquet_images(folder: Path) -> Iterator[tuple[bytes, str]]:
    import pyarrow.parquet as pq

    for path in sorted(folder.rglob("*.parquet")):
        table = pq.read_table(path)
        for name in table.column_names:
            for i, value in enumerate(table.column(name).to_pylist()):
                values = value if isinstance(value, list) else [value]
                for v in values:
                    if isinstance(v, dict) and isinstance(v.get("bytes"), bytes | bytearray):
                        yield bytes(v["bytes"]), f"{path.relative_to(folder)}#{name}[{i}]"
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES:
            yield path.read_bytes(), str(path.relative_to(folder))


def load_reference(path: str | os.PathLike) -> ReferenceSet:
    """Read one reference set: a ``.tsv``, a folder, or a hash list (any other file)."""
    path = Path(path)
    ref = ReferenceSet(path.name)
    if path.is_dir():
        for data, label in _parquet_images(path):
            ref.add_bytes(data, label)
    elif path.is_file() and path.suffix.lower() == ".tsv":
        for data, label in _tsv_images(path):
            ref.add_bytes(data, label)
    elif path.is_file():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            text = line.split("#", 1)[0].strip().lower()
            if not text:
                continue
            kind, _, value = text.rpartition(":")
            kind = kind or ("sha256" if len(value) == 64 else "phash" if len(value) == 16 else "")
            try:
                int(value, 16)
            except ValueError:
                kind = ""
            if kind == "sha256" and len(value) == 64:
                ref.sha256.setdefault(value, f"{path.name}:{n}")
            elif kind == "phash" and len(value) == 16:
                ref.phash.append((int(value, 16), f"{path.name}:{n}"))
            else:
                raise ContaminationError(
                    f"line {n} is not a sha256 or pHash: {line.strip()!r}",
                    where=str(path),
                    fix="write one 'sha256:<64 hex>' or 'phash:<16 hex>' per line",
                )
    else:
        raise ContaminationError(
            "reference set not found",
            where=str(path),
            fix="give a VLMEvalKit .tsv, a Hugging Face dataset folder or a hash list",
        )
    if not ref.sha256 and not ref.phash:
        raise ContaminationError("no image or hash found in the reference set", where=str(path))
    return ref


def check_contamination(
    items: Iterable[Item],
    resolve: Callable[[str], Path],
    references: Sequence[ReferenceSet | str | os.PathLike],
    *,
    max_hamming: int = DEFAULT_MAX_HAMMING,
    clean_ref: Callable[[Item], str | None] | None = None,
) -> list[Problem]:
    """A ``contamination`` problem per item image that matches a reference image.

    Each item's clean image is compared (``clean_ref``, e.g. ``BuildView.clean_ref``; by
    default every image of the item), since a drawn prompt would hide an exact match.
    ``items`` is read once; what is kept is per image: its hashes and the ids of its items.
    """
    refs = [r if isinstance(r, ReferenceSet) else load_reference(r) for r in references]
    images: dict[str, tuple[str, int | None]] = {}
    owners: dict[str, list[str]] = {}
    for item in items:
        wanted = [clean_ref(item)] if clean_ref is not None else list(item.images)
        for ref in wanted:
            if ref is None:
                continue
            owners.setdefault(ref, []).append(item.item_id)
            if ref in images:
                continue
            try:
                data = resolve(ref).read_bytes()
            except (KeyError, OSError):
                continue  # image-decodes reports unreadable images
            try:
                ph = phash_bytes(data)
            except ValueError:
                ph = None
            images[ref] = (sha256_bytes(data), ph)
    problems: list[Problem] = []
    refs_list = list(images)
    for rs in refs:
        matched: dict[str, str] = {}
        for ref in refs_list:
            sha, _ = images[ref]
            if sha in rs.sha256:
                matched[ref] = f"the same file as {rs.sha256[sha]} in {rs.name}"
        hashed = [r for r in refs_list if images[r][1] is not None and r not in matched]
        pairs = near_pairs([h for h, _ in rs.phash], max_hamming, [images[r][1] for r in hashed])
        for qi, j, d in pairs:
            matched.setdefault(
                hashed[qi], f"a near-copy (pHash distance {d}) of {rs.phash[j][1]} in {rs.name}"
            )
        for ref, why in sorted(matched.items()):
            for item_id in owners[ref]:
                problems.append(Problem(item_id, "contamination", f"{ref} is {why}"))
    return problems

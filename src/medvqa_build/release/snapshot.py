"""One release of a benchmark as a diff reads it: a digest of every item (the fields a user
sees, and a hash of the image bytes a user downloads), the recipe, the versions that built it
and the text-only audit. A build folder and its HF export give the same digests, so a local
build can be compared with a published revision."""

from __future__ import annotations

import hashlib
import html
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from ..errors import SourceError
from ..export.card import portable_recipe
from ..media.load import export_image_bytes
from ..pipeline import BuildDir
from ..store.tables import batched
from ..vocab import LETTERS, answer_letters

_COLUMNS = (
    "item_id",
    "benchmark",
    "task",
    "subtask",
    "source",
    "prompt_level",
    "split",
    "question",
    "options",
    "answer",
    "gt",
    "sample_ids",
)
WITHHELD = "withheld"  # the image digest of an item published without its pixels
_VERSIONS = re.compile(r"^- Versions: (.+)$", re.M)
_RECIPE = re.compile(r"^## How it was built\n.*?^```yaml\n(.*?)^```", re.M | re.S)
_BLIND_HEADING = "Text-only (blind) audit"
_BLIND_ROW = re.compile(
    r"^\| (?P<task>(?:[^|\\]|\\.)+?) \| (?P<items>\d+) \| "
    r"(?P<acc>[\d.]+)% \| (?P<chance>[\d.]+)% \|",
    re.M,
)


@dataclass(frozen=True, slots=True)
class ItemDigest:
    """What a diff compares of one item; ``images``: sha256 of the published image bytes.
    Slotted, its texts interned (questions come from a few templates, options are labels):
    a release of 10^6 items is held as small objects sharing their strings."""

    benchmark: str
    task: str
    subtask: str
    source: str
    prompt_level: str
    split: str
    question: str
    options: tuple[str, ...]
    answer: str
    gt: str
    sample_ids: tuple[str, ...]
    images: str

    @property
    def answer_content(self) -> str:
        """The text of the correct option(s), or the answer itself when there are no options
        (a box)."""
        if not self.options:
            return self.answer or self.gt
        texts = []
        for letter in answer_letters(self.answer):
            k = LETTERS.find(letter)
            texts.append(self.options[k] if 0 <= k < len(self.options) else letter)
        return " + ".join(texts)


@dataclass
class Release:
    """One side of a diff. ``kind``: ``build`` or ``hf``."""

    path: Path
    kind: str
    items: dict[str, ItemDigest]
    recipe: dict | None
    versions: dict[str, str] = field(default_factory=dict)
    blind: dict[str, dict] | None = None  # task -> {items, accuracy, chance}
    stages: dict[str, list[str]] | None = None  # a build's stage folders (name-fingerprint)

    @property
    def benchmarks(self) -> set[str]:
        return {d.benchmark for d in self.items.values()}


def _text(value) -> str:
    return sys.intern(value or "")


def _digest(row: dict, image_hash: str) -> ItemDigest:
    return ItemDigest(
        benchmark=_text(row["benchmark"]),
        task=_text(row["task"]),
        subtask=_text(row["subtask"]),
        source=_text(row["source"]),
        prompt_level=_text(row["prompt_level"] or "image"),
        split=_text(row["split"] or "test"),
        question=_text(row["question"]),
        options=tuple(_text(o) for o in row["options"] or ()),
        answer=_text(row["answer"]),
        gt=_text(row["gt"]),
        sample_ids=tuple(row["sample_ids"] or ()),
        images=image_hash,
    )


def _hash_images(blobs: list[bytes]) -> str:
    h = hashlib.sha256()
    for blob in blobs:
        h.update(hashlib.sha256(blob).digest())
    return h.hexdigest()


def read_release(path: str | os.PathLike) -> Release:
    """A build folder (``build.json``) or an HF export folder (``README.md`` and ``data/``)."""
    path = Path(path)
    if (path / "build.json").is_file():
        return _read_build(path)
    if (path / "README.md").is_file() and (path / "data").is_dir():
        return _read_hf(path)
    raise SourceError(
        "neither a build folder (no build.json) nor an HF export folder (no README.md and data/)",
        where=str(path),
        fix="pass the -o folder of a `medvqa-build run`, or an HF export (e.g. DIR/hf or a "
        "downloaded Hub revision)",
    )


def _read_build(path: Path) -> Release:
    folder = BuildDir.open(path)
    resolve = folder.resolver()
    items: dict[str, ItemDigest] = {}
    for batch in batched(folder.items()):
        for item in batch:
            blobs = []
            for ref in item.images:
                try:
                    blobs.append(export_image_bytes(resolve(ref))[0])
                except (KeyError, OSError):
                    blobs.append(b"missing:" + ref.encode())  # counted as an image change
            items[item.item_id] = _digest(
                {c: getattr(item, c) for c in _COLUMNS}, _hash_images(blobs)
            )
    recipe_text = (folder.path / "recipe.yaml").read_text(encoding="utf-8")
    card = folder.path / "hf" / "README.md"
    report = folder.report() or {}
    blind = (report.get("validation") or {}).get("blind")
    return Release(
        path=folder.path,
        kind="build",
        items=items,
        recipe=yaml.safe_load(portable_recipe(recipe_text)) or {},
        versions=_versions(card.read_text(encoding="utf-8")) if card.is_file() else {},
        blind=_blind_of_report(blind),
        stages=_stage_folders(report),
    )


def _stage_folders(report: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for s in report.get("stages", []):
        out.setdefault(s["stage"], []).append(Path(s["path"]).name)
    return {k: sorted(v) for k, v in out.items()}


def _blind_of_report(blind: dict | None) -> dict[str, dict] | None:
    if not blind or blind.get("status") != "ok":
        return None
    return {
        t["task"]: {
            "items": t["items"],
            "accuracy": round(t["accuracy"], 3),  # as the card shows it: a build and its
            "chance": round(t["chance"], 3),  # export give the same audit
        }
        for t in blind.get("tasks", [])
    }


def _read_hf(path: Path) -> Release:
    """Every config's shards are read; an item in several configs (the whole benchmark and
    its task family) is read once, and a shard whose ids were all seen is skipped."""
    items: dict[str, ItemDigest] = {}
    shards = sorted((path / "data").rglob("*.parquet"))
    if not shards:
        raise SourceError(
            "an HF export folder without Parquet shards",
            where=str(path / "data"),
            fix="download the whole revision (data/<config>/*.parquet)",
        )
    for shard in shards:
        missing = sorted({*_COLUMNS, "images"} - set(pq.read_schema(shard).names))
        if missing:
            raise SourceError(
                f"not a medvqa_build export: no column(s) {', '.join(missing)}",
                where=str(shard),
                fix="diff releases written by medvqa-build export (or push)",
            )
        ids = pq.read_table(shard, columns=["item_id"]).column("item_id").to_pylist()
        if all(i in items for i in ids):
            continue
        for batch in pq.ParquetFile(shard).iter_batches(
            batch_size=100, columns=[*_COLUMNS, "images"]
        ):
            for row in batch.to_pylist():
                if row["item_id"] in items:
                    continue
                images = row["images"] or ()
                if any(img["bytes"] is None for img in images):
                    digest = WITHHELD  # an annotations-only upload: no bytes to compare
                else:
                    digest = _hash_images([img["bytes"] for img in images])
                items[row["item_id"]] = _digest(row, digest)
    card = (path / "README.md").read_text(encoding="utf-8")
    found = _RECIPE.search(card)
    blind = blind_of_card(card)
    return Release(
        path=path.resolve(),
        kind="hf",
        items=items,
        recipe=(yaml.safe_load(found.group(1)) or {}) if found else None,
        versions=_versions(card),
        blind=blind,
    )


def blind_of_card(card: str) -> dict[str, dict] | None:
    """The text-only audit's table of a card (:func:`medvqa_build.validate.blind.blind_table`),
    per task: items, accuracy and chance, at the card's precision (0.1 %)."""
    if _BLIND_HEADING not in card:
        return None
    section = card.split(_BLIND_HEADING, 1)[1].split("\n## ", 1)[0]
    return {
        html.unescape(m["task"].replace("\\|", "|")): {  # a name as a card cell writes it
            "items": int(m["items"]),
            "accuracy": round(float(m["acc"]) / 100, 3),
            "chance": round(float(m["chance"]) / 100, 3),
        }
        for m in _BLIND_ROW.finditer(section)
    } or None


def _versions(card: str) -> dict[str, str]:
    """``- Versions: medvqa_build 0.1.0, python 3.11.7, ...`` of a card."""
    found = _VERSIONS.search(card)
    if not found:
        return {}
    out = {}
    for part in found.group(1).split(", "):
        name, _, version = part.strip().rpartition(" ")
        if name:
            out[name] = version
    return out

"""Clinician decisions on a build (accept / reject / edit, each with a comment) and applying
them: the build's item set is rewritten without rejected items and with edits, and every
application is appended to an audit trail. A bad decisions file changes nothing."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import tempfile
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from tqdm.auto import tqdm

from ..errors import MedvqaError, describe_validation_error
from ..pipeline import BuildDir
from ..records import Item
from ..store.json_text import load_json
from ..store.parquet import ItemWriter
from ..store.tables import ItemTable
from ..validate.rules import run_rules

FORMAT = "medvqa-review-decisions"
EDITABLE = ("question", "options", "answer", "gt")


class ReviewError(MedvqaError):
    """A decisions file that cannot be applied to this build; nothing was changed."""


def build_id(items: Iterable[Item], progress: bool = False) -> str:
    """Content hash of a build's item set: decisions name the exact items they were made on.

    The sha256 of the JSON list of the items' rows sorted by item id. The items are read once
    (a list, or an :class:`~medvqa_build.tables.ItemTable` a batch at a time): each row's JSON
    goes to an unnamed temporary file and only the ids and offsets stay in memory; the rows
    are then hashed in id order, as the whole list would be."""
    with tempfile.TemporaryFile() as spill:
        ids: list[str] = []
        offsets = array("q", [0])
        total = len(items) if hasattr(items, "__len__") else None
        bar = tqdm(
            items, total=total, desc="hash items", unit="item", disable=not progress, leave=False
        )
        for item in bar:
            spill.write(_row_json(item))
            ids.append(item.item_id)
            offsets.append(spill.tell())
        keys = np.array([i.encode() for i in ids], dtype=bytes) if ids else np.array([], "S1")
        del ids
        order = np.argsort(keys, kind="stable")  # UTF-8 byte order is code point order
        del keys
        digest = hashlib.sha256(b"[")
        for n, row in enumerate(order.tolist()):
            spill.seek(offsets[row])
            digest.update(b", " if n else b"")
            digest.update(spill.read(offsets[row + 1] - offsets[row]))
        digest.update(b"]")
    return digest.hexdigest()


class _Sized:
    """An iterator with a known length (for a progress bar's total)."""

    def __init__(self, it, n: int):
        self._it, self._n = it, n

    def __iter__(self):
        return iter(self._it)

    def __len__(self) -> int:
        return self._n


def _row_json(item: Item) -> bytes:
    """One element of the hashed list, as ``json.dumps`` of the whole list writes it."""
    return json.dumps(item.to_row(), sort_keys=True, default=str, ensure_ascii=False).encode()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Edits(_Strict):
    question: str | None = None
    options: list[str] | None = None
    answer: str | None = None
    gt: str | None = None


class Decision(_Strict):
    item_id: str
    decision: Literal["accept", "reject", "edit"]
    comment: str = ""
    edits: Edits | None = None


class DecisionsFile(_Strict):
    format: Literal["medvqa-review-decisions"]
    version: Literal[1] = 1
    build: str = Field(min_length=16)
    reviewer: str = ""
    exported_at: str | None = None
    decisions: list[Decision]


def read_decisions(path: str | os.PathLike) -> DecisionsFile:
    path = Path(path)
    try:
        data = load_json(path.read_bytes())  # its depth checked first (no RecursionError)
    except FileNotFoundError:
        raise ReviewError(
            "decisions file not found", where=str(path), fix="check the path"
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReviewError(
            f"decisions file is not valid JSON ({exc})",
            where=str(path),
            fix="export it again from the preview page",
        ) from None
    try:
        return DecisionsFile.model_validate(data)
    except ValidationError as exc:
        raise ReviewError(
            f"malformed decisions file: {describe_validation_error(exc)}",
            where=str(path),
            fix="export it again from the preview page (format medvqa-review-decisions)",
        ) from None


def _edited(item: Item, edits: Edits) -> Item:
    changes = {k: v for k, v in edits.model_dump().items() if v is not None}
    if "options" in changes:
        changes["options"] = tuple(o.strip() for o in changes["options"])
    if "answer" in changes:
        changes["answer"] = changes["answer"].strip().upper()
    new = item.replace(**changes)
    letters = [a.strip() for a in new.answer.split(",") if a.strip()]
    if "gt" not in changes and len(letters) == 1 and len(letters[0]) == 1:
        k = ord(letters[0]) - ord("A")
        if 0 <= k < len(new.options):
            new = new.replace(gt=new.options[k])
    return new


def apply_decisions(
    build_dir: str | os.PathLike, decisions_path: str | os.PathLike, *, progress: bool = False
) -> dict:
    """Rewrite the build's items from a decisions file; returns the audit entry.

    The new item set goes to ``review/items-<hash>.parquet``, ``build.json`` points to it (so
    ``validate`` and ``export`` see the reviewed build) and ``review/audit.jsonl`` gains one
    line with every rejection and every edit (before and after) and their comments.

    The items are streamed (hashed and the decided ones picked out, then rewritten): only the
    decided items and the ids' order are held, whatever the build's size.
    """
    folder = BuildDir.open(build_dir)
    items = folder.items()
    decisions = read_decisions(decisions_path)
    decided = {d.item_id: d for d in decisions.decisions}
    picked: list[Item] = []  # the decided items, in build order

    def scanned():
        for item in items:
            if item.item_id in decided:
                picked.append(item)
            yield item

    current = build_id(_Sized(scanned(), len(items)), progress)
    if decisions.build != current:
        raise ReviewError(
            f"decisions were made on build {decisions.build[:12]}, this build is {current[:12]}",
            where=str(decisions_path),
            fix="export decisions from this build's preview "
            "(the build changed, or they were applied already)",
        )
    _check_decisions(decisions, {i.item_id for i in picked}, decisions_path)
    changes = _Changes.of(picked, decided)
    problems = run_rules(
        [i for i in changes.replaced.values() if i is not None],
        folder.samples(),
        folder.manifests(),
        folder.resolver(),
        rules=[
            "schema",
            "options-unique",
            "options-apart",
            "answer-in-options",
            "distractor-related",
        ],
    )
    if problems:
        shown = "; ".join(f"{p.item_id}: [{p.check}] {p.message}" for p in problems[:3])
        raise ReviewError(
            f"{len(problems)} edit(s) make invalid items: {shown}",
            where=str(decisions_path),
            fix="correct the edits in the preview and export again",
        )
    rel, after_id, kept = _write_reviewed(folder.path, items, changes.replaced, progress)
    meta = folder.meta()
    meta.setdefault("items_before_review", meta["items"])
    meta["items"] = rel
    meta["review_audit"] = "review/audit.jsonl"
    entry = {
        "applied_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "decisions_file": str(Path(decisions_path).resolve()),
        "decisions_sha256": hashlib.sha256(Path(decisions_path).read_bytes()).hexdigest(),
        "reviewer": decisions.reviewer,
        "build_before": current,
        "build_after": after_id,
        "items_before": len(items),
        "items_after": kept,
        "accepted": changes.accepted,
        "rejected": changes.rejected,
        "edited": changes.edited,
        "undecided": len(items) - len(decided),
        "items_file": rel,
    }
    folder.write_meta(meta)
    with open(folder.path / "review" / "audit.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return entry


def _check_decisions(decisions: DecisionsFile, present: set[str], path) -> None:
    """Every decision names an item of the build once, and every edit edits something."""
    seen: set[str] = set()
    unknown, repeated, no_edits = [], [], []
    for d in decisions.decisions:
        if d.item_id not in present:
            unknown.append(d.item_id)
        if d.item_id in seen:
            repeated.append(d.item_id)
        seen.add(d.item_id)
        if d.decision == "edit" and (d.edits is None or not d.edits.model_dump(exclude_none=True)):
            no_edits.append(d.item_id)
    for what, ids in (
        ("unknown item id(s)", unknown),
        ("item id(s) decided twice", repeated),
        ("edit decision(s) without edits", no_edits),
    ):
        if ids:
            raise ReviewError(
                f"{len(ids)} {what}: {', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''}",
                where=str(path),
                fix="export the decisions again from this build's preview",
            )


@dataclass
class _Changes:
    """What the decisions do to the decided items, with the audit's records of it."""

    replaced: dict[str, Item | None]  # item id -> its edit, or None when rejected
    accepted: list[dict]
    rejected: list[dict]
    edited: list[dict]

    @classmethod
    def of(cls, picked: list[Item], decided: dict) -> _Changes:
        changes = cls({}, [], [], [])
        for item in picked:
            d = decided[item.item_id]
            if d.decision == "accept":
                changes.accepted.append({"item_id": item.item_id, "comment": d.comment})
            elif d.decision == "reject":
                changes.replaced[item.item_id] = None
                changes.rejected.append({"item_id": item.item_id, "comment": d.comment})
            else:
                after = changes.replaced[item.item_id] = _edited(item, d.edits)
                changes.edited.append(
                    {
                        "item_id": item.item_id,
                        "comment": d.comment,
                        "before": {k: _jsonable(getattr(item, k)) for k in EDITABLE},
                        "after": {k: _jsonable(getattr(after, k)) for k in EDITABLE},
                    }
                )
        return changes


def _write_reviewed(out: Path, items, replaced: dict, progress: bool) -> tuple[str, str, int]:
    """The reviewed item set as ``review/items-<hash>.parquet``: ``(its path below the build,
    its build id, items kept)``."""
    pending = out / "review" / ".items-pending.parquet"
    kept = 0
    try:
        with ItemWriter(pending) as writer:
            bar = tqdm(items, desc="write items", unit="item", disable=not progress, leave=False)
            for item in bar:
                if item.item_id in replaced:
                    item = replaced[item.item_id]
                    if item is None:
                        continue
                writer.add(item)
                kept += 1
        after_id = build_id(ItemTable(pending), progress)
        rel = f"review/items-{after_id[:16]}.parquet"
        os.replace(pending, out / rel)
    finally:
        pending.unlink(missing_ok=True)
    return rel, after_id, kept


def _jsonable(value):
    return list(value) if isinstance(value, tuple) else value

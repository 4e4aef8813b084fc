"""Clinician decisions on a build (accept / reject / edit, each with a comment) and applying
them: the build's item set is rewritten without rejected items and with edits, and every
application is appended to an audit trail. A bad decisions file changes nothing."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import MedvqaError
from ..pydantic_errors import describe_validation_error
from ..records import Item

FORMAT = "medvqa-review-decisions"
EDITABLE = ("question", "options", "answer", "gt")


class ReviewError(MedvqaError):
    """A decisions file that cannot be applied to this build; nothing was changed."""


def build_id(items: list[Item]) -> str:
    """Content hash of a build's item set: decisions name the exact items they were made on."""
    rows = sorted((i.to_row() for i in items), key=lambda r: r["item_id"])
    payload = json.dumps(rows, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


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
        data = json.loads(path.read_text(encoding="utf-8"))
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


def _atomic_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def apply_decisions(build_dir: str | os.PathLike, decisions_path: str | os.PathLike) -> dict:
    """Rewrite the build's items from a decisions file; returns the audit entry.

    The new item set goes to ``review/items-<hash>.parquet``, ``build.json`` points to it (so
    ``validate`` and ``export`` see the reviewed build) and ``review/audit.jsonl`` gains one
    line with every rejection and every edit (before and after) and their comments.
    """
    from ..schema import write_items
    from ..validate.report import open_build_view
    from ..validate.rules import run_rules

    out = Path(build_dir).resolve()
    view = open_build_view(out)
    decisions = read_decisions(decisions_path)
    current = build_id(view.items)
    if decisions.build != current:
        raise ReviewError(
            f"decisions were made on build {decisions.build[:12]}, this build is {current[:12]}",
            where=str(decisions_path),
            fix="export decisions from this build's preview "
            "(the build changed, or they were applied already)",
        )
    by_id = {i.item_id: i for i in view.items}
    seen: set[str] = set()
    unknown, repeated, no_edits = [], [], []
    for d in decisions.decisions:
        if d.item_id not in by_id:
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
                where=str(decisions_path),
                fix="export the decisions again from this build's preview",
            )
    decided = {d.item_id: d for d in decisions.decisions}
    new_items, edited, rejected, accepted = [], [], [], []
    for item in view.items:
        d = decided.get(item.item_id)
        if d is None or d.decision == "accept":
            new_items.append(item)
            if d is not None:
                accepted.append({"item_id": item.item_id, "comment": d.comment})
        elif d.decision == "reject":
            rejected.append({"item_id": item.item_id, "comment": d.comment})
        else:
            after = _edited(item, d.edits)
            new_items.append(after)
            edited.append(
                {
                    "item_id": item.item_id,
                    "comment": d.comment,
                    "before": {k: _jsonable(getattr(item, k)) for k in EDITABLE},
                    "after": {k: _jsonable(getattr(after, k)) for k in EDITABLE},
                }
            )
    edited_items = [i for i in new_items if i.item_id in {e["item_id"] for e in edited}]
    problems = run_rules(
        edited_items,
        view.samples_by_id,
        view.manifests,
        view.resolve,
        rules=["schema", "options-unique", "answer-in-options", "distractor-related"],
    )
    if problems:
        shown = "; ".join(f"{p.item_id}: [{p.check}] {p.message}" for p in problems[:3])
        raise ReviewError(
            f"{len(problems)} edit(s) make invalid items: {shown}",
            where=str(decisions_path),
            fix="correct the edits in the preview and export again",
        )
    after_id = build_id(new_items)
    rel = f"review/items-{after_id[:16]}.parquet"
    write_items(new_items, out / rel)
    meta_path = out / "build.json"
    meta = json.loads(meta_path.read_text())
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
        "items_before": len(view.items),
        "items_after": len(new_items),
        "accepted": accepted,
        "rejected": rejected,
        "edited": edited,
        "undecided": len(view.items) - len(decided),
        "items_file": rel,
    }
    _atomic_text(meta_path, json.dumps(meta, indent=2) + "\n")
    with open(out / "review" / "audit.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return entry


def _jsonable(value):
    return list(value) if isinstance(value, tuple) else value

"""Score prediction files against a build: which item each reply answers, whether it is
right, and the summaries a benchmark reports (accuracy with bootstrap intervals by task,
subtask, scene, prompt level, source and split; multi-select precision/recall/F1; grounding
IoU and Acc@0.5; EndoBench's category averages; circular accuracy; unparseable share).

Bad files stop the scorer with one line (unknown ids, an item answered twice, a file made for
another build); a build item with no reply counts as wrong and is listed.
"""

from __future__ import annotations

import hashlib
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UsageError
from ..export.common import column_values
from ..export.vlmeval import rotate
from ..geometry import BoxXYXY, iou
from ..media.load import check_any_image
from ..records import Item
from ..vocab import answer_letters
from .answers import PARSERS, choice_letters
from .baselines import option_chance
from .grounding import parse_prediction, summarize
from .predictions import PredictionFile, PredictionRow

GROUPS = ("task", "subtask", "scene", "prompt_level", "source", "split")
BOOTSTRAP = 1000


@dataclass(frozen=True)
class Entry:
    """What scoring needs of one item (the item itself is not kept)."""

    item_id: str
    index: int | None  # row of the vlmeval export (multiple-choice items only)
    kind: str  # "single", "multi" or "grounding"
    options: tuple[str, ...]
    answer: str
    question: str
    answer_bbox: BoxXYXY | None
    coord_format: str | None
    image: str | None  # the image a box answer is drawn on (the last one)
    category: str
    groups: tuple[tuple[str, str], ...]

    def group(self, key: str) -> str:
        return dict(self.groups)[key]

    @property
    def rotations(self) -> int:
        return len(self.options) if self.kind != "grounding" else 1


class BuildEntries:
    """The build's items as :class:`Entry` rows, looked up by item id or export index, and
    the build's fingerprint (a hash of every item's id, options, answer and box). A task is
    multi-select when any of its answers has several letters (as ``baselines`` counts)."""

    def __init__(self, items: Iterable[Item]):
        if iter(items) is items:  # a one-shot iterator; a list or an ItemTable is read twice
            items = list(items)
        tasks, answers = column_values(items, "task"), column_values(items, "answer")
        multi_tasks = {t for t, a in zip(tasks, answers, strict=True) if "," in a}
        self.entries: list[Entry] = []
        digest = hashlib.sha256()
        index = 0
        docs = {"lmms-mcq": 0, "lmms-grounding": 0}  # lmms-eval doc ids: the test split's docs
        self.by_doc: dict[tuple[str, int], Entry] = {}
        for item in items:
            doc = None
            if (item.split or "test") == "test":
                doc = "lmms-mcq" if item.options else "lmms-grounding"
            if item.options:
                kind, at = ("multi" if item.task in multi_tasks else "single"), index
                index += 1
            elif item.answer_bbox is not None:
                kind, at = "grounding", None
            else:
                continue
            groups = tuple((g, str(getattr(item, g) or "-")) for g in GROUPS)
            self.entries.append(
                entry := Entry(
                    item.item_id,
                    at,
                    kind,
                    tuple(item.options),
                    item.answer,
                    item.question,
                    item.answer_bbox,
                    item.coord_format,
                    item.images[-1] if item.images else None,
                    item.category or item.task,
                    groups,
                )
            )
            if doc is not None:
                self.by_doc[(doc, docs[doc])] = entry
                docs[doc] += 1
            digest.update(
                "\x1f".join(
                    [item.item_id, *item.options, item.answer, str(item.answer_bbox)]
                ).encode()
            )
            digest.update(b"\x1e")
        self.fingerprint = digest.hexdigest()[:16]
        self.by_id = {e.item_id: e for e in self.entries}
        self.by_index = {e.index: e for e in self.entries if e.index is not None}


def build_fingerprint(items: Iterable[Item]) -> str:
    """The fingerprint a prediction file may carry (``build_fingerprint``) to name its build."""
    return BuildEntries(items).fingerprint


# -- matching replies to items ---------------------------------------------------------------


def _entry_of(build: BuildEntries, row: PredictionRow) -> Entry | None:
    if row.by == "item_id":
        entry = build.by_id.get(row.key)
    elif row.by == "index":
        entry = build.by_index.get(row.key)
    else:  # an lmms-eval doc id of the mcq or grounding task
        entry = build.by_doc.get((row.by, row.key))
    if entry is None or not 0 <= row.rotation < entry.rotations:
        return None
    return entry


def _check_same_build(build: BuildEntries, found: PredictionFile, row, entry) -> None:
    """A file that carries its build's fingerprint, or an item's answer or question, must
    agree with this build."""
    carried = row.carried
    fix = "score the predictions against the build they were made for"
    fp = carried.get("build_fingerprint")
    if fp and fp != build.fingerprint:
        raise UsageError(
            f"{found.path.name} was made for build {fp}, this build is {build.fingerprint}",
            where=row.where,
            fix=fix,
        )
    if entry is None or entry.kind == "grounding":
        return
    options, answer = rotate(entry.options, entry.answer, row.rotation)
    theirs = carried.get("answer")
    if theirs is not None and theirs.replace(" ", "") != answer.replace(" ", ""):
        raise UsageError(
            f"{found.path.name} is for a different build: item {entry.item_id} "
            f"(rotation {row.rotation}) has answer {answer!r} here and {theirs!r} in the file",
            where=row.where,
            fix=fix,
        )
    question = carried.get("question")
    if question and question.strip() != entry.question.strip():
        raise UsageError(
            f"{found.path.name} is for a different build: item {entry.item_id}'s question differs",
            where=row.where,
            fix=fix,
        )


SHOWN = 5  # unknown ids an error line names; the rest are counted


def _short(key: str | int, limit: int = 60) -> str:
    """An id as an error line quotes it: ``repr``, cut to ``limit`` characters."""
    text = repr(key)
    return text if len(text) <= limit else f"{text[: limit - 12]}...({len(text):,} chars)"


def match(build: BuildEntries, files: Sequence[PredictionFile]) -> dict:
    """``{(item_id, rotation): (row, file)}``, refusing unknown ids and duplicates."""
    matched: dict[tuple[str, int], tuple[PredictionRow, PredictionFile]] = {}
    unknown: list[PredictionRow] = []
    duplicate: list[tuple[PredictionRow, PredictionRow]] = []
    for found in files:
        for row in found.rows:
            entry = _entry_of(build, row)
            _check_same_build(build, found, row, entry)
            if entry is None:
                unknown.append(row)
                continue
            key = (entry.item_id, row.rotation)
            if key in matched:
                duplicate.append((matched[key][0], row))
                continue
            matched[key] = (row, found)
    if unknown:
        first = unknown[0]
        what = {"item_id": "item id", "index": "index"}.get(first.by, "lmms-eval doc_id")
        shown = ", ".join(f"{_short(r.key)} (rotation {r.rotation})" for r in unknown[:SHOWN])
        more = f" and {len(unknown) - SHOWN:,} more" if len(unknown) > SHOWN else ""
        raise UsageError(
            f"{len(unknown):,} prediction(s) name items this build does not have (by {what}: "
            f"{shown}{more})",
            where=first.where,
            fix="score the predictions against the build they were made for",
        )
    if duplicate:
        a, b = duplicate[0]
        raise UsageError(
            f"{len(duplicate)} item(s) answered more than once (first: {_short(a.key)} rotation "
            f"{a.rotation}, at {a.where} and {b.where})",
            where=b.where,
            fix="keep one reply per item (and per rotation)",
        )
    return matched


# -- scoring one reply -----------------------------------------------------------------------


@dataclass
class Outcome:
    """One scored reply (or a missing one)."""

    entry: Entry
    rotation: int
    reply: str | None  # None: no reply
    parsed: str  # letters read ("A", "A,C"), a box as text, or "" when none
    correct: bool  # single: letter right; multi: exact set; grounding: IoU >= 0.5
    f1: tuple[float, float, float] | None = None  # multi: precision, recall, F1
    iou: float | None = None
    note: str = ""  # why this project and the client read the reply differently


def _single(entry, rotation, text, parser: str) -> Outcome:
    options, answer = rotate(entry.options, entry.answer, rotation)
    ours = choice_letters(text, options)
    ours_letter = next(iter(ours)) if len(ours) == 1 else None
    if parser == "medvqa":
        letter = ours_letter
    else:
        letter = PARSERS[parser](text, options)
        letter = None if letter == "Z" else letter
    note = ""
    if (letter == answer) != (ours_letter == answer):
        contained = any(a.lower() in b.lower() for a in options for b in options if a != b)
        note = (
            f"{parser} reads {letter or 'nothing'}, this project reads {ours_letter or 'nothing'}"
            + (" (an option's text lies inside another's)" if contained else "")
        )
    return Outcome(entry, rotation, text, letter or "", letter == answer, note=note)


def _multi(entry, rotation, text, parser: str) -> Outcome:
    options, answer = rotate(entry.options, entry.answer, rotation)
    pred, gold = choice_letters(text, options, multi=True), frozenset(answer_letters(answer))
    tp = len(pred & gold)
    p = tp / len(pred) if pred else 0.0
    r = tp / len(gold) if gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    note = ""
    if parser != "medvqa" and len(gold) > 1 and pred == gold:
        note = f"{parser} reads one letter at most, so it scores this multi-select answer wrong"
    parsed = ",".join(sorted(pred))
    return Outcome(entry, rotation, text, parsed, pred == gold, (p, r, f), note=note)


def _grounding(entry, text, size_of: Callable[[str], tuple[int, int]]) -> Outcome:
    width, height = size_of(entry.image)
    box = None
    if entry.coord_format:
        box = parse_prediction(text, width, height, entry.coord_format)
    if box is None:
        box = parse_prediction(text, width, height, "auto")
    value = iou(box, entry.answer_bbox) if box is not None else 0.0
    parsed = "" if box is None else "[" + ", ".join(f"{v:g}" for v in box) + "]"
    return Outcome(entry, 0, text, parsed, value >= 0.5, iou=value)


def score_reply(entry, rotation, text, parser, size_of) -> Outcome:
    if entry.kind == "grounding":
        return _grounding(entry, text, size_of)
    if entry.kind == "multi":
        return _multi(entry, rotation, text, parser)
    return _single(entry, rotation, text, parser)


# -- summaries -------------------------------------------------------------------------------


def bootstrap_ci(hits: int, n: int, seed: int, label: str, rounds: int = BOOTSTRAP) -> list:
    """95 % percentile bootstrap interval of an accuracy. Resampling ``n`` right/wrong items
    with replacement gives ``Binomial(n, hits/n)`` right ones, drawn here directly (the same
    distribution, without ``rounds * n`` indices); the generator is seeded from ``seed`` and
    the group's label, so an interval does not depend on which other groups are scored."""
    if n == 0:
        return [None, None]
    rng = np.random.default_rng([seed, zlib.crc32(label.encode())])
    draws = rng.binomial(n, hits / n, size=rounds) / n
    low, high = np.percentile(draws, [2.5, 97.5])
    return [float(low), float(high)]


def _accuracy(outcomes: Sequence[Outcome], seed: int, label: str) -> dict:
    n, hits = len(outcomes), sum(o.correct for o in outcomes)
    return {
        "n": n,
        "correct": hits,
        "accuracy": hits / n if n else None,
        "ci95": bootstrap_ci(hits, n, seed, label),
        "chance": (sum(option_chance(len(o.entry.options)) for o in outcomes) / n if n else None),
    }


def _by(outcomes, key: str, seed: int) -> dict:
    groups: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[o.entry.group(key)].append(o)
    return {g: _accuracy(v, seed, f"{key}={g}") for g, v in sorted(groups.items())}


def _circular(outcomes: Sequence[Outcome], seed: int) -> dict:
    """Per item: right only when every rotation is right; plain and circular per task."""
    per_item: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        per_item[o.entry.item_id].append(o)
    by_task: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for rows in per_item.values():
        plain = next(o.correct for o in rows if o.rotation == 0)
        every = len(rows) == rows[0].entry.rotations and all(o.correct for o in rows)
        by_task[rows[0].entry.group("task")].append((plain, every))
        by_task["all"].append((plain, every))

    def row(name, pairs):
        n = len(pairs)
        plain, circ = sum(p for p, _ in pairs), sum(c for _, c in pairs)
        return {
            "n": n,
            "plain": plain / n,
            "circular": circ / n,
            "plain_ci95": bootstrap_ci(plain, n, seed, f"plain:{name}"),
            "circular_ci95": bootstrap_ci(circ, n, seed, f"circular:{name}"),
        }

    return {task: row(task, pairs) for task, pairs in sorted(by_task.items())}


def _multi_summary(outcomes: Sequence[Outcome]) -> dict:
    def mean(rows):
        n = len(rows)
        return {
            "n": n,
            "precision": sum(o.f1[0] for o in rows) / n,
            "recall": sum(o.f1[1] for o in rows) / n,
            "f1": sum(o.f1[2] for o in rows) / n,
            "exact": sum(o.correct for o in rows) / n,
            "chance_exact": sum(option_chance(len(o.entry.options), True) for o in rows) / n,
        }

    by_task: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_task[o.entry.group("task")].append(o)
    return {"all": mean(outcomes), "by_task": {t: mean(v) for t, v in sorted(by_task.items())}}


def _grounding_summary(outcomes: Sequence[Outcome]) -> dict:
    by_task: dict[str, list[float]] = defaultdict(list)
    for o in outcomes:
        by_task[o.entry.group("task")].append(o.iou)
    tasks = {t: summarize(v) for t, v in sorted(by_task.items())}
    return {
        "all": summarize([o.iou for o in outcomes]),
        "by_task": tasks,
        # MedSG-Bench's headline: the mean over tasks of each task's number
        "task_average": {
            k: sum(t[k] for t in tasks.values()) / len(tasks) for k in ("mean_iou", "acc@0.5")
        },
    }


def _categories(outcomes: Sequence[Outcome]) -> dict:
    """EndoBench's tables: per category, the accuracy over its items and the mean of its
    tasks' accuracies; overall, both again (EndoBench's own "Avg" matches neither exactly)."""
    tasks: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for o in outcomes:
        tasks[(o.entry.category, o.entry.group("task"))].append(o.correct)
    cats: dict[str, dict] = {}
    for (cat, task), hits in sorted(tasks.items()):
        c = cats.setdefault(cat, {"tasks": {}, "n": 0, "correct": 0})
        c["tasks"][task] = sum(hits) / len(hits)
        c["n"] += len(hits)
        c["correct"] += sum(hits)
    for c in cats.values():
        c["item_average"] = c["correct"] / c["n"]
        c["task_average"] = sum(c["tasks"].values()) / len(c["tasks"])
    accs = [sum(h) / len(h) for h in tasks.values()]
    return {
        "categories": cats,
        "task_average": sum(accs) / len(accs) if accs else None,
        "item_average": (
            sum(sum(h) for h in tasks.values()) / sum(len(h) for h in tasks.values())
            if tasks
            else None
        ),
    }


def _unparseable(outcomes: Sequence[Outcome]) -> dict:
    out = {}
    for kind in ("single", "multi", "grounding"):
        rows = [o for o in outcomes if o.entry.kind == kind and o.reply is not None]
        if rows:
            bad = sum(not o.parsed for o in rows)
            out[kind] = {"n": len(rows), "unparseable": bad, "share": bad / len(rows)}
    rows = [o for o in outcomes if o.reply is not None]
    out["all"] = {
        "n": len(rows),
        "unparseable": sum(not o.parsed for o in rows),
        "share": sum(not o.parsed for o in rows) / len(rows) if rows else 0.0,
    }
    return out


def _parser_for(client: str, parser: str) -> str:
    if parser != "auto":
        if parser not in (*PARSERS, "medvqa"):
            raise UsageError(
                f"unknown parser {parser!r}", fix="use auto, medvqa, vlmeval or lmms-eval"
            )
        return parser
    return client if client in PARSERS else "medvqa"


def _kind(entry: Entry) -> str:
    return "mcq" if entry.kind != "grounding" else "grounding"


@dataclass
class _Scored:
    outcomes: list[Outcome]
    missing: list[str]
    kinds: set[str]  # "mcq" / "grounding": the kinds the files answer
    client_agree: tuple[int, int]  # lmms-eval's per-sample accuracy: (agreeing, compared)


def _score_all(build, matched, parsers, size_of) -> _Scored:
    """Every expected reply scored: each item of a kind the files answer (each rotation when
    any reply is a rotation); a reply that is not there is a wrong, listed outcome."""
    kinds = {_kind(build.by_id[item_id]) for item_id, _ in matched}
    circular = any(rot > 0 for _, rot in matched)
    outcomes, missing, agree, compared = [], [], 0, 0
    for entry in build.entries:
        if _kind(entry) not in kinds:
            continue
        for rotation in range(entry.rotations if circular and _kind(entry) == "mcq" else 1):
            hit = matched.get((entry.item_id, rotation))
            if hit is None:
                missing.append(entry.item_id if rotation == 0 else f"{entry.item_id}@{rotation}")
                outcomes.append(Outcome(entry, rotation, None, "", False, (0.0, 0.0, 0.0), 0.0))
                continue
            row, found = hit
            o = score_reply(entry, rotation, row.text, parsers[found.path.name], size_of)
            outcomes.append(o)
            theirs = row.carried.get("client_accuracy")
            if theirs is not None and entry.kind == "single":
                agree, compared = agree + (float(o.correct) == theirs), compared + 1
    return _Scored(outcomes, missing, kinds, (agree, compared))


def score_predictions(
    build: BuildEntries,
    files: Sequence[PredictionFile],
    size_of: Callable[[str], tuple[int, int]],
    *,
    parser: str = "auto",
    seed: int = 0,
) -> dict:
    """The whole score of ``files`` (one model's replies) on ``build``: a JSON-ready dict."""
    parsers = {f.path.name: _parser_for(f.client, parser) for f in files}
    scored = _score_all(build, match(build, files), parsers, size_of)
    outcomes = scored.outcomes
    plain = [o for o in outcomes if o.rotation == 0]
    single = [o for o in plain if o.entry.kind == "single"]
    multi = [o for o in plain if o.entry.kind == "multi"]
    ground = [o for o in plain if o.entry.kind == "grounding"]
    present = {_kind(e) for e in build.entries}
    agree, compared = scored.client_agree
    return {
        "build_fingerprint": build.fingerprint,
        "predictions": [
            {
                "file": str(f.path),
                "client": f.client,
                "rows": len(f.rows),
                "parser": parsers[f.path.name],
            }
            for f in files
        ],
        "seed": seed,
        "bootstrap_rounds": BOOTSTRAP,
        "single_choice": (
            {"all": _accuracy(single, seed, "all"), "by": {k: _by(single, k, seed) for k in GROUPS}}
            if single
            else None
        ),
        "multi_select": _multi_summary(multi) if multi else None,
        "grounding": _grounding_summary(ground) if ground else None,
        "circular": (
            _circular([o for o in outcomes if o.entry.kind != "grounding"], seed)
            if any(o.rotation for o in outcomes)
            else None
        ),
        "categories": _categories(single) if single else None,
        "unparseable": _unparseable(outcomes),
        "missing": scored.missing,
        "not_scored": sorted(
            {"mcq": "multiple-choice", "grounding": "grounding"}[k] for k in present - scored.kinds
        ),
        "client_per_sample_agreement": {"agree": agree, "n": compared} if compared else None,
        "differences": [
            {"item_id": o.entry.item_id, "rotation": o.rotation, "reply": o.reply, "why": o.note}
            for o in outcomes
            if o.note
        ],
    }


def image_size_reader(resolve: Callable[[str], Path]) -> Callable[[str], tuple[int, int]]:
    """``ref -> (width, height)`` read from each image's header once."""
    sizes: dict[str, tuple[int, int]] = {}

    def size_of(ref: str) -> tuple[int, int]:
        if ref not in sizes:
            sizes[ref] = check_any_image(resolve(ref))
        return sizes[ref]

    return size_of


__all__ = [
    "BuildEntries",
    "Entry",
    "Outcome",
    "bootstrap_ci",
    "build_fingerprint",
    "image_size_reader",
    "match",
    "score_predictions",
    "score_reply",
]

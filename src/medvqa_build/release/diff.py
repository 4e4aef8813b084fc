"""What changed between two releases of one benchmark, as one JSON-ready dict: the items added,
removed and changed (by ``item_id``, counted per task and per source), the shifts in the
distributions a reader of the card sees, and the recipe, version and stage differences that
explain them. Counts add up: ``old = removed + changed + unchanged`` and
``new = added + changed + unchanged``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from ..errors import UsageError
from ..vocab import answer_letters
from .snapshot import WITHHELD, ItemDigest, Release

# the fields of an item whose change a diff reports, as its JSON names them
FIELDS: dict[str, Callable[[ItemDigest], object]] = {
    "question": lambda d: d.question,
    "options": lambda d: d.options,
    "answer": lambda d: d.answer,
    "images": lambda d: d.images,  # not compared where one side withheld them
    "split": lambda d: d.split,
}
TOP_ANSWERS = 10  # answer contents listed per task, largest shifts first


def diff_releases(old: Release, new: Release, *, old_label: str = "", new_label: str = "") -> dict:
    """The changes from ``old`` to ``new``. Two releases that share no item id and no
    benchmark name are different benchmarks: a :class:`UsageError`."""
    shared_names = old.benchmarks & new.benchmarks
    if old.items and new.items and not shared_names and not old.items.keys() & new.items.keys():
        raise UsageError(
            f"{old_label or old.path} ({', '.join(sorted(old.benchmarks))}) and "
            f"{new_label or new.path} ({', '.join(sorted(new.benchmarks))}) are different "
            "benchmarks: no item id and no benchmark name in common",
            fix="diff two releases of the same benchmark",
        )
    removed = sorted(old.items.keys() - new.items.keys())
    added = sorted(new.items.keys() - old.items.keys())
    changed: dict[str, list[str]] = {}
    unchanged = withheld = 0
    for item_id in sorted(old.items.keys() & new.items.keys()):
        a, b = old.items[item_id], new.items[item_id]
        fields = [name for name, get in FIELDS.items() if get(a) != get(b)]
        if WITHHELD in (a.images, b.images) and "images" in fields:
            fields.remove("images")
            withheld += 1
        if fields:
            changed[item_id] = fields
        else:
            unchanged += 1
    result = {
        "old": _side(old, old_label),
        "new": _side(new, new_label),
        "items": {
            "old": len(old.items),
            "new": len(new.items),
            "added": len(added),
            "removed": len(removed),
            "changed": len(changed),
            "unchanged": unchanged,
            "changed_fields": dict(
                sorted(Counter(f for fs in changed.values() for f in fs).items())
            ),
            "same_content_new_id": _same_content(old, new, removed, added),
            "images_not_compared": withheld,
        },
        "per_task": _per(lambda d: d.task, old, new, added, removed, changed),
        "per_source": _per(lambda d: d.source, old, new, added, removed, changed),
        "added": [_entry(i, new.items[i]) for i in added],
        "removed": [_entry(i, old.items[i]) for i in removed],
        "changed": [_entry(i, new.items[i], fields=f) for i, f in changed.items()],
        "distributions": _distributions(old, new),
        "recipe": recipe_changes(old.recipe, new.recipe),
        "versions": (
            _dict_changes(old.versions, new.versions) if old.versions and new.versions else None
        ),
        "stages": _stage_changes(old.stages, new.stages),
    }
    return result


def _entry(item_id: str, d: ItemDigest, **extra) -> dict:
    return {"item_id": item_id, "task": d.task, "source": d.source, **extra}


def _side(release: Release, label: str) -> dict:
    return {
        "path": str(release.path),
        "label": label or release.path.name,
        "kind": release.kind,
        "benchmarks": sorted(release.benchmarks),
        "items": len(release.items),
    }


def _same_content(old: Release, new: Release, removed: list[str], added: list[str]) -> int:
    """How many removed items come back under a new id with the same task, prompt level,
    samples and truth (an item's id hashes the recipe's seed and benchmark name, so a new
    seed renames every item; this says how many are the same questions on the same images)."""

    def key(d: ItemDigest) -> tuple:
        return (d.task, d.subtask, d.prompt_level, d.sample_ids, d.gt)

    gone = Counter(key(old.items[i]) for i in removed)
    back = Counter(key(new.items[i]) for i in added)
    return sum((gone & back).values())


def _per(
    group: Callable[[ItemDigest], str],
    old: Release,
    new: Release,
    added: Iterable[str],
    removed: Iterable[str],
    changed: dict[str, list[str]],
) -> dict[str, dict[str, int]]:
    """Per task (or source): items added, removed, changed and unchanged; old and new totals."""
    out: dict[str, Counter] = {}

    def bump(key: str, what: str) -> None:
        out.setdefault(key, Counter())[what] += 1

    for d in old.items.values():
        bump(group(d), "old")
    for item_id, d in new.items.items():
        bump(group(d), "new")
        if item_id in changed:
            bump(group(d), "changed")
        elif item_id in old.items:
            bump(group(d), "unchanged")
    for item_id in added:
        bump(group(new.items[item_id]), "added")
    for item_id in removed:
        bump(group(old.items[item_id]), "removed")
    keys = ("old", "new", "added", "removed", "changed", "unchanged")
    return {k: {w: out[k][w] for w in keys} for k in sorted(out)}


def _counts(items: Iterable[ItemDigest], key: Callable[[ItemDigest], str]) -> Counter:
    return Counter(key(d) for d in items)


def _shift(a: Counter, b: Counter) -> dict[str, dict[str, int]]:
    return {k: {"old": a[k], "new": b[k]} for k in sorted(a.keys() | b.keys())}


def _distributions(old: Release, new: Release) -> dict:
    dims = {
        "task": lambda d: d.task,
        "source": lambda d: d.source,
        "prompt_level": lambda d: d.prompt_level,
        "split": lambda d: d.split,
    }
    out: dict = {
        name: _shift(_counts(old.items.values(), f), _counts(new.items.values(), f))
        for name, f in dims.items()
    }
    out["answer_letters"] = _letters(old, new)
    out["answer_content"] = _answer_content(old, new)
    out["blind_accuracy"] = _blind(old.blind, new.blind)
    return out


def _letters(old: Release, new: Release) -> dict[str, dict[str, dict[str, int]]]:
    """Per task with options, how often each letter is the answer, in each release."""
    tallies: tuple[dict[str, Counter], dict[str, Counter]] = ({}, {})
    for side, release in zip(tallies, (old, new), strict=True):
        for d in release.items.values():
            if d.options:
                side.setdefault(d.task, Counter()).update(answer_letters(d.answer))
    a, b = tallies
    return {
        t: _shift(a.get(t, Counter()), b.get(t, Counter())) for t in sorted(a.keys() | b.keys())
    }


def _answer_content(old: Release, new: Release) -> dict[str, list[dict]]:
    """Per task, the correct answers whose share moved most (at most :data:`TOP_ANSWERS`)."""
    a_all: dict[str, Counter] = {}
    b_all: dict[str, Counter] = {}
    for d in old.items.values():
        a_all.setdefault(d.task, Counter())[d.answer_content] += 1
    for d in new.items.values():
        b_all.setdefault(d.task, Counter())[d.answer_content] += 1
    out = {}
    for task in sorted(a_all.keys() | b_all.keys()):
        a, b = a_all.get(task, Counter()), b_all.get(task, Counter())
        na, nb = sum(a.values()) or 1, sum(b.values()) or 1
        rows = [
            {"answer": k, "old": a[k], "new": b[k], "share_change": b[k] / nb - a[k] / na}
            for k in a.keys() | b.keys()
        ]
        rows = [r for r in rows if r["old"] != r["new"]]
        rows.sort(key=lambda r: (-abs(r["share_change"]), r["answer"]))
        if rows:
            out[task] = [{**r, "share_change": round(r["share_change"], 4)} for r in rows][
                :TOP_ANSWERS
            ]
    return out


def _blind(old: dict | None, new: dict | None) -> dict[str, dict] | None:
    """Per task both audits scored: old and new blind accuracy and chance."""
    if not old or not new:
        return None
    return {
        t: {
            "old": old[t]["accuracy"],
            "new": new[t]["accuracy"],
            "chance": new[t]["chance"],
        }
        for t in sorted(old.keys() & new.keys())
    }


def _flatten(node, prefix: str = "") -> dict[str, object]:
    """Recipe keys as paths; a list of mappings that each have a unique ``name`` (tasks) or
    ``id`` (sources) is keyed by it (``tasks[lesion-type].quota``), so dropping one entry is
    one change, not a shift of every later index."""
    out: dict[str, object] = {}
    if isinstance(node, dict):
        for k, v in node.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(node, list) and node and all(isinstance(v, dict) for v in node):
        key = next(
            (
                k
                for k in ("name", "id")
                if all(k in v for v in node) and len({str(v[k]) for v in node}) == len(node)
            ),
            None,
        )
        for n, v in enumerate(node):
            out.update(_flatten(v, f"{prefix}[{v[key] if key else n}]"))
    else:
        out[prefix] = node
    return out


def recipe_changes(old: dict | None, new: dict | None) -> list[dict] | None:
    """Every recipe key whose value differs: ``{key, old, new}`` (a missing side is None);
    None when either release carries no recipe."""
    if old is None or new is None:
        return None
    a, b = _flatten(old), _flatten(new)
    out = []
    for key in sorted(a.keys() | b.keys()):
        if a.get(key, _MISSING) != b.get(key, _MISSING):
            out.append({"key": key, "old": a.get(key), "new": b.get(key)})
    return _group_entries(out, a, b)


_MISSING = object()


def _group_entries(changes: list[dict], a: dict, b: dict) -> list[dict]:
    """A list entry present on one side only (``sources[kvasir-seg]``) as one change."""
    out, done = [], set()
    for c in changes:
        head = c["key"].split("]", 1)[0] + "]" if "[" in c["key"] else None
        if head is not None:
            in_a = any(k.startswith(head) for k in a)
            in_b = any(k.startswith(head) for k in b)
            if in_a != in_b:
                if head not in done:
                    done.add(head)
                    out.append(
                        {
                            "key": head,
                            "old": "(present)" if in_a else None,
                            "new": "(present)" if in_b else None,
                        }
                    )
                continue
        out.append(c)
    return out


def _dict_changes(old: dict[str, str], new: dict[str, str]) -> list[dict]:
    return [
        {"key": k, "old": old.get(k), "new": new.get(k)}
        for k in sorted(old.keys() | new.keys())
        if old.get(k) != new.get(k)
    ]


def _stage_changes(old: dict | None, new: dict | None) -> dict[str, dict[str, int]] | None:
    """Two builds: per stage, how many output folders both used (``same``: the same inputs and
    code), only the new one used (``rebuilt``) and only the old one used (``dropped``); None
    unless both sides are build folders."""
    if old is None or new is None:
        return None
    out = {}
    for stage in sorted(old.keys() | new.keys()):
        a, b = set(old.get(stage, ())), set(new.get(stage, ()))
        out[stage] = {"same": len(a & b), "rebuilt": len(b - a), "dropped": len(a - b)}
    return out

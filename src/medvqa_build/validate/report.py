"""Re-checking a finished build and writing the validation report (JSON + Markdown)."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..images import RENDER_SCHEME, source_ref
from ..records import Item, Sample
from .checks import Problem
from .rules import RULES, run_rules

SHOWN_PER_RULE = 50  # Markdown lists this many problems per rule; the JSON has all


@dataclass
class BuildView:
    """A finished build as the checks and the review gallery read it."""

    build_dir: Path
    items: list[Item]
    resolve: Callable[[str], Path]
    recipe: Any
    samples_by_id: dict[str, Sample]
    manifests: dict[str, Any]
    duplicate_groups: list[list[str]]

    def clean_ref(self, item: Item, index: int = 0) -> str | None:
        """The reference of the image without any drawn prompt, where there is a file for it."""
        return clean_ref(item, self.samples_by_id, index)


def clean_ref(item: Item, samples_by_id: Mapping[str, Sample], index: int = 0) -> str | None:
    """The reference of the item's ``index``-th image without any drawn prompt, where there is
    a file for it; a rendered image's sample is looked up in ``samples_by_id``."""
    ref = item.images[index] if index < len(item.images) else None
    if ref is not None and not ref.startswith(RENDER_SCHEME):
        return ref
    sample = samples_by_id.get(item.sample_ids[index]) if index < len(item.sample_ids) else None
    if sample is None or sample.slice is not None or not _is_image(sample.image):
        return None  # a video frame or volume slice has no file of its own
    return source_ref(sample.source, sample.image)


def rendered_sample_ids(items: Iterable[Item]) -> set[str]:
    """The ids :func:`clean_ref` looks up for ``items``' first images."""
    return {
        i.sample_ids[0]
        for i in items
        if i.images and i.sample_ids and i.images[0].startswith(RENDER_SCHEME)
    }


def _is_image(path: str) -> bool:
    from ..curate.phash import is_image_file

    return is_image_file(path)


def _stage_dirs(out: Path, stage: str) -> list[Path]:
    """Stage folders of the build: those its report names, else every one on disk."""
    report = out / "report.json"
    if report.is_file():
        try:
            stages = json.loads(report.read_text()).get("stages", [])
            named = [out / s["path"] for s in stages if s.get("stage") == stage]
            if named and all(p.is_dir() for p in named):
                return named
        except (ValueError, KeyError, TypeError):
            pass
    return sorted(p for p in (out / "stages" / stage).glob("*") if p.is_dir())


def sample_paths(out: Path) -> list[Path]:
    """The convert stage's sample files of a build, in stage order."""
    return [
        d / "samples.parquet"
        for d in _stage_dirs(out, "convert")
        if (d / "samples.parquet").is_file()
    ]


def manifests_of(recipe) -> dict[str, Any]:
    from ..sources import get_source

    manifests = {}
    for spec in recipe.sources:
        try:
            manifests[spec.id] = get_source(spec.id).manifest
        except Exception:  # noqa: BLE001 - a source removed since the build: check without it
            continue
    return manifests


def _duplicate_groups(out: Path) -> list[list[str]]:
    groups: list[list[str]] = []
    for d in _stage_dirs(out, "curate"):
        if not (d / "curate.json").is_file():
            continue
        data = json.loads((d / "curate.json").read_text())
        groups += [g["members"] for g in (data.get("dedup") or {}).get("duplicate_groups", [])]
    return groups


def open_build_view(build_dir: str | os.PathLike) -> BuildView:
    """Items, samples, manifests and duplicate groups of a build directory (all in memory:
    for review and for tests; :func:`validate_build` reads the build as tables instead)."""
    from ..pipeline import open_build
    from ..schema import read_samples

    out = Path(build_dir).resolve()
    items, resolve, recipe = open_build(out)
    samples: dict[str, Sample] = {}
    for path in sample_paths(out):
        samples.update((s.sample_id, s) for s in read_samples(path))
    items = items if isinstance(items, list) else list(items)
    return BuildView(
        out, items, resolve, recipe, samples, manifests_of(recipe), _duplicate_groups(out)
    )


def validate_build(
    build_dir: str | os.PathLike,
    *,
    letter_tolerance: float = 0.1,
    report_dir: str | os.PathLike | None = None,
) -> list[Problem]:
    """Run every rule on a build; with ``report_dir`` write ``validation.json``/``.md`` there.

    Samples are read from the convert stage's tables, a window of items' worth at a time;
    items come as :func:`~medvqa_build.pipeline.open_build` gives them (a table or a list).
    """
    from ..pipeline import open_build
    from ..tables import SampleTable

    out = Path(build_dir).resolve()
    items, resolve, recipe = open_build(out)
    # reversed: where two stage folders hold one id, the later wins, as in open_build_view
    samples = SampleTable(reversed(sample_paths(out)))
    problems = run_rules(
        items,
        samples,
        manifests_of(recipe),
        resolve,
        letter_tolerance=letter_tolerance,
        duplicate_groups=_duplicate_groups(out),
    )
    if report_dir is not None:
        d = Path(report_dir)
        d.mkdir(parents=True, exist_ok=True)
        write_validation_report(
            problems, d / "validation.json", d / "validation.md", items_checked=len(items)
        )
    return problems


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_validation_report(
    problems: Sequence[Problem],
    path_json: str | os.PathLike,
    path_md: str | os.PathLike,
    *,
    items_checked: int | None = None,
) -> dict:
    """Write the problems grouped by rule; returns the JSON document.

    Every rule is listed with its meaning and count (0 included), so the report also says
    what was checked. Problems whose ``check`` is no rule of :data:`RULES` (e.g. the render
    stage's ``alignment``) are counted under their own id.
    """
    counts = Counter(p.check for p in problems)
    known = {r.id: r.message for r in RULES}
    extra = {
        "alignment": "rendered pixels differ from the clean image only where the recorded "
        "prompt geometry says (checked by the render stage)"
    }
    ids = list(known) + sorted(set(counts) - set(known))
    doc = {
        "items_checked": items_checked,
        "problems": len(problems),
        "failed": bool(problems),
        "rules": [
            {"id": i, "message": known.get(i) or extra.get(i, ""), "problems": counts.get(i, 0)}
            for i in ids
        ],
        "items_with_problems": len({p.item_id for p in problems}),
        "list": [p.to_dict() for p in problems],
    }
    _write_atomic(Path(path_json), json.dumps(doc, indent=2) + "\n")
    status = "FAILED" if problems else "passed"
    lines = [
        "# Validation report",
        "",
        f"{items_checked if items_checked is not None else '?'} items checked, "
        f"{len(problems)} problem(s): **{status}**.",
        "",
        "| rule | meaning | problems |",
        "|---|---|---|",
    ]
    lines += [f"| `{r['id']}` | {r['message']} | {r['problems']} |" for r in doc["rules"]]
    for rule in doc["rules"]:
        mine = [p for p in problems if p.check == rule["id"]]
        if not mine:
            continue
        lines += ["", f"## `{rule['id']}` ({len(mine)})", ""]
        lines += [f"- `{p.item_id}`: {p.message}" for p in mine[:SHOWN_PER_RULE]]
        if len(mine) > SHOWN_PER_RULE:
            lines.append(
                f"- ... and {len(mine) - SHOWN_PER_RULE} more (see {Path(path_json).name})"
            )
    _write_atomic(Path(path_md), "\n".join(lines) + "\n")
    return doc


__all__ = ["BuildView", "open_build_view", "validate_build", "write_validation_report"]

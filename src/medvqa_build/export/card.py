"""The dataset card (README.md): what is inside, where it came from, under which terms."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import yaml

from .. import __version__
from ..manifest import SourceManifest
from ..records import Item
from ..validate import letter_histogram


def _table(title: str, counts: Counter) -> list[str]:
    lines = [f"| {title} | items |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(counts.items())]
    return lines + [""]


def dataset_card(
    items: Sequence[Item],
    manifests: dict[str, SourceManifest],
    recipe_yaml: str,
    name: str,
    configs: list[dict],
    validation: dict,
) -> str:
    used = sorted({i.source for i in items})
    header = {
        "pretty_name": name,
        "license": "other",
        "task_categories": ["visual-question-answering", "multiple-choice"],
        "tags": ["medical", "benchmark", "medvqa_build"],
        "configs": configs,
    }
    lines = ["---", yaml.safe_dump(header, sort_keys=False).rstrip(), "---", "", f"# {name}", ""]
    lines += [
        f"Built with medvqa_build {__version__} from the recipe below: {len(items)} items from "
        f"{len(used)} source(s). Every item keeps its clean source image reference "
        "(`sample_ids`) and exactly what was drawn on it (`prompt_geometry`).",
        "",
    ]
    if validation.get("failed"):
        lines += [
            f"> **Warning:** this build failed validation ({validation.get('problems', 0)} problems)"
            " and was exported with --force.",
            "",
        ]
    lines += ["## Contents", ""]
    lines += _table("task", Counter(i.task for i in items))
    lines += _table("scene", Counter(i.scene or "-" for i in items))
    lines += _table("source", Counter(i.source for i in items))
    lines += _table("split", Counter(i.split or "-" for i in items))
    lines += ["## Answer letters per task", "", "| task | letters |", "|---|---|"]
    for task, hist in letter_histogram(items).items():
        lines.append(f"| {task} | {', '.join(f'{k}: {v}' for k, v in hist.items())} |")
    lines += ["", "## Sources, licences and citations", ""]
    lines.append("Each source keeps its owners' terms; use of this benchmark is bound by all of them.")
    lines.append("")
    for sid in used:
        m = manifests[sid]
        lines += [
            f"### {m.title} (`{sid}`)",
            "",
            f"- Homepage: {m.homepage}",
            f"- Licence: {m.licence}",
            f"- Access: {m.access} — {m.access_terms}",
            "",
            "```bibtex",
            m.citation.rstrip(),
            "```",
            "",
        ]
    lines += ["## How it was built", "", "```yaml", recipe_yaml.rstrip(), "```", ""]
    return "\n".join(lines)

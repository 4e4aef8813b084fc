"""The dataset card (README.md): what is inside, where it came from, under which terms, how it
was built, and how a random guesser would score."""

from __future__ import annotations

import importlib.metadata
import platform
import re
from collections import Counter
from collections.abc import Sequence

import yaml

from .. import __version__
from ..manifest import SourceManifest
from ..records import Item
from ..validate import letter_histogram
from .common import is_grounding


class _NoAliasDumper(yaml.SafeDumper):
    """The Hub's YAML reader is not PyYAML: repeat shared blocks instead of ``&id001`` anchors."""

    def ignore_aliases(self, data) -> bool:
        return True


LIBRARIES = ("datasets", "huggingface_hub", "pyarrow", "numpy", "opencv-python-headless", "pillow")


def _table(title: str, counts: Counter) -> list[str]:
    lines = [f"| {title} | items |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(counts.items())]
    return lines + [""]


def _cross_table(items: Sequence[Item], row_key, col_key, row_title: str) -> list[str]:
    cols = sorted({col_key(i) for i in items})
    counts = Counter((row_key(i), col_key(i)) for i in items)
    lines = [f"| {row_title} | " + " | ".join(cols) + " | total |", "|---" * (len(cols) + 2) + "|"]
    for row in sorted({row_key(i) for i in items}):
        values = [counts[(row, c)] for c in cols]
        lines.append(f"| {row} | " + " | ".join(str(v) for v in values) + f" | {sum(values)} |")
    return lines + [""]


def random_baselines(items: Sequence[Item]) -> dict[str, float | None]:
    """Per task, the expected accuracy of a uniform guess (multi-select: one of the 2^n - 1
    non-empty subsets); ``None`` for a task of open box answers, where it is not defined."""
    from ..baselines import item_chance, multi_select_tasks

    per: dict[str, list[float]] = {}
    multi = multi_select_tasks(items)
    for item in items:
        per.setdefault(item.task, [])
        if item.options:
            per[item.task].append(item_chance(item, item.task in multi))
    return {t: (sum(v) / len(v) if v else None) for t, v in sorted(per.items())}


def _versions() -> dict[str, str]:
    out = {"medvqa_build": __version__, "python": platform.python_version()}
    for lib in LIBRARIES:
        try:
            out[lib] = importlib.metadata.version(lib)
        except importlib.metadata.PackageNotFoundError:
            out[lib] = "not installed"
    return out


def _embedders(recipe_yaml: str) -> list[str]:
    """Embedder names anywhere in the recipe (keys ``embedder``/``model``/``encoder``)."""
    found: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("embedder", "model", "encoder") and isinstance(value, str | dict):
                    found.append(value if isinstance(value, str) else yaml.safe_dump(value).strip())
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load(recipe_yaml) or {})
    return sorted(set(found))


def _licence_slug(licences: list[str]) -> str:
    text = licences[0] if len(licences) == 1 else "multiple-licences"
    return re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-") or "other"


def dataset_card(
    items: Sequence[Item],
    manifests: dict[str, SourceManifest],
    recipe_yaml: str,
    name: str,
    configs: list[dict],
    validation: dict,
    dataset_info: list[dict] | None = None,
    plots: Sequence[str] = (),
    config_items: dict[str, int] | None = None,
) -> str:
    used = sorted({i.source for i in items})
    licences = sorted({manifests[s].licence for s in used})
    header = {
        "pretty_name": name,
        "license": "other",
        "license_name": _licence_slug(licences),
        "task_categories": ["visual-question-answering", "multiple-choice"],
        "tags": ["medical", "benchmark", "medvqa_build"],
        "configs": configs,
    }
    if dataset_info:
        header["dataset_info"] = dataset_info
    recipe = yaml.safe_load(recipe_yaml) or {}
    lines = [
        "---",
        yaml.dump(header, Dumper=_NoAliasDumper, sort_keys=False, allow_unicode=True).rstrip(),
        "---",
        "",
        f"# {name}",
        "",
    ]
    lines += [
        f"Built with medvqa_build {__version__} from the recipe below: {len(items)} items from "
        f"{len(used)} source(s). Every item keeps its clean source image reference "
        "(`sample_ids`) and exactly what was drawn on it (`prompt_geometry`).",
        "",
    ]
    if validation.get("failed"):
        lines += [
            "> **Warning:** this build failed validation "
            f"({validation.get('problems', 0)} problems) and was exported with --force.",
            "",
        ]
    lines += [
        "## Licences",
        "",
        "Each source keeps its owners' terms; use of this benchmark is bound by all of them:",
        "",
    ]
    lines += [f"- `{s}`: {manifests[s].licence}" for s in used] + [""]
    lines += ["## Configs", "", "| config | items | splits |", "|---|---|---|"]
    for cfg in configs:
        n = (config_items or {}).get(cfg["config_name"], len(items))
        splits = ", ".join(d["split"] for d in cfg["data_files"])
        lines.append(f"| `{cfg['config_name']}` | {n} | {splits} |")
    lines += [
        "",
        "```python",
        "from datasets import load_dataset",
        f'ds = load_dataset("<repo or folder>", "{configs[0]["config_name"]}")',
        "```",
        "",
    ]
    lines += ["## Contents", ""]
    lines += _cross_table(items, lambda i: i.task, lambda i: i.split or "-", "task \\ split")
    lines += _table("scene", Counter(i.scene or "-" for i in items))
    lines += _table("source", Counter(i.source for i in items))
    lines += _table("split", Counter(i.split or "-" for i in items))
    lines += _table("prompt level", Counter(i.prompt_level for i in items))
    lines += ["## Answer letters per task", "", "| task | letters |", "|---|---|"]
    for task, hist in letter_histogram([i for i in items if not is_grounding(i)]).items():
        lines.append(f"| {task} | {', '.join(f'{k}: {v}' for k, v in hist.items())} |")
    lines += [
        "",
        "## Random baselines",
        "",
        "Expected accuracy of a uniform guess (mean of 1/n_options over the task's items).",
        "",
        "| task | random accuracy |",
        "|---|---|",
    ]
    for task, value in random_baselines(items).items():
        lines.append(f"| {task} | {'-' if value is None else f'{100 * value:.2f}%'} |")
    lines += [""]
    if plots:
        lines += ["## Distributions", ""] + [f"![{p}](assets/{p})" for p in plots] + [""]
    lines += ["## Sources and citations", ""]
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
    embedders = _embedders(recipe_yaml)
    lines += [
        "## How it was built",
        "",
        f"- Recipe: `{recipe.get('name', '?')}`, benchmark `{recipe.get('benchmark', '?')}`, "
        f"seed {recipe.get('seed', 0)}",
        f"- Embedder: {', '.join(embedders) if embedders else 'none (label-pool negatives)'}",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in _versions().items()),
        "",
        "```yaml",
        recipe_yaml.rstrip(),
        "```",
        "",
    ]
    return "\n".join(lines)

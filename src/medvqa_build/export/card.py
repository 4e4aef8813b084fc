"""The dataset card (README.md): what is inside, where it came from, under which terms, how it
was built, and how a random guesser would score.

Everything the card and its plots say about the items is gathered in one pass into
:class:`CardStats` (counters, a few bytes an item), so the items are never held at once.
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

import yaml

from .._version import __version__
from ..curate.answer_spread import AnswerTally, spread_table
from ..licences import combined_redistribution, size_category
from ..manifest import SourceManifest
from ..markdown import fenced, md_cell, md_text
from ..records import Item
from ..validate.blind import blind_table
from ..vocab import answer_letters, option_chance
from .common import is_grounding


class _NoAliasDumper(yaml.SafeDumper):
    """The Hub's YAML reader is not PyYAML: repeat shared blocks instead of ``&id001`` anchors."""

    def ignore_aliases(self, data) -> bool:
        return True


LIBRARIES = ("datasets", "huggingface_hub", "pyarrow", "numpy", "opencv-python-headless", "pillow")


class CardStats:
    """What the card and its plots count over the items, gathered one item at a time."""

    def __init__(self, items: Iterable[Item] = ()):
        self.total = 0
        self.sources: set[str] = set()
        self.task_split: Counter = Counter()  # (task, split or "-")
        self.scene: Counter = Counter()
        self.source: Counter = Counter()
        self.split: Counter = Counter()
        self.prompt_level: Counter = Counter()
        self.task: Counter = Counter()
        # answer letters per task of the items that are not box answers (the card's table)
        self.card_letters: defaultdict[str, Counter] = defaultdict(Counter)
        # answer letters per task of the MCQ items, every task listed (the plot)
        self.plot_letters: dict[str, Counter] = {}
        # per task, the option count of each MCQ item in order (the random baseline's mean)
        self.n_options: dict[str, array] = {}
        self.multi_select: set[str] = set()
        self.with_options = 0  # items answered by picking options (the multiple-choice tag)
        self.answers = AnswerTally()  # per task, how often each answer text is the right one
        for item in items:
            self.add(item)

    def add(self, item: Item) -> None:
        self.total += 1
        split = item.split or "-"
        self.sources.add(item.source)
        self.task_split[(item.task, split)] += 1
        self.scene[item.scene or "-"] += 1
        self.source[item.source] += 1
        self.split[split] += 1
        self.prompt_level[item.prompt_level] += 1
        self.task[item.task] += 1
        self.answers.add(item)
        letters = answer_letters(item.answer)
        if not is_grounding(item):
            for letter in letters:
                self.card_letters[item.task][letter] += 1
        plot = self.plot_letters.setdefault(item.task, Counter())
        counts = self.n_options.setdefault(item.task, array("H"))
        if item.options:
            self.with_options += 1
            plot.update(letters)
            counts.append(len(item.options))
        if "," in item.answer:
            self.multi_select.add(str(item.task))

    def letter_histogram(self) -> dict[str, dict[str, int]]:
        """Per task, how often each letter is the answer (``validate.letter_histogram`` of the
        items that are not box answers)."""
        return {t: dict(sorted(c.items())) for t, c in sorted(self.card_letters.items())}

    def random_baselines(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for task, counts in sorted(self.n_options.items()):
            multi = task in self.multi_select
            values = [option_chance(n, multi_select=multi) for n in counts]
            out[task] = sum(values) / len(values) if values else None
        return out


def card_stats(items: Iterable[Item] | CardStats) -> CardStats:
    return items if isinstance(items, CardStats) else CardStats(items)


def _table(title: str, counts: Counter) -> list[str]:
    lines = [f"| {title} | items |", "|---|---|"]
    lines += [f"| {md_cell(k)} | {v} |" for k, v in sorted(counts.items())]
    return lines + [""]


def _cross_table(counts: Counter, row_title: str) -> list[str]:
    """``counts``: ``{(row, col): n}``."""
    cols = sorted({c for _, c in counts})
    head = " | ".join(md_cell(c) for c in cols)
    lines = [f"| {row_title} | {head} | total |", "|---" * (len(cols) + 2) + "|"]
    for row in sorted({r for r, _ in counts}):
        values = [counts[(row, c)] for c in cols]
        cells = " | ".join(str(v) for v in values)
        lines.append(f"| {md_cell(row)} | {cells} | {sum(values)} |")
    return lines + [""]


def random_baselines(items: Iterable[Item] | CardStats) -> dict[str, float | None]:
    """Per task, the expected accuracy of a uniform guess (multi-select: one of the 2^n - 1
    non-empty subsets); ``None`` for a task of open box answers, where it is not defined."""
    return card_stats(items).random_baselines()


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


def root_variable(source_id: str) -> str:
    """The environment variable a published recipe reads a source's root from."""
    return "MEDVQA_ROOT_" + re.sub(r"[^A-Z0-9]+", "_", source_id.upper())


def portable_recipe(recipe_yaml: str) -> str:
    """The recipe as a card or an upload shows it: every source root (a path on the builder's
    machine) becomes ``${MEDVQA_ROOT_<ID>}`` and the embedding cache its default, so the text
    names no local folder and reruns anywhere with those variables set."""
    recipe = yaml.safe_load(recipe_yaml) or {}
    changed = False
    for source in recipe.get("sources") or []:
        if isinstance(source, dict) and source.get("root") is not None:
            source["root"] = "${" + root_variable(str(source.get("id"))) + "}"
            changed = True
    if recipe.get("embedding_cache") is not None:
        recipe["embedding_cache"] = None
        changed = True
    if not changed:
        return recipe_yaml
    return yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True)


LICENCE_FILE = "LICENSE.md"  # the ``license_link`` of a card whose licence is ``other``
TERMS = {
    "allowed": "redistributable under the sources' licences (attribution as each requires)",
    "non-commercial": "non-commercial use only",
    "not-allowed": "not redistributable: the images may not be published",
}


def licence_metadata(manifests: dict[str, SourceManifest], used: list[str]) -> dict:
    """The card's ``license`` (the one Hub licence id all sources share) or ``other`` with
    ``license_name`` and ``license_link`` (the export's LICENSE.md)."""
    ids = {manifests[s].licence_id for s in used}
    if len(ids) == 1 and "other" not in ids:
        return {"license": ids.pop()}
    terms = combined_redistribution({manifests[s].redistribution for s in used})
    name = f"{used[0]}-terms" if len(used) == 1 else f"mixed-sources-{terms}"
    return {"license": "other", "license_name": name, "license_link": LICENCE_FILE}


def _licences(manifests: dict[str, SourceManifest], used: list[str]) -> list[str]:
    terms = combined_redistribution({manifests[s].redistribution for s in used})
    lines = [
        f"Combined terms: **{TERMS[terms]}**. A build is bound by the strictest of its "
        "sources (CC BY with CC BY-NC is non-commercial; one source that does not allow "
        "redistribution makes the whole build not redistributable). Each source keeps its "
        "owners' terms:",
        "",
        "| source | licence id | redistribution | terms |",
        "|---|---|---|---|",
    ]
    for s in used:
        m = manifests[s]
        lines.append(f"| `{s}` | {m.licence_id} | {m.redistribution} | {md_cell(m.licence)} |")
    return lines + [""]


def licence_file(manifests: dict[str, SourceManifest], used: list[str], name: str) -> str:
    """LICENSE.md of an export whose card licence is ``other``: the combined terms and each
    source's."""
    return "\n".join([f"# Terms of {name}", "", *_licences(manifests, used)])


def dataset_card(
    items: Iterable[Item] | CardStats,
    manifests: dict[str, SourceManifest],
    recipe_yaml: str,
    name: str,
    configs: list[dict],
    validation: dict,
    *,
    dataset_info: list[dict] | None = None,
    plots: Sequence[str] = (),
    config_items: dict[str, int] | None = None,
    gallery: Sequence[str] = (),
) -> str:
    """The README.md text; ``items``: the items (read once) or their :class:`CardStats`;
    ``gallery``: the Examples section's lines (:mod:`.gallery`)."""
    stats = card_stats(items)
    used = sorted(stats.sources)
    lines = _front_matter(name, manifests, used, configs, dataset_info, stats)
    lines += [f"# {name}", ""] + _introduction(stats, used, validation)
    lines += ["## Licences", ""] + _licences(manifests, used)
    lines += _configs(configs, config_items, stats.total)
    lines += _contents(stats)
    if validation.get("blind"):  # the text-only audit, when the recipe ran it
        blind = validation["blind"]  # its task names are recipe text: shown, never markup
        tasks = [{**t, "task": md_cell(t["task"])} for t in blind.get("tasks", [])]
        lines += blind_table({**blind, "tasks": tasks})
    if plots:
        lines += ["## Distributions", ""] + [f"![{p}](assets/{p})" for p in plots] + [""]
    lines += list(gallery)
    lines += ["## Sources and citations", ""]
    for sid in used:
        lines += _citation(sid, manifests[sid])
    lines += _how_built(recipe_yaml)
    return "\n".join(lines)


def _front_matter(name, manifests, used, configs, dataset_info, stats) -> list[str]:
    """The card's YAML metadata block (the Hub validates it and reads it)."""
    tasks = ["visual-question-answering"]
    if stats.with_options:  # grounding-only builds (MedSG) answer with boxes, not options
        tasks.append("multiple-choice")
    header = {
        "pretty_name": name,
        **licence_metadata(manifests, used),
        "language": ["en"],
        "size_categories": [size_category(stats.total)],
        "task_categories": tasks,
        "tags": ["medical", "benchmark", "medvqa_build"],
        "configs": configs,
    }
    if dataset_info:
        header["dataset_info"] = dataset_info
    text = yaml.dump(header, Dumper=_NoAliasDumper, sort_keys=False, allow_unicode=True)
    return ["---", text.rstrip(), "---", ""]


def _introduction(stats: CardStats, used: list[str], validation: dict) -> list[str]:
    lines = [
        f"Built with medvqa_build {__version__} from the recipe below: {stats.total} items from "
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
    return lines


def _configs(configs: list[dict], config_items: dict[str, int] | None, total: int) -> list[str]:
    if not configs or not configs[0]["data_files"]:  # builds stop before this (no items)
        return ["## Configs", "", "This export holds no items.", ""]
    lines = ["## Configs", "", "| config | items | splits |", "|---|---|---|"]
    for cfg in configs:
        n = (config_items or {}).get(cfg["config_name"], total)
        splits = ", ".join(d["split"] for d in cfg["data_files"])
        lines.append(f"| `{cfg['config_name']}` | {n} | {splits} |")
    first = configs[0]
    return lines + [
        "",
        "The Parquet shards are `data/<config>/<split>-NNNNN-of-NNNNN.parquet` (here "
        f"`{first['data_files'][0]['path']}` for the default config `{first['config_name']}`).",
        "",
        "```python",
        "from datasets import load_dataset",
        f'ds = load_dataset("<repo or folder>", "{configs[0]["config_name"]}")',
        "```",
        "",
    ]


def _contents(stats: CardStats) -> list[str]:
    """Items by task and split, scene, source, split and prompt level; answer letters; the
    random baselines; the answer spread."""
    lines = ["## Contents", ""]
    lines += _cross_table(stats.task_split, "task \\ split")
    lines += _table("scene", stats.scene)
    lines += _table("source", stats.source)
    lines += _table("split", stats.split)
    lines += _table("prompt level", stats.prompt_level)
    lines += ["## Answer letters per task", "", "| task | letters |", "|---|---|"]
    for task, hist in stats.letter_histogram().items():
        lines.append(f"| {md_cell(task)} | {', '.join(f'{k}: {v}' for k, v in hist.items())} |")
    lines += [
        "",
        "## Random baselines",
        "",
        "Expected accuracy of a uniform guess (mean of 1/n_options over the task's items).",
        "",
        "| task | random accuracy |",
        "|---|---|",
    ]
    for task, value in stats.random_baselines().items():
        lines.append(f"| {md_cell(task)} | {'-' if value is None else f'{100 * value:.2f}%'} |")
    return lines + [""] + spread_table(stats.answers.spread(), md_cell)


def _citation(sid: str, m: SourceManifest) -> list[str]:
    return [
        f"### {md_text(m.title)} (`{sid}`)",
        "",
        f"- Homepage: {md_text(m.homepage)}",
        f"- Licence: {md_text(m.licence)}",
        f"- Access: {m.access} — {md_text(m.access_terms)}",
        "",
        *fenced(m.citation, "bibtex"),
        "",
    ]


def _how_built(recipe_yaml: str) -> list[str]:
    recipe_yaml = portable_recipe(recipe_yaml)
    recipe = yaml.safe_load(recipe_yaml) or {}
    embedders = _embedders(recipe_yaml)
    return [
        "## How it was built",
        "",
        f"- Recipe: `{recipe.get('name', '?')}`, benchmark `{recipe.get('benchmark', '?')}`, "
        f"seed {recipe.get('seed', 0)}",
        f"- Embedder: {', '.join(embedders) if embedders else 'none (label-pool negatives)'}",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in _versions().items()),
        *(
            ["- Source roots: `${MEDVQA_ROOT_<SOURCE>}`: set each to your copy of the source"]
            if "${MEDVQA_ROOT_" in recipe_yaml
            else []
        ),
        "",
        *fenced(recipe_yaml, "yaml"),
        "",
    ]

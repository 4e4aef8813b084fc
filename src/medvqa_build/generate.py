"""The generate stage: samples -> items, task by task, with distractors and balanced letters.

Candidates are taken round-robin over truth labels (each label's candidates in seeded random
order) until the task's quota is met, so classes are balanced as far as the data allows.
Items that cannot get enough distinct options are reported as dropped, never emitted short.
"""

from __future__ import annotations

import string
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from .errors import RecipeError
from .manifest import SourceManifest
from .negatives import SAMPLERS, NotEnoughOptions
from .negatives.placement import BalancedSlots
from .ontology import Ontology
from .recipe import Recipe, TaskSpec
from .records import Item, Sample
from .rng import rng_for
from .tasks import TASKS, Candidate, GenContext, ItemProblem

LETTERS = string.ascii_uppercase


@dataclass
class GenerateResult:
    items: list[Item] = field(default_factory=list)  # empty when a sink took them
    dropped: list[dict] = field(default_factory=list)  # {task, sample_id, reason}
    shortfall: dict[str, int] = field(default_factory=dict)  # task name -> quota not met
    count: int = 0  # items made (kept here or given to the sink)


def _round_robin(cands: list[Candidate], rng) -> list[Candidate]:
    by_truth: dict[str, list[Candidate]] = defaultdict(list)
    for c in cands:
        by_truth[c.truth].append(c)
    queues = []
    for truth in sorted(by_truth):
        group = by_truth[truth]
        queues.append([group[i] for i in rng.permutation(len(group))])
    order = []
    for depth in range(max((len(q) for q in queues), default=0)):
        order += [q[depth] for q in queues if depth < len(q)]
    return order


def _fit(sampler, spec: TaskSpec, gen, pool: Sequence[Sample], embeddings, seed: int) -> None:
    """Give a visual sampler the embedded samples of the task's pool, labelled by their truth."""
    if embeddings is None:
        raise RecipeError(
            f"task {spec.name!r}: strategy {spec.negatives.strategy!r} needs image embeddings",
            fix="this is a bug: the pipeline embeds samples when a visual strategy is used",
        )
    fit_samples, labels = [], []
    for s in pool:
        if s.sample_id in embeddings:
            truths = [c.truth for c in gen.candidates([s])]
            fit_samples.append(s)
            labels.append(truths[0] if truths else None)
    if not fit_samples:
        raise RecipeError(f"task {spec.name!r}: none of its samples could be embedded")
    vectors = np.stack([embeddings[s.sample_id] for s in fit_samples])
    sampler.fit(fit_samples, vectors, labels, rng=rng_for(seed, "fit", spec.name))


def _groups(item: Item, samples_by_id: dict[str, Sample]) -> list[str]:
    return [samples_by_id[s].group_id for s in item.sample_ids if s in samples_by_id]


def generate_items(
    recipe: Recipe,
    samples: Sequence[Sample],
    manifests: dict[str, SourceManifest],
    progress: bool = True,
    embeddings: dict[str, np.ndarray] | None = None,
    out_dir: Path | None = None,
    roots: dict[str, Path] | None = None,
    sink: Callable[[Item], None] | None = None,
) -> GenerateResult:
    """Items for every task of the recipe; ``embeddings`` (sample_id -> vector) feed the
    visual negative strategies; ``out_dir`` receives images a task synthesises. With ``sink``
    each item is handed to it as it is made (e.g. written out) instead of kept in memory."""
    result = GenerateResult()
    keep = sink if sink is not None else result.items.append
    samples_by_id = {s.sample_id: s for s in samples}
    slots = BalancedSlots(rng_for(recipe.seed, "answer-slots"))
    ontologies = {sid: Ontology.from_mapping(m.ontology) for sid, m in manifests.items()}
    test_groups: set[str] = set()  # groups of the benchmark items made so far
    # benchmark tasks first, so instruction-tuning ("train") tasks can avoid their groups
    for spec in sorted(recipe.tasks, key=lambda t: t.split != "test"):
        gen = TASKS.get(spec.generator)(spec.params)
        sampler = SAMPLERS.get(spec.negatives.strategy)(**spec.negatives.params)
        sources = spec.sources or [s.id for s in recipe.sources]
        pool_samples = [
            s
            for s in samples
            if s.source in sources
            and spec.accepts(s)
            and not (spec.split == "train" and s.group_id in test_groups)
        ]
        vocab = {
            src: gen.vocabulary([s for s in pool_samples if s.source == src]) for src in sources
        }
        if getattr(sampler, "needs_embeddings", False):
            _fit(sampler, spec, gen, pool_samples, embeddings, recipe.seed)
        rng = rng_for(recipe.seed, "generate", spec.name)
        ctx = GenContext(
            recipe=recipe,
            spec=spec,
            rng=rng,
            sampler=sampler,
            slots=slots,
            vocab=vocab,
            ontologies=ontologies,
            manifests=manifests,
            out_dir=out_dir,
            pool=tuple(pool_samples),
            roots=dict(roots or {}),
        )
        made, quota = 0, recipe.quota(spec)
        bar = tqdm(total=quota, desc=f"generate {spec.name}", disable=not progress, leave=False)
        visual = getattr(sampler, "needs_embeddings", False)
        for cand in _round_robin(gen.candidates(pool_samples), rng):
            if made >= quota:
                break
            if visual and cand.sample.sample_id not in embeddings:
                result.dropped.append(
                    {
                        "task": spec.name,
                        "sample_id": cand.sample.sample_id,
                        "reason": "image could not be embedded for visual negatives",
                    }
                )
                continue
            try:
                item = gen.make_item(cand, ctx, made)
                if spec.split != "test":
                    item = item.replace(split=spec.split)
            except (NotEnoughOptions, ItemProblem) as exc:
                result.dropped.append(
                    {"task": spec.name, "sample_id": cand.sample.sample_id, "reason": str(exc)}
                )
                continue
            keep(item)
            result.count += 1
            if spec.split == "test":
                test_groups.update(_groups(item, samples_by_id))
            made += 1
            bar.update()
        bar.close()
        if made < quota:
            result.shortfall[spec.name] = quota - made
    return result

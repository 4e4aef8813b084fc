"""The generate stage: samples -> items, task by task, with distractors and balanced letters.

Candidates are taken round-robin over truth labels (each label's candidates in seeded random
order) until the task's quota is met, so classes are balanced as far as the data allows.
Items that cannot get enough distinct options are reported as dropped, never emitted short.
"""

from __future__ import annotations

import hashlib
import string
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from .errors import RecipeError
from .manifest import SourceManifest
from .negatives import SAMPLERS, NotEnoughOptions, OptionRequest, place_answer
from .negatives.placement import BalancedSlots
from .ontology import Ontology
from .recipe import Recipe, TaskSpec
from .records import Item, Sample
from .rng import rng_for
from .tasks import TASKS, Candidate

LETTERS = string.ascii_uppercase


@dataclass
class GenerateResult:
    items: list[Item] = field(default_factory=list)
    dropped: list[dict] = field(default_factory=list)  # {task, sample_id, reason}
    shortfall: dict[str, int] = field(default_factory=dict)  # task name -> quota not met


def item_id_for(recipe: Recipe, spec: TaskSpec, cand: Candidate) -> str:
    key = repr((recipe.benchmark, spec.name, cand.sample.sample_id, cand.region_index, recipe.seed))
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _round_robin(cands: list[Candidate], rng) -> list[Candidate]:
    by_truth: dict[str, list[Candidate]] = defaultdict(list)
    for c in cands:
        by_truth[c.truth].append(c)
    queues = []
    for truth in sorted(by_truth):
        group = by_truth[truth]
        queues.append([group[i] for i in rng.permutation(len(group))])
    order = []
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop(0))
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


def generate_items(
    recipe: Recipe,
    samples: Sequence[Sample],
    manifests: dict[str, SourceManifest],
    progress: bool = True,
    embeddings: dict[str, np.ndarray] | None = None,
) -> GenerateResult:
    """Items for every task of the recipe; ``embeddings`` (sample_id -> vector) feed the
    visual negative strategies."""
    result = GenerateResult()
    slots = BalancedSlots(rng_for(recipe.seed, "answer-slots"))
    ontologies = {sid: Ontology.from_mapping(m.ontology) for sid, m in manifests.items()}
    for spec in recipe.tasks:
        gen = TASKS.get(spec.generator)(spec.params)
        sampler = SAMPLERS.get(spec.negatives.strategy)(**spec.negatives.params)
        sources = spec.sources or [s.id for s in recipe.sources]
        pool_samples = [s for s in samples if s.source in sources and spec.accepts(s)]
        vocab = {src: gen.vocabulary([s for s in pool_samples if s.source == src]) for src in sources}
        if getattr(sampler, "needs_embeddings", False):
            _fit(sampler, spec, gen, pool_samples, embeddings, recipe.seed)
        rng = rng_for(recipe.seed, "generate", spec.name)
        made = 0
        bar = tqdm(total=spec.quota, desc=f"generate {spec.name}", disable=not progress, leave=False)
        for cand in _round_robin(gen.candidates(pool_samples), rng):
            if made >= spec.quota:
                break
            source = cand.sample.source
            request = OptionRequest(
                truth=cand.truth,
                pool=tuple(vocab[source]),
                n_options=spec.n_options,
                sample=cand.sample,
                mandatory=tuple(spec.negatives.mandatory),
                ontology=ontologies.get(source, Ontology()),
            )
            try:
                negatives = sampler.sample(request, rng)
            except NotEnoughOptions as exc:
                result.dropped.append({"task": spec.name, "sample_id": cand.sample.sample_id, "reason": str(exc)})
                continue
            options, pos = place_answer(cand.truth, negatives.candidates, slots.next(spec.name, spec.n_options), rng)
            color = "red"
            question, template_id = gen.question(cand, made, color, spec.prompt_level, spec.coord_format)
            manifest = manifests[source]
            result.items.append(
                Item(
                    item_id=item_id_for(recipe, spec, cand),
                    benchmark=recipe.benchmark,
                    category=spec.category,
                    task=spec.task,
                    subtask=spec.subtask or spec.task,
                    scene=cand.sample.scene,
                    source=source,
                    sample_ids=(cand.sample.sample_id,),
                    images=(f"source://{source}/{cand.sample.image}",),
                    question=question,
                    options=tuple(options),
                    answer=LETTERS[pos],
                    gt=cand.truth,
                    prompt_level=spec.prompt_level,
                    coord_format=spec.coord_format if spec.prompt_level == "coord" else None,
                    prompt_geometry=gen.prompt_shapes(cand, spec.prompt_level, color),
                    negatives=negatives,
                    template_id=template_id,
                    split="test",
                    licence=manifest.licence,
                )
            )
            made += 1
            bar.update()
        bar.close()
        if made < spec.quota:
            result.shortfall[spec.name] = spec.quota - made
    return result

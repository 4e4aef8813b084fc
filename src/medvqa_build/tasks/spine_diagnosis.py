"""``spine_diagnosis``: SpineBench's disease diagnosis (SDD): which of 11 spinal diseases or
Healthy does the image show, with hard negatives from every source of the task (SpineBench
appendix B: truth + "Healthy" + the 3 most visually similar other diseases; when the truth is
Healthy, 4 diseases)."""

from __future__ import annotations

from collections.abc import Sequence

from ..negatives import OptionRequest, place_answer
from ..ontology import Ontology
from ..records import Item, Sample
from ..vocab import LETTERS
from .base import TASKS, Candidate, GenContext, TaskGenerator
from .columns import Columns, per_sample_hits

# SpineBench appendix Table 5, MeSH-style spelling (left/right merged, misspellings fixed)
SPINEBENCH_DISEASES = (
    "Disc space narrowing",
    "Foraminal stenosis",
    "Subarticular stenosis",
    "Osteophytes",
    "Spinal canal stenosis",
    "Spondylolisthesis",
    "Straight cervical vertebrae",
    "Vertebral collapse",
    "Cervical kyphosis",
    "Cervical lordosis",
    "Sigmoid cervical vertebrae",
)
HEALTHY = "Healthy"
SPINEBENCH_LABELS = (*SPINEBENCH_DISEASES, HEALTHY)
# samples carrying these are discarded by SpineBench's filtering step (pipeline figure)
EXCLUDED = ("Other lesions", "Surgical implant")


@TASKS.register("spine_diagnosis")
class SpineDiagnosis(TaskGenerator):
    """One item per sample with exactly one SpineBench label; distractors may come from any
    source of the task (the vocabulary is the union), never another label of the sample."""

    per_sample = True  # candidates from one sample at a time: the pool is streamed

    name = "spine_diagnosis"
    needs = "exactly one of the 11 SpineBench diseases or Healthy among the sample's labels"
    # SpineBench pipeline figure: paraphrases of one intent, one drawn per item
    templates = (
        "What kind of spinal condition is affecting this patient?",
        "Determine the spinal disease affecting this patient.",
        "Which spinal disorder is this patient suffering from?",
        "What is the nature of this patient's spinal disease?",
        "Based on this image, which spinal condition does the patient have?",
        "Identify the spinal disease shown in this image.",
    )

    @classmethod
    def requirements(cls, params: dict, prompt_level: str) -> list[set[str]]:
        return [{"labels"}]

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        allowed = set(self.params.get("labels", SPINEBENCH_LABELS))
        excluded = set(self.params.get("exclude", EXCLUDED))
        out = []
        for s in samples:
            if excluded.intersection(s.labels):
                continue
            hits = [lab for lab in s.labels if lab in allowed]
            if len(hits) == 1:
                out.append(Candidate(s, hits[0]))
        return out

    plan_columns = ("labels",)

    def column_candidates(self, batch, pool) -> Columns:
        """:meth:`candidates` from the ``labels`` column (:mod:`.columns`)."""
        allowed = self.params.get("labels", SPINEBENCH_LABELS)
        return per_sample_hits(batch, pool, allowed, self.params.get("exclude", EXCLUDED))

    def make_item(self, cand: Candidate, ctx: GenContext, index: int) -> Item:
        spec = ctx.spec
        pool = sorted({lab for labels in ctx.vocab.values() for lab in labels})
        onto = ctx.ontologies.get(cand.sample.source, Ontology())
        request = OptionRequest(
            truth=cand.truth,
            pool=tuple(p for p in pool if p == cand.truth or p not in cand.sample.labels),
            n_options=spec.n_options,
            sample=cand.sample,
            mandatory=tuple(spec.negatives.mandatory),
            ontology=onto,
            ledger=ctx.ledger,
        )
        negatives = ctx.sampler.sample(request, ctx.rng)
        slot = ctx.slots.next(spec.name, spec.n_options)
        options, pos = place_answer(cand.truth, negatives.candidates, slot, ctx.rng)
        k = int(ctx.rng.integers(len(self.templates)))
        return ctx.base_item(
            cand,
            question=self.templates[k],
            options=tuple(options),
            answer=LETTERS[pos],
            gt=cand.truth,
            negatives=negatives,
            template_id=f"{self.name}/{k}",
        )

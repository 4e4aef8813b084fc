"""``image_classification``: which finding/class does the whole image show (EndoBench's
identification tasks at the image level).

Parameters: ``labels`` (only samples whose label is one of these), ``answer_map`` (label ->
answer text, e.g. ``pylorus: stomach`` for organ identification; unmapped labels are skipped
when a map is given), ``vocabulary`` (extra answer texts distractors may come from, e.g. the
four digestive organs when a source shows only two), ``templates`` (5-8 paraphrases that
replace the class's own).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..records import Sample
from .base import TASKS, Candidate, TaskGenerator
from .columns import Columns, one_per_sample, single_labels


@TASKS.register("image_classification")
class ImageClassification(TaskGenerator):
    per_sample = True  # candidates from one sample at a time: the pool is streamed
    name = "image_classification"
    needs = "exactly one image-level label per sample"
    templates = (
        "Which finding is shown in this endoscopic image?",
        "What is the most likely finding in this endoscopy image?",
        "Identify the finding visible in this image.",
        "Which of the following best describes what this endoscopic image shows?",
        "Based on the image, which finding is present?",
        "What does this endoscopic view show?",
    )

    @classmethod
    def requirements(cls, params: dict, prompt_level: str) -> list[set[str]]:
        """Any one of these sets of sample fields feeds the task (see tasks/requirements.py)."""
        return [{"labels"}]

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        only = set(self.params.get("labels", []))
        answer_map: dict[str, str] = dict(self.params.get("answer_map", {}))
        out = []
        for s in samples:
            if len(s.labels) != 1 or (only and s.labels[0] not in only):
                continue
            if answer_map and s.labels[0] not in answer_map:
                continue
            out.append(Candidate(s, answer_map.get(s.labels[0], s.labels[0])))
        return out

    plan_columns = ("labels",)

    def column_candidates(self, batch, pool) -> Columns:
        """:meth:`candidates` from the ``labels`` column (:mod:`.columns`)."""
        only = set(self.params.get("labels", []))
        answer_map: dict[str, str] = dict(self.params.get("answer_map", {}))
        at, labels = single_labels(batch, pool)

        def truth(label: str) -> str | None:
            if (only and label not in only) or (answer_map and label not in answer_map):
                return None
            return answer_map.get(label, label)

        return one_per_sample(at, labels, truth)

    def vocabulary(self, samples: Sequence[Sample]) -> list[str]:
        extra = [str(v) for v in self.params.get("vocabulary", [])]
        return sorted({c.truth for c in self.candidates(samples)} | set(extra))

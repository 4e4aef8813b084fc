"""``image_classification``: which finding/class does the whole image show (EndoBench's
identification tasks at the image level)."""

from __future__ import annotations

from collections.abc import Sequence

from ..records import Sample
from .base import TASKS, Candidate, TaskGenerator


@TASKS.register("image_classification")
class ImageClassification(TaskGenerator):
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

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        only = set(self.params.get("labels", []))
        return [
            Candidate(s, s.labels[0])
            for s in samples
            if len(s.labels) == 1 and (not only or s.labels[0] in only)
        ]

"""``attribute_classification``: the value of a per-sample attribute, e.g. the surgical phase
of a video frame (EndoBench's Macro Phases Identification)."""

from __future__ import annotations

from collections.abc import Sequence

from ..records import Sample
from .base import TASKS, Candidate, TaskGenerator


@TASKS.register("attribute_classification")
class AttributeClassification(TaskGenerator):
    name = "attribute_classification"
    needs = "a sample attribute named by params.attribute (e.g. phase)"
    templates = (
        "Which surgical phase is shown in this frame?",
        "What phase of the procedure does this image belong to?",
        "Identify the surgical phase depicted in this frame.",
        "During which phase of the operation was this frame captured?",
        "Which stage of the surgery is shown here?",
    )

    @property
    def attribute(self) -> str:
        return str(self.params.get("attribute", "phase"))

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        return [Candidate(s, s.attributes[self.attribute]) for s in samples if self.attribute in s.attributes]

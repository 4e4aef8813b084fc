"""``attribute_classification``: the value of a per-sample attribute, e.g. the surgical phase
of a video frame (EndoBench's Macro Phases Identification).

Parameters: ``attribute`` (default ``phase``), ``values`` (only these answers), ``templates``.
A multi-valued attribute (comma-separated, e.g. PSI-AVA's union of actions) feeds only the
samples where it holds exactly one value.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..records import Sample
from .base import TASKS, Candidate, TaskGenerator
from .columns import Columns, attribute_values, one_per_sample


def single_value(raw: str | None) -> str | None:
    """The one value of a possibly comma-separated attribute, or None (empty or several)."""
    values = [v.strip() for v in (raw or "").split(",") if v.strip()]
    return values[0] if len(values) == 1 else None


@TASKS.register("attribute_classification")
class AttributeClassification(TaskGenerator):
    per_sample = True  # candidates from one sample at a time: the pool is streamed
    name = "attribute_classification"
    needs = "a sample attribute named by params.attribute (e.g. phase)"
    default_attribute = "phase"
    templates = (
        "Which surgical phase is shown in this frame?",
        "What phase of the procedure does this image belong to?",
        "Identify the surgical phase depicted in this frame.",
        "During which phase of the operation was this frame captured?",
        "Which stage of the surgery is shown here?",
    )

    @classmethod
    def requirements(cls, params: dict, prompt_level: str) -> list[set[str]]:
        return [{f"attribute:{params.get('attribute', cls.default_attribute)}"}]

    @property
    def attribute(self) -> str:
        return str(self.params.get("attribute", self.default_attribute))

    plan_columns = ("attributes",)

    def column_candidates(self, batch, pool) -> Columns:
        """:meth:`candidates` from the ``attributes`` column (:mod:`.columns`)."""
        only = set(self.params.get("values", []))

        def truth(raw: str | None) -> str | None:
            value = single_value(raw)
            return value if value is not None and (not only or value in only) else None

        return one_per_sample(pool, attribute_values(batch, pool, self.attribute), truth)

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        only = set(self.params.get("values", []))
        out = []
        for s in samples:
            value = single_value(s.attributes.get(self.attribute))
            if value is not None and (not only or value in only):
                out.append(Candidate(s, value))
        return out

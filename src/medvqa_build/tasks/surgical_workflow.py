"""Surgical workflow: EndoBench's Macro Phases Identification (surgical phase, surgical step)
and Micro Operation Analysis (surgical action, tool-tissue interaction).

Phase and step are frame attributes (Cholec80 phase tables, PSI-AVA ``phase``/``step``).
Actions and interactions are per instrument where the source says so (PSI-AVA's
``region<k>.actions``): the question names the instrument, and an instrument whose label occurs
twice in the frame or that does several things at once is skipped (the answer would be
ambiguous). Without per-region values the frame-level attribute is used when single-valued.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..records import Item, Sample
from .attribute_classification import AttributeClassification, single_value
from .base import TASKS, Candidate, GenContext
from .common import sampled_distractors, sampled_item, templated


@TASKS.register("surgical_phase")
class SurgicalPhase(AttributeClassification):
    name = "surgical_phase"
    needs = "a phase attribute per frame (params.attribute, default phase)"
    default_attribute = "phase"
    templates = (
        "Which surgical phase is shown in this frame?",
        "What phase of the procedure does this image belong to?",
        "Identify the surgical phase depicted in this frame.",
        "During which phase of the operation was this frame captured?",
        "Which stage of the surgery is shown here?",
        "At what phase of the operation is the surgical team in this image?",
    )


@TASKS.register("surgical_step")
class SurgicalStep(AttributeClassification):
    name = "surgical_step"
    needs = "a step attribute per frame (params.attribute, default step)"
    default_attribute = "step"
    templates = (
        "Which surgical step is being performed in this frame?",
        "What step of the procedure does this image show?",
        "Identify the surgical step depicted in this image.",
        "Which step of the operation is under way in this frame?",
        "What is the surgeon doing at this step of the procedure?",
    )


class InstrumentActivity(AttributeClassification):
    """Per-instrument value of ``params.field`` (``region<k>.<field>`` attributes), else the
    frame's single value of it. ``values`` keeps only those answers."""

    default_attribute = "actions"
    frame_templates: tuple[str, ...] = ()

    @classmethod
    def requirements(cls, params: dict, prompt_level: str) -> list[set[str]]:
        field = params.get("field", params.get("attribute", cls.default_attribute))
        return [{f"region_attribute:{field}", "regions"}, {f"attribute:{field}"}]

    @property
    def field(self) -> str:
        return str(self.params.get("field", self.params.get("attribute", self.default_attribute)))

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        only = set(self.params.get("values", []))
        out = []
        for s in samples:
            per_region = [
                k for k in range(len(s.regions)) if f"region{k}.{self.field}" in s.attributes
            ]
            if per_region:
                twice = {lab for lab, n in Counter(r.label for r in s.regions).items() if n > 1}
                for k in per_region:
                    value = single_value(s.attributes[f"region{k}.{self.field}"])
                    region = s.regions[k]
                    if (
                        value is not None
                        and region.label not in twice
                        and (not only or value in only)
                    ):
                        out.append(Candidate(s, value, region, k))
                continue
            value = single_value(s.attributes.get(self.field))
            if value is not None and (not only or value in only):
                out.append(Candidate(s, value))
        return out

    def make_item(self, cand: Candidate, ctx: GenContext, index: int) -> Item:
        negatives = sampled_distractors(cand, ctx, cand.truth, ctx.spec.n_options)
        if cand.region is not None:
            question, template_id = templated(self, index, tool=cand.region.label)
        else:
            k = index % len(self.frame_templates)
            question, template_id = self.frame_templates[k], f"{self.name}/frame/{k}"
        return sampled_item(
            cand,
            ctx,
            negatives,
            question,
            template_id,
            prompt_geometry=self.prompt_shapes(cand, ctx.shape_kind, "red"),
        )


@TASKS.register("surgical_action")
class SurgicalAction(InstrumentActivity):
    name = "surgical_action"
    needs = "per-instrument action lists (region<k>.actions) or a single-valued actions attribute"
    default_attribute = "actions"
    templates = (
        "What action is the {tool} performing in this frame?",
        "Which action is being carried out with the {tool}?",
        "Identify the action of the {tool} in this surgical image.",
        "What is the {tool} doing in this image?",
        "Which atomic action does the {tool} perform here?",
    )
    frame_templates = (
        "What action is being performed in this surgical frame?",
        "Which surgical action is shown in this image?",
        "Identify the action carried out by the instrument in this frame.",
        "What is the instrument doing in this image?",
        "Which atomic action is under way in this frame?",
    )


@TASKS.register("tool_tissue_interaction")
class ToolTissueInteraction(InstrumentActivity):
    name = "tool_tissue_interaction"
    needs = "per-instrument interaction values (region<k>.<field>) or a single-valued attribute"
    default_attribute = "interaction"
    templates = (
        "How is the {tool} interacting with the tissue in this frame?",
        "What interaction between the {tool} and the tissue is shown?",
        "Which tool-tissue interaction does the {tool} perform here?",
        "Describe the interaction of the {tool} with the tissue in this image.",
        "What is the {tool} doing to the tissue?",
    )
    frame_templates = (
        "How is the instrument interacting with the tissue in this frame?",
        "Which tool-tissue interaction is shown in this image?",
        "What interaction between instrument and tissue is under way here?",
        "Describe the tool-tissue interaction visible in this frame.",
        "What is the instrument doing to the tissue in this image?",
    )

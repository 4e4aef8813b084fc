"""``region_selection``: four boxes in red, blue, yellow and green, one around the finding;
"which box shows the <finding>?" with the four colour names as options (EndoBench's Region
Selection). The three other boxes are true boxes of other images of the pool
(:mod:`.box_options`) and overlap neither the target nor any other annotated region (IoU below
``params.max_iou``), so exactly one box holds the finding.

The question never names a colour; the target's colour is the one the task has given least
so far (ties in seeded order) and the answer letter comes from the task's balanced slots, so
colours are balanced and colour and letter independent.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..records import DrawnShape, Item, Sample
from .base import TASKS, Candidate, GenContext, ItemProblem, TaskGenerator
from .box_options import ScansBoxes
from .common import RegionBoxCandidates, choice_item, distractor_boxes, templated

COLOR_NAMES = ("red", "blue", "yellow", "green")  # render.COLORS, in EndoBench's option words


@TASKS.register("region_selection")
class RegionSelection(ScansBoxes, RegionBoxCandidates, TaskGenerator):
    per_sample = True  # candidates from one sample at a time: the pool is streamed
    answer_is_truth = False  # the answer is a colour
    name = "region_selection"
    needs = "regions with a box"
    templates = (
        "Which of the marked boxes contains the {finding} in this endoscopic image?",
        "Four regions are outlined in this image. Which one shows the {finding}?",
        "Select the outlined area that corresponds to the {finding}.",
        "In which of the highlighted boxes is the {finding} located?",
        "Which outlined region in this image contains the {finding}? Answer with the box's colour.",
        "The image shows four outlined areas. Which of them marks the {finding}?",
    )

    def vocabulary(self, samples: Sequence[Sample]) -> list[str]:
        return list(COLOR_NAMES)

    def answer_key(self, candidate: Candidate) -> None:
        return None  # the answer is a colour drawn at random: never a repeat

    def make_item(self, cand: Candidate, ctx: GenContext, index: int) -> Item:
        if cand.region is None or cand.region.bbox is None:
            raise ItemProblem("region selection needs a region box")
        boxes = distractor_boxes(cand, ctx, len(COLOR_NAMES) - 1, self.params, self.boxes)
        colours = [COLOR_NAMES[i] for i in ctx.rng.permutation(len(COLOR_NAMES))]
        # the target's colour: the one the task has given least so far (ties in the seeded
        # order), so no colour is the answer more often than the others (drawn at random, red
        # was the answer of 36 % of the replica's 129 items, and the blind audit learned it)
        target = min(colours, key=lambda c: ctx.ledger.answers[c])
        others = [c for c in colours if c != target]
        ctx.ledger.record(target, others)
        shapes = [
            DrawnShape(
                image_index=0,
                kind="box",
                label=cand.region.label,
                color=target,
                bbox=cand.region.bbox,
            )
        ]
        shapes += [
            DrawnShape(image_index=0, kind="box", color=c, bbox=tuple(b))
            for c, b in zip(others, boxes, strict=True)
        ]
        shapes = [shapes[i] for i in ctx.rng.permutation(len(shapes))]  # drawing order
        question, template_id = templated(self, index, finding=cand.region.label)
        return choice_item(
            cand,
            ctx,
            target,
            others,
            question=question,
            template_id=template_id,
            strategy="pool_boxes" if self.boxes is not None else "similar_size_boxes",
            gt=target,
            prompt_level="multi",
            prompt_geometry=tuple(shapes),
        )

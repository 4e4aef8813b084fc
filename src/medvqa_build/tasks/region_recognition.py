"""``region_recognition``: what lies in a marked region (EndoBench's Region Recognition; the
recipe's prompt level chooses box, contour, mask, point or coordinates in the text).

``params.labels`` keeps only those region labels; ``params.vocabulary`` adds answer texts
distractors may come from. At the ``multi`` level (EndoBench's Mul) the target and up to
three other regions of the image are outlined in distinct colours and the question names the
target's colour; when the image has no other region, boxes of about the target's size
elsewhere fill the prompt up to ``params.min_marks`` (default 2). The target's colour is
drawn at random.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..geometry import iou
from ..records import DrawnShape, Item, Sample
from .base import TASKS, Candidate, GenContext, TaskGenerator
from .columns import Columns, region_columns
from .common import distractor_boxes, region_candidates, sampled_distractors, sampled_item
from .region_selection import COLOR_NAMES


@TASKS.register("region_recognition")
class RegionRecognition(TaskGenerator):
    per_sample = True  # candidates from one sample at a time: the pool is streamed
    name = "region_recognition"
    needs = "regions with a box (and a mask for contour/mask levels)"
    templates = (
        "What finding is inside the {color} box in this endoscopic image?",
        "Which finding is highlighted by the {color} rectangle?",
        "Identify the finding within the {color} outlined area.",
        "What is shown in the region marked in {color}?",
        "Please specify the finding within the {color} delineated area of this image.",
    )

    level_templates = {
        "contour": (
            "What finding is inside the {color} contour in this endoscopic image?",
            "Which finding is outlined in {color}?",
            "Identify the finding enclosed by the {color} outline.",
            "What is shown in the region marked in {color}?",
            "Please specify the finding within the {color} contour of this image.",
        ),
        "mask": (
            "What finding is covered by the {color} overlay in this endoscopic image?",
            "Which finding is highlighted by the {color} shaded region?",
            "Identify the finding under the {color} mask.",
            "What is shown in the region marked in {color}?",
            "Please specify the finding within the {color} highlighted area of this image.",
        ),
        "point": (
            "What finding is at the {color} point in this endoscopic image?",
            "Which finding does the {color} dot mark?",
            "Identify the finding under the {color} marker.",
            "What is shown at the location marked in {color}?",
            "Please specify the finding indicated by the {color} point in this image.",
        ),
    }

    coord_templates = (
        "Please specify the findings at {box} in this endoscopic image.",
        "What finding is located at {box} in this image?",
        "Identify the finding within the region {box}.",
        "Which finding occupies the area {box} of this endoscopic image?",
        "What is shown in the region {box}?",
    )

    @classmethod
    def requirements(cls, params: dict, prompt_level: str) -> list[set[str]]:
        if prompt_level in ("contour", "mask"):
            return [{"regions", "masks"}]
        return [{"regions"}]

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        return region_candidates(samples, self.params.get("labels", ()))

    plan_columns = ("regions.list.element.label", "regions.list.element.bbox")

    def column_candidates(self, batch, pool) -> Columns:
        """:meth:`candidates` from the ``regions`` column (:mod:`.columns`)."""
        return region_columns(batch, pool, self.params.get("labels", ()))

    def vocabulary(self, samples: Sequence[Sample]) -> list[str]:
        """Region labels of ``samples``, plus ``params.vocabulary`` only for a source with fewer
        labels than the task has options (e.g. a polyp-only segmentation set). Where a source's
        own labels fill the options, a vocabulary word that is never the answer would be a
        shortcut: the option seen most often across items would be right (issue 26's audit)."""
        observed = {c.truth for c in self.candidates(samples)}
        if self.n_options is not None and len(observed) >= self.n_options:
            return sorted(observed)
        return sorted(observed | {str(v) for v in self.params.get("vocabulary", [])})

    def make_item(self, cand: Candidate, ctx: GenContext, index: int) -> Item:
        if ctx.spec.prompt_level != "multi" or cand.region is None:
            return super().make_item(cand, ctx, index)
        marks = self._multi_marks(cand, ctx)  # may raise ItemProblem: before any slot is taken
        negatives = sampled_distractors(cand, ctx, cand.truth, ctx.spec.n_options)
        colours = [COLOR_NAMES[i] for i in ctx.rng.permutation(len(COLOR_NAMES))]
        shapes = [
            DrawnShape(image_index=0, kind="box", label=label, color=c, bbox=tuple(box))
            for c, (label, box) in zip(colours, marks, strict=False)
        ]
        shapes = [shapes[i] for i in ctx.rng.permutation(len(shapes))]  # drawing order
        question, template_id = self.question(cand, index, colours[0], "multi")
        return sampled_item(
            cand,
            ctx,
            negatives,
            question,
            template_id,
            prompt_geometry=tuple(shapes),
        )

    def _multi_marks(self, cand: Candidate, ctx: GenContext) -> list[tuple[str | None, tuple]]:
        """The target first, then other regions clear of it, then filler boxes if needed."""
        max_iou = float(self.params.get("max_iou", 0.1))
        target = cand.region.bbox
        marks: list[tuple[str | None, tuple]] = [(cand.region.label, target)]
        for k, r in enumerate(cand.sample.regions):
            if len(marks) == len(COLOR_NAMES):
                break
            if (
                k != cand.region_index
                and r.bbox is not None
                and all(iou(r.bbox, b) < max_iou for _, b in marks)
            ):
                marks.append((r.label, r.bbox))
        need = int(self.params.get("min_marks", 2)) - len(marks)
        if need > 0:
            marks += [(None, b) for b in distractor_boxes(cand, ctx, need, self.params)]
        return marks

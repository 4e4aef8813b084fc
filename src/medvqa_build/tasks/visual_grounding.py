"""``visual_grounding``: "where is the <finding>?" with four coordinate strings as options, the
target's box and three true boxes of other images of the pool that overlap neither it nor any
other annotated region (EndoBench's Visual Grounding; :mod:`.box_options` says why). The
image is shown clean; the boxes are written in the
recipe's ``coord_format`` (EndoBench: ``abs``, "[x1, y1, x2, y2]" in pixels)."""

from __future__ import annotations

from ..geometry import COORD_HINTS, format_box
from ..records import Item
from .base import TASKS, Candidate, GenContext, ItemProblem, TaskGenerator
from .box_options import GeometryBalance, ScansBoxes
from .common import RegionBoxCandidates, choice_item, distractor_boxes, templated


@TASKS.register("visual_grounding")
class VisualGrounding(ScansBoxes, RegionBoxCandidates, TaskGenerator):
    per_sample = True  # candidates from one sample at a time: the pool is streamed
    answer_is_truth = False  # the answer is a box
    name = "visual_grounding"
    needs = "regions with a box"
    n_options = 4
    templates = (
        "Where is the {finding} located in this endoscopic image?",
        "Which bounding box encloses the {finding} in this image?",
        "Locate the {finding} in this image.",
        "Give the bounding box of the {finding} visible in this endoscopy image.",
        "Which region of this image contains the {finding}?",
        "Find the {finding} in this image and select its bounding box.",
    )

    def answer_key(self, candidate: Candidate) -> None:
        return None  # the answer is the region's own box: never a repeat

    def _balanced_boxes(self, cand: Candidate, ctx: GenContext, n: int, fresh) -> list:
        """Distractor boxes drawn ``params.geometry_draws`` (8) times, keeping the set that
        leaves the task's answers least apart from its distractors in every geometric
        statistic (:class:`.box_options.GeometryBalance`): size, aspect, distance to the
        centre and to the border, distance to the mean of the others, each as the answer's
        offset from the item's mean, its rank, and whether it is the largest or the smallest.
        Boxes drawn for room alone leave the answer larger than the distractors (a large
        finding leaves room only for smaller ones), and forcing its size rank instead left a
        gap pattern (the audit's size columns alone: 39 % against 25 % on the EndoBench
        replica). Without the task's box pool (or with ``params.geometry_balance: false``)
        one set is drawn."""
        draws = int(self.params.get("geometry_draws", 8))
        if self.boxes is None or not self.params.get("geometry_balance", True) or draws < 2:
            return distractor_boxes(cand, ctx, n, self.params, self.boxes, fresh)
        balance = self.__dict__.setdefault("_geometry", GeometryBalance())
        target, s = cand.region.bbox, cand.sample
        options = [distractor_boxes(cand, ctx, n, self.params, self.boxes, fresh)]
        # the first draw succeeded, so the image has room; then sets with each number of
        # boxes larger than the answer (where the image leaves room for them), so that a
        # large answer can still have larger distractors, then free draws
        for larger in [*range(n + 1), *[None] * (draws - n - 2)]:
            try:
                got = distractor_boxes(cand, ctx, n, self.params, self.boxes, fresh, larger)
            except ItemProblem:
                continue
            options.append(got)
        return options[balance.choose([[target, *o] for o in options], s.width, s.height)]

    def make_item(self, cand: Candidate, ctx: GenContext, index: int) -> Item:
        if cand.region is None or cand.region.bbox is None:
            raise ItemProblem("visual grounding needs a region box")
        s, fmt, n = cand.sample, ctx.spec.coord_format, self.n_options

        def text(box) -> str:
            return format_box(box, fmt, s.width, s.height)

        def fresh(box) -> bool:  # a text new to the task: none is shown twice (issue 32.3)
            t = text(box)
            return not (ctx.ledger.answers[t] or ctx.ledger.distractors[t])

        try:
            truth = text(cand.region.bbox)
        except ValueError as exc:
            raise ItemProblem(f"cannot write the box: {exc}") from None
        if not fresh(cand.region.bbox):
            # the same box in another frame or image: shown twice, its count would tell the
            # answer (an answer's text would be seen more often than a distractor's)
            raise ItemProblem(f"repeat: the box {truth} was already shown in this task")
        boxes = self._balanced_boxes(cand, ctx, n - 1, fresh)
        try:
            others = [text(b) for b in boxes]
        except ValueError as exc:
            raise ItemProblem(f"cannot write the box: {exc}") from None
        question, template_id = templated(self, index, finding=cand.region.label)
        item = choice_item(
            cand,
            ctx,
            truth,
            others,
            question=f"{question} {COORD_HINTS[fmt]}",
            template_id=template_id,
            strategy="pool_boxes" if self.boxes is not None else "similar_size_boxes",
            gt=truth,
            answer_bbox=cand.region.bbox,
            coord_format=fmt,
            prompt_level="image",
        )
        ctx.ledger.record(truth, others)
        return item

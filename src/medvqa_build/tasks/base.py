"""What a task generator is: it lists candidate (sample, truth[, region]) pairs, names the
label vocabulary distractors come from, and words the question from rotating templates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from ..records import DrawnShape, Region, Sample
from ..registry import Registry


@dataclass(frozen=True)
class Candidate:
    """One possible item: the sample, the true answer text and, for region tasks, the region."""

    sample: Sample
    truth: str
    region: Region | None = None
    region_index: int | None = None


class TaskGenerator:
    """Base of every generator. Subclasses set ``needs`` and ``templates`` and implement
    :meth:`candidates` and :meth:`truth_vocabulary`."""

    name: ClassVar[str]
    needs: ClassVar[str]  # human-readable: which sample field feeds the task
    templates: ClassVar[tuple[str, ...]]

    def __init__(self, params: dict | None = None):
        self.params = dict(params or {})

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        raise NotImplementedError  # pragma: no cover - abstract

    def vocabulary(self, samples: Sequence[Sample]) -> list[str]:
        """The answer vocabulary over ``samples`` (distractors for ``label_pool`` come from it)."""
        return sorted({c.truth for c in self.candidates(samples)})

    coord_templates: ClassVar[tuple[str, ...]] = ()

    def question(
        self,
        candidate: Candidate,
        template_index: int,
        color: str = "red",
        level: str = "image",
        convention: str = "abs",
    ) -> tuple[str, str]:
        """``(question text, template_id)`` — templates rotate deterministically by index.

        At the ``coord`` level the text keeps a ``{box}`` slot for the box in ``convention``.
        """
        if level == "coord" and self.coord_templates and candidate.region is not None:
            from ..render import COORD_HINTS

            # "{box}" is filled by the render stage from the box as finally drawn (after any
            # resize), so the text and the pixels the model sees cannot disagree.
            k = template_index % len(self.coord_templates)
            return f"{self.coord_templates[k]} {COORD_HINTS[convention]}", f"{self.name}/coord/{k}"
        k = template_index % len(self.templates)
        return self.templates[k].format(color=color), f"{self.name}/{k}"

    def prompt_shapes(self, candidate: Candidate, level: str, color: str) -> tuple[DrawnShape, ...]:
        """What the render stage should draw (planned; the renderer records what it drew)."""
        if level == "image" or candidate.region is None:
            return ()
        kind = {"box": "box", "contour": "contour", "mask": "mask", "point": "point", "coord": "text"}[level]
        return (
            DrawnShape(
                image_index=0,
                kind=kind,
                label=candidate.region.label,
                color=color,
                bbox=candidate.region.bbox,
                mask=candidate.region.mask,
            ),
        )


TASKS: Registry[type[TaskGenerator]] = Registry("task generator")

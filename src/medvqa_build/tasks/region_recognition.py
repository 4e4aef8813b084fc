"""``region_recognition``: what lies in a marked region (EndoBench's Region Recognition; the
recipe's prompt level chooses box, contour, mask, point or coordinates in the text)."""

from __future__ import annotations

from collections.abc import Sequence

from ..records import Sample
from .base import TASKS, Candidate, TaskGenerator


@TASKS.register("region_recognition")
class RegionRecognition(TaskGenerator):
    name = "region_recognition"
    needs = "regions with a box (and a mask for contour/mask levels)"
    templates = (
        "What finding is inside the {color} box in this endoscopic image?",
        "Which finding is highlighted by the {color} rectangle?",
        "Identify the finding within the {color} outlined area.",
        "What is shown in the region marked in {color}?",
        "Please specify the finding within the {color} delineated area of this image.",
    )

    coord_templates = (
        "Please specify the findings at {box} in this endoscopic image.",
        "What finding is located at {box} in this image?",
        "Identify the finding within the region {box}.",
        "Which finding occupies the area {box} of this endoscopic image?",
        "What is shown in the region {box}?",
    )

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        out = []
        for s in samples:
            for k, region in enumerate(s.regions):
                if region.bbox is not None:
                    out.append(Candidate(s, region.label, region, k))
        return out

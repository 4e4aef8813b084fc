"""Worked example of CONTRIBUTING.md, "Add a renderer": the ``bold_box`` prompt level.

The box level's outline at twice its stroke, for small images. To add a prompt level, copy this
file to ``src/medvqa_build/render/<name>.py``, rename the level and the class, and add its
import line to ``src/medvqa_build/render/__init__.py`` where it should be listed.
``tests/e2e/test_extension_examples.py`` runs this file as it is (registered for the test only).
"""

import dataclasses

from medvqa_build.render.base import RENDERERS, PlannedRenderer
from medvqa_build.render.box import plan_box_mark


class BoldBoxRenderer(PlannedRenderer):
    """``bold_box``: the box level's outline at twice its stroke."""

    name = "bold_box"
    shape_kind = "box"  # what a task plans and the alignment check verifies

    def plan_mark(self, mark, style, h, w, root=None, channels="rgb"):
        bold = dataclasses.replace(style, thickness_px=2 * style.thickness_for(h, w))
        return plan_box_mark(mark, bold, h, w, root, channels)


RENDERERS.add("bold_box", BoldBoxRenderer())

"""``image``: no visual prompt at all (EndoBench's image level); ``none`` is another name for it."""

from __future__ import annotations

from pathlib import Path

from .base import RENDERERS, Mark, PlannedRenderer, Stroke, Style


class NoPromptRenderer(PlannedRenderer):
    name = "image"

    def plan(
        self,
        marks: list[Mark],
        style: Style,
        h: int,
        w: int,
        root: Path | None = None,
        channels: str = "rgb",
    ) -> list[Stroke]:
        return []


RENDERERS.add("image", NoPromptRenderer())
RENDERERS.add("none", RENDERERS.get("image"))

"""Clinician review: a static HTML gallery of a build and applying the reviewers' decisions."""

from .decisions import ReviewError, apply_decisions, build_id, read_decisions
from .preview import write_preview

__all__ = ["ReviewError", "apply_decisions", "build_id", "read_decisions", "write_preview"]

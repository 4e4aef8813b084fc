"""Question generators, one module per task family, registered by name in ``TASKS``."""

from .base import TASKS, Candidate, TaskGenerator
from . import attribute_classification, image_classification, region_recognition  # noqa: F401

__all__ = ["TASKS", "Candidate", "TaskGenerator"]

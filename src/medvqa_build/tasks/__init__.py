"""Question generators, one module per task family, registered by name in ``TASKS``."""

from . import attribute_classification, image_classification, region_recognition  # noqa: F401
from .base import TASKS, Candidate, TaskGenerator

__all__ = ["TASKS", "Candidate", "TaskGenerator"]

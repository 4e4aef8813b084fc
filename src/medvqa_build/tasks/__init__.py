"""Question generators, one module per task family, registered by name in ``TASKS``.

Every module in this package is imported so its ``@TASKS.register`` runs: a new task family is
one new module.
"""

import importlib
import pkgutil

from .base import TASKS, Candidate, GenContext, ItemProblem, TaskGenerator

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module != "base":
        importlib.import_module(f"{__name__}.{_module}")

__all__ = ["TASKS", "Candidate", "GenContext", "ItemProblem", "TaskGenerator"]

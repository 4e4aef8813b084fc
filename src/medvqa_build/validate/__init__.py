"""Independent checks of a build: every violation becomes a named problem in the report.

``check_items`` is the quick per-item check the pipeline runs; ``run_rules`` runs every rule
of :data:`RULES` (docs/curation.md), including build-wide ones (letter balance, split leaks).
"""

from .checks import Problem, check_items, letter_histogram
from .report import BuildView, open_build_view, validate_build, write_validation_report
from .rules import RULE_IDS, RULES, Rule, normalise_text, run_rules

__all__ = [
    "RULES",
    "RULE_IDS",
    "BuildView",
    "Problem",
    "Rule",
    "check_items",
    "letter_histogram",
    "normalise_text",
    "open_build_view",
    "run_rules",
    "validate_build",
    "write_validation_report",
]

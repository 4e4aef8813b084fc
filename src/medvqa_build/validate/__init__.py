"""Independent checks of a build: every violation becomes a named problem in the report.

``run_rules`` runs every rule of :data:`RULES` (docs/curation.md), per item and build-wide
(letter balance, split leaks, contamination); ``write_validation_report`` writes what it
found. The validate stage and ``medvqa-build validate`` assemble the rules' inputs one way
(:mod:`medvqa_build.stages.validate`).
"""

from .report import write_validation_report
from .rules import (
    RULE_IDS,
    RULES,
    LetterTally,
    Problem,
    Rule,
    letter_histogram,
    normalise_text,
    run_rules,
)

__all__ = [
    "RULES",
    "RULE_IDS",
    "LetterTally",
    "Problem",
    "Rule",
    "letter_histogram",
    "normalise_text",
    "run_rules",
    "write_validation_report",
]

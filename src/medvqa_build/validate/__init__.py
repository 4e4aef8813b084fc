"""Independent checks of a build: every violation becomes a named problem in the report."""

from .checks import Problem, check_items, letter_histogram

__all__ = ["Problem", "check_items", "letter_histogram"]

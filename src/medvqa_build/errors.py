"""Typed errors whose messages say what went wrong, where, and how to fix it.

The CLI prints ``str(error)`` as one line and exits with ``error.exit_code``; the library
never prints. Per-file problems inside a dataset are not errors: they become quarantine
entries (see :mod:`medvqa_build.quarantine`).
"""

from __future__ import annotations


class MedvqaError(Exception):
    """Base error: one line, ``what [where]: how to fix``."""

    exit_code = 2

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None):
        self.what, self.where, self.fix = what, where, fix
        super().__init__(self._line())

    def _line(self) -> str:
        line = self.what
        if self.where:
            line = f"{line} [{self.where}]"
        if self.fix:
            line = f"{line} — fix: {self.fix}"
        return line


class UsageError(MedvqaError):
    """Bad command-line use or an unknown name (source, task, format)."""


class RecipeError(MedvqaError):
    """A recipe key has a bad value; the message names the key and the allowed values."""


class SourceError(MedvqaError):
    """A source root is missing or its layout is not what the manifest describes."""


class ValidationFailed(MedvqaError):
    """A build violates checks; exit code 1 (not a usage error)."""

    exit_code = 1

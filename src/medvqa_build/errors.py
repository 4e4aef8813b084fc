"""Typed errors whose messages say what went wrong, where, and how to fix it.

The CLI prints ``str(error)`` as one line and exits with ``error.exit_code``; the library
never prints. Per-file problems inside a dataset are not errors: they become quarantine
entries (:class:`ImageProblem` and its kin carry the reason; see
:class:`medvqa_build.records.QuarantineEntry`).
"""

from __future__ import annotations

from pydantic import ValidationError


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


class AuditError(MedvqaError):
    """The text-only audit's language model could not be asked (endpoint down, bad reply)."""


class DamagedFile(MedvqaError):
    """A file the project wrote (a build's table, ``build.json``) was changed or cut since."""


class ClusterLost(MedvqaError):
    """The Ray cluster, its head or the connection to it was lost while a stage ran; finished
    stages are kept, so a rerun resumes."""


class ValidationFailed(MedvqaError):
    """A build violates checks; exit code 1 (not a usage error)."""

    exit_code = 1


class ImageProblem(Exception):
    """A per-file problem (an unreadable image, a path leaving the root); its message is the
    quarantine reason."""


def describe_validation_error(exc: ValidationError) -> str:
    """One line naming each bad key, its value and what is allowed (for pydantic models)."""
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        value = err.get("input")
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key {key!r}")
        elif err["type"] == "missing":
            parts.append(f"missing key {key!r}")
        else:
            shown = repr(value)
            if len(shown) > 60:
                shown = shown[:57] + "..."
            parts.append(f"{key}={shown}: {msg}")
    return "; ".join(parts)

"""One image, one answer text per task (issue 32.3): a second item whose images already gave
this answer in the task (two polyps of one image asked about in turn) tells a reader who
remembers the first what the second's answer is. The generate stage drops such a candidate
before it becomes an item, lists it with its reason and counts it per task."""

from __future__ import annotations

from .base import Candidate, TaskGenerator


class AnswerRepeats:
    """The (images, answer text) pairs a task has asked so far."""

    def __init__(self, gen: TaskGenerator):
        self.gen = gen
        self._seen: set[tuple[tuple[str, ...], str]] = set()

    def _key(self, cand: Candidate) -> tuple[tuple, str] | None:
        answer = self.gen.answer_key(cand)
        if answer is None:
            return None
        return self.gen.repeat_scope(cand), answer

    def reason(self, cand: Candidate) -> str | None:
        """Why ``cand`` repeats an answer of its images (``None``: it does not)."""
        key = self._key(cand)
        if key is None or key not in self._seen:
            return None
        images = ", ".join(str(part) for part in key[0])
        return f"repeat: {images} already gave the answer {key[1]!r} in this task"

    def add(self, cand: Candidate) -> None:
        """Record the answer of a candidate that became an item."""
        key = self._key(cand)
        if key is not None:
            self._seen.add(key)

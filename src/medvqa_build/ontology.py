"""Canonical entity names with synonyms and parents, so no distractor is a synonym, an
ancestor or a descendant of the truth (``polyp`` must never be a distractor for
``adenomatous polyp``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass
class Ontology:
    """A small forest of canonical names. ``parents`` maps a name to its parent names."""

    parents: dict[str, set[str]] = field(default_factory=dict)
    synonyms: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, data: Mapping | None) -> Ontology:
        """Build from ``{"parents": {child: [parent, ...]}, "synonyms": {name: [alias, ...]}}``."""
        data = data or {}
        onto = cls()
        for child, parents in (data.get("parents") or {}).items():
            for parent in [parents] if isinstance(parents, str) else parents:
                onto.add_parent(child, parent)
        for name, aliases in (data.get("synonyms") or {}).items():
            for alias in aliases:
                onto.add_synonym(name, alias)
        return onto

    def add_parent(self, child: str, parent: str) -> None:
        self.parents.setdefault(child, set()).add(parent)

    def add_synonym(self, a: str, b: str) -> None:
        self.synonyms.setdefault(a, set()).add(b)
        self.synonyms.setdefault(b, set()).add(a)

    def ancestors(self, name: str) -> set[str]:
        seen: set[str] = set()
        stack = list(self.parents.get(name, ()))
        while stack:
            p = stack.pop()
            if p not in seen:
                seen.add(p)
                stack.extend(self.parents.get(p, ()))
        return seen

    def related(self, name: str) -> set[str]:
        """The name, its synonyms, ancestors and descendants (case-insensitive compare)."""
        out = {name} | self.synonyms.get(name, set()) | self.ancestors(name)
        for other in self.parents:
            if name in self.ancestors(other):
                out.add(other)
        return {n.casefold() for n in out}

    def allowed_distractors(self, truth: str, pool: Iterable[str]) -> list[str]:
        """``pool`` without the truth and anything related to it, order kept, no duplicates."""
        banned = self.related(truth)
        out, seen = [], set()
        for cand in pool:
            key = cand.casefold()
            if key in banned or key in seen:
                continue
            seen.add(key)
            out.append(cand)
        return out

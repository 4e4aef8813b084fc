"""One small name -> object registry used for sources, layouts, tasks, renderers, exporters.

Lookups of unknown names raise :class:`UsageError` listing the known names, so a typo in a
recipe or on the command line is one clear line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from .errors import UsageError

T = TypeVar("T")


class Registry(Generic[T]):
    """A plain, ordered name -> entry mapping with helpful errors."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}

    def add(self, name: str, entry: T) -> T:
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = entry
        return entry

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of :meth:`add`."""

        def deco(entry: T) -> T:
            return self.add(name, entry)

        return deco

    def get(self, name: str, *, where: str | None = None) -> T:
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "(none)"
            raise UsageError(
                f"unknown {self.kind} {name!r}",
                where=where,
                fix=f"use one of: {known}",
            ) from None

    def module(self, name: str) -> str:
        """The module that defines entry ``name`` (a class, a function or an instance): its
        code is what a stage that runs the entry depends on (``Stage.plugins``)."""
        return self.get(name).__module__

    def name_of(self, entry: object) -> str | None:
        """The name ``entry`` is registered under (None when it is not)."""
        return next((n for n, e in self._entries.items() if e is entry), None)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def registered(self) -> list[str]:
        """The names in the order they were registered (import order: a documented order)."""
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

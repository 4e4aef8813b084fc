"""The exporter interface: one build context in, one output folder out, byte-identical per
recipe."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..manifest import SourceManifest
from ..records import Item
from ..registry import Registry


@dataclass(frozen=True)
class ExportContext:
    """Everything an exporter may use; no exporter reads the build directory by itself."""

    # Re-iterable: a list, or an on-disk ``tables.ItemTable`` read batch by batch on each
    # ``for``. Exporters iterate it (several times if they must) and keep small per-item
    # summaries only, never every item (or every image) at once.
    items: Iterable[Item]
    resolve: Callable[[str], Path]  # image reference -> file
    name: str  # export name from the recipe (file names, dataset name)
    recipe_yaml: str
    manifests: dict[str, SourceManifest]
    validation: dict[str, Any] = field(default_factory=dict)  # {"problems": n, "failed": bool}
    options: dict[str, Any] = field(default_factory=dict)  # recipe export.options[<format>]


EXPORTERS: Registry[Callable[[ExportContext, Path], dict[str, Any]]] = Registry("export format")

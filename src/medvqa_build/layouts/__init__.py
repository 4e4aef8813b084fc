"""Generic on-disk layouts; no dataset names here. A manifest part names one of these.

Every module in this package is imported so its ``@LAYOUTS.register`` runs: adding a layout is
adding one module.
"""

import importlib
import pkgutil

from .base import LAYOUTS, Layout, ScanContext

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module not in ("base", "masks"):
        importlib.import_module(f"{__name__}.{_module}")

__all__ = ["LAYOUTS", "Layout", "ScanContext"]

"""Generic on-disk layouts; no dataset names here. A manifest part names one of these."""

from .base import LAYOUTS, Layout, ScanContext
from . import class_folders, frame_folders, label_table  # noqa: F401  (register layouts)

__all__ = ["LAYOUTS", "Layout", "ScanContext"]

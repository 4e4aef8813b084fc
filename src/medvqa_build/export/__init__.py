"""Exporters: HF Parquet folder (+ dataset card) and VLMEvalKit TSV, byte-identical per recipe."""

from . import hf as _hf  # noqa: F401  (registers "hf")
from . import vlmeval as _vlmeval  # noqa: F401  (registers "vlmeval")
from .base import EXPORTERS, ExportContext

__all__ = ["EXPORTERS", "ExportContext"]

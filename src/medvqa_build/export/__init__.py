"""Exporters: HF Parquet folder (+ card), VLMEvalKit TSV, lmms-eval tasks, LLaMA-Factory sharegpt,
MedSG-Bench and SpineBench layouts; byte-identical per recipe."""

from . import hf as _hf  # noqa: F401  (registers "hf")
from . import lmms as _lmms  # noqa: F401  (registers "lmms-eval")
from . import native as _native  # noqa: F401  (registers "medsg", "spinebench")
from . import sharegpt as _sharegpt  # noqa: F401  (registers "sharegpt")
from . import vlmeval as _vlmeval  # noqa: F401  (registers "vlmeval")
from .base import EXPORTERS, ExportContext

__all__ = ["EXPORTERS", "ExportContext"]

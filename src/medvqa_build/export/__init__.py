"""Exporters: HF Parquet folder (+ dataset card) and VLMEvalKit TSV, byte-identical per recipe."""

from .hf import export_hf
from .vlmeval import export_vlmeval

EXPORTERS = {"hf": export_hf, "vlmeval": export_vlmeval}

__all__ = ["EXPORTERS", "export_hf", "export_vlmeval"]

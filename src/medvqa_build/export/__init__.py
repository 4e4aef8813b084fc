"""Exporters: HF Parquet folder (+ card), VLMEvalKit TSV, lmms-eval tasks, LLaMA-Factory sharegpt,
MedSG-Bench and SpineBench layouts; byte-identical per recipe."""

# Each module registers its formats; the import order is the order they are listed in (the
# CLI's --format help, errors), so it is kept by hand.
# isort: off
from . import hf as _hf  # noqa: F401  (registers "hf")
from . import vlmeval as _vlmeval  # noqa: F401  (registers "vlmeval")
from . import lmms as _lmms  # noqa: F401  (registers "lmms-eval")
from . import sharegpt as _sharegpt  # noqa: F401  (registers "sharegpt")
from . import native as _native  # noqa: F401  (registers "medsg", "spinebench")

# isort: on
from ..errors import RecipeError
from .base import EXPORTERS, ExportContext, Exporter, export


def check_formats(recipe, where: str) -> None:
    """The recipe's ``export.formats`` are registered exporters."""
    bad = [v for v in recipe.export.formats if v not in EXPORTERS]
    if bad:
        raise RecipeError(
            f"bad recipe: export.formats={recipe.export.formats!r}: unknown format(s) {bad}; "
            f"allowed: {', '.join(EXPORTERS.registered())}",
            where=where,
            fix="see docs/recipes.md for every key and its allowed values",
        )


__all__ = ["EXPORTERS", "ExportContext", "Exporter", "check_formats", "export"]

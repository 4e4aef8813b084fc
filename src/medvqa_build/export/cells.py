"""Text cells a spreadsheet would run as a formula (OWASP "CSV injection"), counted, not changed.

A cell of a TSV export that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return is read by Excel or LibreOffice as a formula when someone opens the file there, and
VLMEvalKit's result workbook (written by pandas through openpyxl) stores such a text as a
formula too. OWASP's remedy is a leading ``'``, but VLMEvalKit reads the TSV with pandas and
shows the cell to the model as it is: a ``'`` would change the question the model sees, and the
benchmark with it. So the exporter keeps the text and counts these cells: a warning, the
export's stats (``formula_cells``) and the build report name them (docs/reliability.md, Output).
"""

from __future__ import annotations

from dataclasses import dataclass, field

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
EXAMPLES = 5  # cells named in the stats; the rest are counted


def formula_like(text: str | None) -> bool:
    """Whether a spreadsheet would read ``text`` as the start of a formula."""
    return bool(text) and text.startswith(FORMULA_START)


@dataclass
class FormulaCells:
    """The formula-like cells of one export: how many, and the first few as
    ``"<row index>:<column>"``."""

    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, index: int, column: str, text: str | None) -> None:
        if formula_like(text):
            self.count += 1
            if len(self.examples) < EXAMPLES:
                self.examples.append(f"{index}:{column}")

    def stats(self) -> dict:
        """The export's stats entries (none when no cell is formula-like)."""
        if not self.count:
            return {}
        return {"formula_cells": self.count, "formula_cell_examples": list(self.examples)}

    def warning(self, fmt: str) -> str:
        shown = ", ".join(self.examples) + (", ..." if self.count > len(self.examples) else "")
        return (
            f"{fmt}: {self.count} cell(s) begin with = + - @ (a spreadsheet would run them as a "
            f"formula; kept as they are, since the model must see them unchanged): {shown}"
        )

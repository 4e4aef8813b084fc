"""Cell texts that survive ``pandas.read_csv(path, sep="\\t")`` with its defaults, as VLMEvalKit
reads every TSV (``vlmeval/smp/file.py``: ``load_tsv``).

Two traps of that reader change what the model is shown:

* a cell equal to one of pandas' default ``na_values`` (``None``, ``NA``, ``null``, ``N/A``,
  ``NaN``, ``n/a``, ``nan``, ``#N/A``, ``<NA>``, ...) becomes NaN, and VLMEvalKit drops a NaN
  option from the prompt;
* a column whose non-empty cells all look numeric or boolean is converted: ``6`` comes back
  as ``6.0`` once the column has an empty cell, ``06`` as ``6.0``, ``false`` as ``False``.

The rewrite is one pair of double quotes around such a cell (``None`` -> ``"None"``; in a
numeric-looking column ``6`` -> ``"6"``). It is reversible with :func:`decode_cell`: a
cell that is already quoted and whose core is such a value gets one more pair, so removing
exactly one pair always gives the original text back.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence

# pandas._libs.parsers.STR_NA_VALUES (pandas 2.x / 3.x); tests check this against pandas.
NA_TEXTS = frozenset(
    {
        "",
        "#N/A",
        "#N/A N/A",
        "#NA",
        "-1.#IND",
        "-1.#QNAN",
        "-NaN",
        "-nan",
        "1.#IND",
        "1.#QNAN",
        "<NA>",
        "N/A",
        "NA",
        "NULL",
        "NaN",
        "None",
        "n/a",
        "nan",
        "null",
    }
)
BOOL_TEXTS = frozenset({"True", "TRUE", "true", "False", "FALSE", "false"})
_NUMBER = re.compile(
    r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*|\s*[-+]?(inf|infinity|nan)\s*", re.IGNORECASE
)


def _core(text: str) -> str:
    while len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1]
    return text


def _looks_na(core: str) -> bool:
    return core in NA_TEXTS or core.strip() in NA_TEXTS


def looks_typed(text: str) -> bool:
    """Whether pandas would read this cell as a number or a boolean."""
    return bool(_NUMBER.fullmatch(text)) or text.strip() in BOOL_TEXTS


def encode_cell(text: str, typed_column: bool = False) -> str:
    """The cell to write for ``text``; ``typed_column``: every cell of the column looks typed."""
    core = _core(text)
    if _looks_na(core) or (looks_typed(core) and (typed_column or core != text)):
        return f'"{text}"'
    return text


def decode_cell(cell: str) -> str:
    """Inverse of :func:`encode_cell` (what the recipe asked for, from what pandas read)."""
    core = _core(cell)
    if cell != core and (_looks_na(core) or looks_typed(core)):
        return cell[1:-1]
    return cell


def _plain_typed(text: str) -> bool:
    return text == _core(text) and looks_typed(text)


def encode_column(texts: Sequence[str | None]) -> list[str]:
    """Encode one column; ``None`` stays an empty cell (a missing option, read back as NaN)."""
    present = [t for t in texts if t is not None]
    typed = bool(present) and all(_plain_typed(t) for t in present)
    return ["" if t is None else encode_cell(t, typed) for t in texts]


class TypedColumns:
    """What :func:`encode_column` decides for whole columns, gathered a cell at a time: a
    column is typed when it has a cell and every cell looks typed. Encode with
    :meth:`encode` once every cell of the file was :meth:`add`-ed."""

    def __init__(self) -> None:
        self._typed: dict[Hashable, bool] = {}

    def add(self, column: Hashable, text: str | None) -> None:
        if text is not None:
            self._typed[column] = self._typed.get(column, True) and _plain_typed(text)

    def typed(self, column: Hashable) -> bool:
        return self._typed.get(column, False)

    def encode(self, column: Hashable, text: str | None) -> str:
        """The cell :func:`encode_column` gives ``text`` in its column."""
        return "" if text is None else encode_cell(text, self.typed(column))

"""Text from manifests, recipes and data written into a Markdown card as text, never as markup.

A source's title, licence or access terms, and a task or scene name, come from files a user
may have written or downloaded. The Hub renders a card's Markdown and the HTML in it, so
``<``, ``>`` and ``&`` are escaped (a tag is shown, not run), a table cell's ``|`` too (it
would cut the row), and a fenced block (a citation, the recipe) is fenced with more backticks
than it holds, so nothing inside can close it.
"""

from __future__ import annotations

import html
import re

_TICKS = re.compile(r"`+")


def md_text(value: object) -> str:
    """``value`` as Markdown text: ``&``, ``<`` and ``>`` escaped, on one line."""
    return html.escape(" ".join(str(value).split()), quote=False)


def md_cell(value: object) -> str:
    """``value`` as the text of one table cell (:func:`md_text`, and ``|`` escaped)."""
    return md_text(value).replace("|", "\\|")


def fenced(text: str, lang: str = "") -> list[str]:
    """``text`` as the lines of a fenced code block no line of it can close."""
    longest = max((len(m) for m in _TICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{lang}", text.rstrip(), fence]

"""PNG plots of a benchmark's distributions for its dataset card (matplotlib, Agg backend).

PNG bytes are deterministic: fixed size and DPI, the bundled DejaVu font, and no
``Software`` metadata. Without matplotlib, no plots are written and the card says so.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterable

from ..records import Item
from .card import CardStats, card_stats


def _bar(ax, counts: Counter, title: str) -> None:
    keys = sorted(counts)
    ax.barh(range(len(keys)), [counts[k] for k in keys], color="#4472c4")
    ax.set_yticks(
        range(len(keys)), [k if len(k) <= 40 else k[:37] + "..." for k in keys], fontsize=8
    )
    ax.invert_yaxis()
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("items", fontsize=8)


def _letters(ax, stats: CardStats) -> None:
    tasks = sorted(stats.plot_letters)
    hist: dict[str, Counter] = stats.plot_letters
    letters = sorted({k for c in hist.values() for k in c})
    left = [0] * len(tasks)
    cmap = ["#4472c4", "#ed7d31", "#a5a5a5", "#ffc000", "#5b9bd5", "#70ad47", "#264478", "#9e480e"]
    for n, letter in enumerate(letters):
        values = [hist[t][letter] for t in tasks]
        ax.barh(range(len(tasks)), values, left=left, label=letter, color=cmap[n % len(cmap)])
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_yticks(
        range(len(tasks)), [t if len(t) <= 40 else t[:37] + "..." for t in tasks], fontsize=8
    )
    ax.invert_yaxis()
    ax.set_title("answer letters per task", fontsize=10)
    if ax.get_legend_handles_labels()[0]:  # grounding-only builds have no answer letters
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="answer")


def card_plots(items: Iterable[Item] | CardStats) -> dict[str, bytes]:
    """``{file name: PNG bytes}``; empty when matplotlib is not installed. ``items``: the items
    (read once) or their :class:`~.card.CardStats`."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    stats = card_stats(items)
    panels = {
        "distribution_task.png": lambda ax: _bar(ax, stats.task, "items per task"),
        "distribution_scene.png": lambda ax: _bar(ax, stats.scene, "items per scene"),
        "distribution_source.png": lambda ax: _bar(ax, stats.source, "items per source"),
        "answer_letters.png": lambda ax: _letters(ax, stats),
    }
    out = {}
    with matplotlib.rc_context(
        {"font.family": "DejaVu Sans", "svg.hashsalt": "0", "path.simplify": True}
    ):
        for name, draw in panels.items():
            fig, ax = plt.subplots(figsize=(7, 3.2), dpi=100)
            draw(ax)
            fig.tight_layout()
            buf = io.BytesIO()
            fig.savefig(buf, format="png", metadata={"Software": None})
            plt.close(fig)
            out[name] = buf.getvalue()
    return out

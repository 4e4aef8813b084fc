"""The card's example galleries: per task, a seeded handful of items drawn as one PNG (the image
as the model sees it, the question, the lettered options with the answer marked), so a reader
sees what a question looks like before downloading anything.

Only items of sources whose owners allow redistribution are drawn (an annotations-only upload
drops the galleries altogether, :mod:`.annotations_only`). PNG bytes are deterministic as the
plots' are (:mod:`.plots`): fixed size and DPI, the bundled DejaVu font, no ``Software``
metadata; text is drawn literally (no mathtext), so a ``$`` in a label stays a ``$``.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import yaml

from ..errors import ImageProblem, MedvqaError
from ..manifest import SourceManifest
from ..markdown import md_text
from ..media.load import load_ref_rgb
from ..media.refs import split_fragment
from ..records import Item
from ..view import pick_items
from .common import slug

PER_TASK = 4  # examples in a task's gallery
PREFIX = "gallery_"  # assets/gallery_<task slug>.png: what an annotations-only upload drops
SECTION = "## Examples"


def shown_sources(manifests: dict[str, SourceManifest], used: Iterable[str]) -> list[str]:
    """The sources whose terms allow publishing their images in a card."""
    return sorted(
        s for s in used if s in manifests and manifests[s].redistribution != "not-allowed"
    )


def recipe_seed(recipe_yaml: str) -> int:
    try:
        return int((yaml.safe_load(recipe_yaml) or {}).get("seed", 0))
    except (ValueError, TypeError, yaml.YAMLError):
        return 0


def _wrap(text: str, width: int, lines: int) -> str:
    out = textwrap.wrap(text, width) or [""]
    return "\n".join(out[:lines]) + ("…" if len(out) > lines else "")


# the longest side an image is drawn from: a panel is about 260 pixels wide, and matplotlib's
# antialiased resampling holds the image as float RGBA (a 6000x6000 image: 1.9 GB resident);
# a larger image is first shrunk to it (pixel areas averaged), smaller ones are drawn as they are
GALLERY_MAX_SIDE = 2048


def _shrunk(rgb):
    """``rgb`` with its longer side at most :data:`GALLERY_MAX_SIDE` (area-averaged)."""
    import cv2

    h, w = rgb.shape[:2]
    if max(h, w) <= GALLERY_MAX_SIDE:
        return rgb
    scale = GALLERY_MAX_SIDE / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)


def _panel(ax_img, ax_text, item: Item, resolve: Callable[[str], Path]) -> None:
    ax_img.set_axis_off()
    ax_text.set_axis_off()
    try:
        fragment = split_fragment(item.images[0])[1]
        rgb = _shrunk(load_ref_rgb(resolve(item.images[0]), fragment))
        ax_img.imshow(rgb, interpolation="antialiased")
    except (IndexError, KeyError, OSError, ValueError, ImageProblem, MedvqaError):
        ax_img.text(0.5, 0.5, "(no image)", ha="center", va="center", parse_math=False)
    answers = {a.strip() for a in item.answer.split(",")}
    lines = [_wrap(item.question, 38, 3), ""]
    for k, option in enumerate(item.options):
        letter = chr(ord("A") + k)
        mark = "  ✓" if letter in answers else ""
        lines.append(f"{letter}. {_wrap(option, 32, 1)}{mark}")
    if not item.options:
        lines.append(f"answer: {_wrap(item.answer, 32, 2)}")
    lines += ["", _wrap(f"{item.source} · {item.prompt_level}", 40, 1)]
    ax_text.text(
        0.0, 1.0, "\n".join(lines), va="top", ha="left", fontsize=7.5, wrap=False, parse_math=False
    )


def task_gallery(items: Sequence[Item], resolve: Callable[[str], Path], title: str) -> bytes:
    """One task's examples side by side as PNG bytes."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"font.family": "DejaVu Sans", "svg.hashsalt": "0"}):
        fig, axes = plt.subplots(
            2,
            PER_TASK,
            figsize=(2.6 * PER_TASK, 4.6),
            dpi=100,
            gridspec_kw={"height_ratios": [1.1, 1.0]},
            squeeze=False,
        )
        for k in range(PER_TASK):
            if k < len(items):
                _panel(axes[0][k], axes[1][k], items[k], resolve)
            else:
                axes[0][k].set_axis_off()
                axes[1][k].set_axis_off()
        fig.suptitle(_wrap(title, 90, 1), fontsize=10)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", metadata={"Software": None})
        plt.close(fig)
    return buf.getvalue()


def card_galleries(
    items: Iterable[Item],
    tasks: Iterable[str],
    resolve: Callable[[str], Path],
    manifests: dict[str, SourceManifest],
    sources: Iterable[str],
    seed: int,
) -> dict[str, tuple[str, bytes]]:
    """``{task: (file name, PNG bytes)}`` for every task with items from a source shown;
    empty without matplotlib. Items are drawn per task with ``seed``
    (:func:`medvqa_build.view.pick_items`: only the drawn rows of a table are decoded)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return {}
    allowed = set(shown_sources(manifests, sources))
    out = {}
    for task in sorted(tasks):
        drawn = pick_items(items, PER_TASK, seed, task=task, sources=allowed)
        if drawn:
            out[task] = (f"{PREFIX}{slug(task)}.png", task_gallery(drawn, resolve, task))
    return out


def gallery_section(
    files: dict[str, str], shown: Sequence[str], hidden: Sequence[str], seed: int
) -> list[str]:
    """The card's Examples section: ``files`` is ``{task: asset file name}``."""
    lines = [SECTION, ""]
    if not files:
        why = (
            f"the owners of {', '.join(f'`{s}`' for s in hidden)} do not allow redistributing "
            "their images"
            if hidden
            else "no task has an item to show"
        )
        return lines + [f"No examples are shown: {why}.", ""]
    lines += [
        f"A few items of each task, drawn with seed {seed} from the sources whose terms allow "
        f"redistribution ({', '.join(f'`{s}`' for s in shown)}); the correct option is marked ✓."
    ]
    if hidden:
        lines[-1] += (
            f" Items of {', '.join(f'`{s}`' for s in hidden)} are never shown (their owners "
            "do not allow redistributing their images)."
        )
    lines.append("")
    for task, name in files.items():
        alt = md_text(task).replace("[", "(").replace("]", ")")
        lines += [f"### {md_text(task)}", "", f"![examples of {alt}](assets/{name})", ""]
    return lines


def without_galleries(card: str, reason: str) -> str:
    """A card whose Examples section says ``reason`` instead of showing images (an
    annotations-only upload)."""
    head, found, rest = card.partition("\n" + SECTION + "\n")
    if not found:
        return card
    after = rest.split("\n## ", 1)
    tail = "\n## " + after[1] if len(after) == 2 else "\n"
    return f"{head}\n{SECTION}\n\nNo examples are shown: {reason}.\n{tail}"

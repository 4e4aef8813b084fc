"""How an item looks in HTML: its images, question, lettered options with the answer marked,
task, source and prompt level. The one fragment a notebook shows (``Item._repr_html_``,
``ItemTable``, a build's ``show()``) and the review preview pages embed.

Every text is escaped: labels, titles and questions come from files nobody here wrote. Images
are given as ``src`` values (a data URI or a relative path); a notebook gets them from the
thumbnailers the builds opened in this process register (:func:`register_thumbnailer`), and an
item no build knows is shown without them.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from .rng import rng_for

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# a thumbnailer: an image reference -> an <img> src (a data URI), or None when it is not its
Thumbnailer = Callable[[str], "str | None"]
_THUMBNAILERS: dict[str, Thumbnailer] = {}

# the notebook's styles, scoped to .mvqa (the preview page styles the same classes itself)
CSS = """<style>
.mvqa{font-family:system-ui,sans-serif;font-size:13px;color:#18181b}
.mvqa .mvqa-grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:10px}
.mvqa .mvqa-item{border:1px solid #d4d4d8;border-radius:6px;padding:8px;background:#fff}
.mvqa .imgs{display:flex;gap:6px}.mvqa .imgs figure{margin:0;flex:1}
.mvqa .imgs img{max-width:100%;height:auto;border-radius:3px;background:#000}
.mvqa figcaption,.mvqa .meta{font-size:11px;color:#52525b;margin:3px 0}
.mvqa .q{font-weight:600;margin:6px 0}.mvqa ol{margin:4px 0;padding-left:22px}
.mvqa li.correct{font-weight:700;color:#15803d}.mvqa .noimg{color:#71717a;font-style:italic}
</style>"""


def esc(value: Any) -> str:
    """Text safe inside an element or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def register_thumbnailer(key: str, thumbnailer: Thumbnailer) -> None:
    """Let items show their images: the latest registered (the last build opened) is asked
    first. ``key`` (a build folder) replaces an earlier thumbnailer of the same build."""
    _THUMBNAILERS.pop(key, None)
    _THUMBNAILERS[key] = thumbnailer


def thumbnails(refs: Sequence[str]) -> list[str | None] | None:
    """A ``src`` per image reference, or None when no build is known to this process."""
    if not _THUMBNAILERS:
        return None
    out: list[str | None] = []
    for ref in refs:
        src = None
        for thumbnailer in reversed(list(_THUMBNAILERS.values())):
            src = thumbnailer(ref)
            if src is not None:
                break
        out.append(src)
    return out


def _answer_letters(answer: str) -> set[str]:
    return {a.strip() for a in (answer or "").split(",") if a.strip()}


def _images(item, srcs: Sequence[str | None] | None, clean: str | None) -> list[str]:
    if srcs is None:
        return ['<div class="meta noimg">images not shown (no build with them is open)</div>']
    figures = []
    for k, src in enumerate(srcs):
        label = (
            "as the model sees it"
            if item.prompt_level != "image" and k == 0 and clean
            else f"image {k + 1}"
        )
        body = (
            f'<img src="{esc(src)}" alt="{esc(label)}" loading="lazy">'
            if src
            else '<span class="noimg">(no image file)</span>'
        )
        figures.append(f"<figure>{body}<figcaption>{esc(label)}</figcaption></figure>")
    if clean:
        figures.append(
            f'<figure><img src="{esc(clean)}" alt="clean" loading="lazy">'
            "<figcaption>clean image</figcaption></figure>"
        )
    return ['<div class="imgs">', *figures, "</div>"]


def item_html(item, srcs: Sequence[str | None] | None, clean: str | None = None) -> str:
    """One item as an HTML fragment (``<div class="mvqa-item">``). ``srcs``: one ``src`` per
    image (None for an image without a file), or None: no images at all. ``clean``: the image
    without the drawn prompt, shown beside the first."""
    subtask = item.subtask if item.subtask != item.task else None
    meta = [item.task, subtask, item.scene, item.source, item.prompt_level]
    meta += [f"split {item.split}" if item.split else None, item.licence]
    answers = _answer_letters(item.answer)
    options = []
    for k, text in enumerate(item.options):
        letter = LETTERS[k] if k < len(LETTERS) else "?"
        mark = " ✓" if letter in answers else ""
        css = ' class="correct"' if letter in answers else ""
        options.append(f"<li{css}>{esc(text)}{mark}</li>")
    parts = [
        f'<div class="mvqa-item" data-item="{esc(item.item_id)}">',
        *_images(item, srcs, clean),
        f'<div class="meta">{" · ".join(esc(m) for m in meta if m)}</div>',
        f'<div class="q">{esc(item.question)}</div>',
    ]
    if options:
        parts += ['<ol type="A">', *options, "</ol>"]
    gt = f" ({esc(item.gt)})" if item.gt else ""
    parts += [f'<div class="meta">answer {esc(item.answer)}{gt} · {esc(item.item_id)}</div>']
    return "\n".join([*parts, "</div>"])


def notebook_item(item) -> str:
    """An item in a notebook, its images as thumbnails when a build that has them is open."""
    return f'{CSS}<div class="mvqa">{item_html(item, thumbnails(item.images))}</div>'


def summary_html(title: str, rows: Iterable[tuple[str, Any]], items: Iterable = ()) -> str:
    """A titled key/value table and a grid of items (a table or a build in a notebook)."""
    table = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    grid = "".join(item_html(i, thumbnails(i.images)) for i in items)
    body = f'<div class="mvqa-grid">{grid}</div>' if grid else ""
    return f'{CSS}<div class="mvqa"><b>{esc(title)}</b><table>{table}</table>{body}</div>'


class Gallery:
    """A grid of items that a notebook draws (``build.show()``); ``.html`` is the markup."""

    def __init__(self, title: str, items: Sequence, note: str = ""):
        self.title, self.items, self.note = title, list(items), note

    @property
    def html(self) -> str:
        grid = "".join(item_html(i, thumbnails(i.images)) for i in self.items)
        note = f'<div class="meta">{esc(self.note)}</div>' if self.note else ""
        return (
            f'{CSS}<div class="mvqa"><b>{esc(self.title)}</b>{note}'
            f'<div class="mvqa-grid">{grid}</div></div>'
        )

    def _repr_html_(self) -> str:
        return self.html

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return f"Gallery({self.title!r}, {len(self.items)} items)"


def pick_items(
    items,
    n: int = 12,
    seed: int = 0,
    *,
    task: str | None = None,
    source: str | None = None,
    sources: Collection[str] | None = None,
) -> list:
    """``n`` items drawn with ``seed`` among those of ``task`` and ``source`` (None: any; and
    of one of ``sources`` when given), in the drawn order. A table (anything with ``column``
    and ``rows``) is read two columns at a time and only the drawn rows are decoded; the same
    seed draws the same items."""
    table = hasattr(items, "column") and hasattr(items, "rows")
    # a one-shot iterator is read into a list; anything that iterates again (an export's items)
    # is read twice, keeping only two strings per item and then the drawn items
    again = not table and iter(items) is not items
    if table:
        tasks, of = items.column("task"), items.column("source")
    elif again:
        tasks, of = [], []
        for i in items:
            tasks.append(i.task)
            of.append(i.source)
    else:
        items = list(items)
        tasks, of = [i.task for i in items], [i.source for i in items]
    rows = [
        k
        for k, (t, s) in enumerate(zip(tasks, of, strict=True))
        if (task is None or t == task)
        and (source is None or s == source)
        and (sources is None or s in sources)
    ]
    order = rng_for(seed, "show", task or "", source or "").permutation(len(rows))
    chosen = [rows[k] for k in order[: max(n, 0)]]
    if again:
        wanted, kept = set(chosen), {}
        for k, item in enumerate(items):
            if k in wanted:
                kept[k] = item
        return [kept[k] for k in chosen]
    if not table:
        return [items[k] for k in chosen]
    found = {}
    wanted = sorted(chosen)
    for batch in items.rows(wanted):
        found.update(zip(wanted[len(found) : len(found) + len(batch)], batch, strict=True))
    return [found[k] for k in chosen]
